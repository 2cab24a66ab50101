"""``/`` and the probes: the built-in page for a browser, a health check that tells the truth
for Grafana ("Save & test") and orchestrators.

- ``GET /`` from a browser: the page (open; it asks for the token when the API answers 401).
- ``GET /`` from any other client: Grafana's health check, behind the token; 200 only when
  Redis answers, else 503 ``{"message": ...}``.
- ``GET /readyz``: the same check, open (a probe needs no secret in its manifest).
- ``GET /livez``: the process serves; no Redis call (a Redis outage must not restart it).
"""

from __future__ import annotations

import html
import logging
from importlib import resources

from slicecount.datasource.auth import LIVENESS, READINESS, wants_page
from slicecount.errors import StoreError, extra_imports
from slicecount.operations.batches import ping
from slicecount.reads.reader import Reader

with extra_imports("datasource", "the datasource"):
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Route

logger = logging.getLogger("slicecount.datasource")

UI = resources.files("slicecount.datasource") / "ui"
"""The built-in page and its static files (uPlot vendored: no CDN, no build step)."""
SERVICE = "slicecount datasource"


async def redis_failure(reader: Reader) -> str | None:
    """None when Redis answers a PING, else what failed (the failure, never the URL: the
    redacted detail goes to the log)."""
    try:
        if await reader.store.run(ping(reader.store.context)):
            return None
        return "no answer to PING"
    except StoreError as exc:
        logger.warning("health check: %s", exc)
        return exc.failure


def routes(reader: Reader) -> list[Route]:
    async def ready() -> Response:
        failure = await redis_failure(reader)
        if failure is None:
            return JSONResponse({"status": "ok", "service": SERVICE})
        return JSONResponse({"status": "error", "message": f"redis unavailable: {failure}"}, 503)

    # the page, with where an exemplar's trace opens (the setting trace_url: not a secret)
    trace_url = html.escape(reader.settings.trace_url or "", quote=True)
    page = (
        (UI / "index.html")
        .read_text(encoding="utf-8")
        .replace(
            '<meta name="slicecount-trace-url" content="">',
            f'<meta name="slicecount-trace-url" content="{trace_url}">',
        )
    )

    async def root(request: Request) -> Response:
        if wants_page(request.method, request.headers.get("accept", "")):
            return HTMLResponse(page)
        return await ready()

    async def readiness(request: Request) -> Response:
        return await ready()

    async def liveness(request: Request) -> Response:
        return JSONResponse({"status": "ok", "service": SERVICE})

    methods = ["GET", "HEAD"]
    return [
        Route("/", root, methods=methods),
        Route(READINESS, readiness, methods=methods),
        Route(LIVENESS, liveness, methods=methods),
    ]
