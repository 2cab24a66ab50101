# One slim image, three entrypoints chosen by the compose file's `command`:
#   the example apps:  gunicorn ... slicecount.examples.flask_app:app  |  uvicorn ... starlette_app:app
#   the datasource:    slicecount datasource --host 0.0.0.0 --port 8080   (the default)
#   the cleaner:       slicecount cleaner --interval 60
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install ".[flask,sqlalchemy]" "gunicorn>=22" \
    && useradd --system --no-create-home --uid 10001 slicecount

USER slicecount
EXPOSE 8000 8001 8080
CMD ["slicecount", "datasource", "--host", "0.0.0.0", "--port", "8080"]
