# The slicecount image: built from the wheel, with only the extras it runs (EXTRAS).
#   docker build -t slicecount .                                  the datasource and the cleaner
#   docker build --build-arg EXTRAS=examples,datasource -t slicecount-examples .
#                                                                 + the example apps (compose)
# The command picks the service:
#   slicecount datasource --host 0.0.0.0 --port 8080   (the default)
#   slicecount cleaner --interval 60  (a sidecar)  |  slicecount cleaner --once  (a CronJob)
#   gunicorn ... slicecount.examples.flask_app:app  |  uvicorn slicecount.examples.starlette_app:app

# The wheel, as `python -m build` makes it (the build context is what .dockerignore admits).
FROM python:3.12-slim AS wheel
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY src ./src
RUN pip wheel --no-deps --wheel-dir /wheels .

# The runtime: the wheel and its extras' dependencies, no sources, no build tools, not root.
FROM python:3.12-slim
ARG EXTRAS=datasource
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=wheel /wheels /wheels
RUN pip install "$(echo /wheels/slicecount-*.whl)[${EXTRAS}]" \
    && rm -rf /wheels \
    && groupadd --system --gid 10001 slicecount \
    && useradd --system --no-create-home --uid 10001 --gid 10001 slicecount

# Numeric, so that Kubernetes' runAsNonRoot can verify it (deploy/kubernetes runs as 10001).
USER 10001:10001
EXPOSE 8080
CMD ["slicecount", "datasource", "--host", "0.0.0.0", "--port", "8080"]
