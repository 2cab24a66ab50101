"""The datasource service: Grafana's JSON datasource protocol over the Redis counters.

    slicecount datasource --redis-url redis://localhost:6379/0 --port 8080

Endpoints of both the legacy SimpleJSON plugin and simpod-json-datasource; see
docs/datasource.md and ``/openapi.json`` for the shapes; docs/architecture.md for the
query loop behind them.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from slicecount import errors
from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.datasource import health
from slicecount.datasource.auth import OpenNotice, TokenAuth, open_warning
from slicecount.datasource.body import parse_json
from slicecount.datasource.openapi import openapi_document
from slicecount.datasource.prometheus import http as prometheus
from slicecount.datasource.prometheus.results import error as prometheus_error
from slicecount.datasource.render import Rendered, render
from slicecount.datasource.simpod import endpoints
from slicecount.datasource.simpod.protocol import require_object
from slicecount.reads.reader import Reader
from slicecount.store.asyncio import AsyncStore

with errors.extra_imports("datasource", "the datasource"):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import BaseRoute, Mount, Route
    from starlette.staticfiles import StaticFiles
    from starlette.types import Receive, Scope, Send

logger = logging.getLogger("slicecount.datasource")

Handler = Callable[[Reader, Mapping[str, Any]], Awaitable[Any]]


PIECE_BYTES = 1 << 18
"""A body longer than this is sent in pieces of this size, each once the last has gone: given
whole, the event loop's transport copies what the socket did not take at once and moves the
rest down after every send (a 40 MB answer held the loop for 0.6 s, and ``GET /`` waited)."""


class JSON(JSONResponse):
    """Starlette's JSONResponse, bytes for bytes, that also sends an answer encoded beforehand
    in pieces (never joined: see ``render``) and escapes a lone surrogate echoed from the
    request instead of failing on it."""

    def __init__(self, content: Any, status_code: int = 200) -> None:
        self.pieces = content.pieces if isinstance(content, Rendered) else None
        super().__init__(content, status_code)
        if self.pieces is not None:  # the length of what is sent, not of an empty body
            length = str(sum(map(len, self.pieces))).encode()
            self.raw_headers = [
                (k, length if k == b"content-length" else v) for k, v in self.raw_headers
            ]

    def render(self, content: Any) -> bytes:
        return b"" if isinstance(content, Rendered) else render(content)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        pieces = [self.body] if self.pieces is None else self.pieces
        if len(pieces) == 1 and len(pieces[0]) <= PIECE_BYTES:
            self.body = pieces[0]
            return await super().__call__(scope, receive, send)
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        sent = [
            memoryview(p)[at : at + PIECE_BYTES]
            for p in pieces
            for at in range(0, len(p), PIECE_BYTES)
        ]
        for i, piece in enumerate(sent):
            more = i < len(sent) - 1
            await send({"type": "http.response.body", "body": bytes(piece), "more_body": more})


def _endpoint(reader: Reader, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """The route of one endpoint: the body read within limits, errors mapped to statuses."""

    async def endpoint(request: Request) -> Response:
        try:
            body = await _read_json(request, reader.limits)
            return JSON(await handler(reader, body))
        except errors.LimitExceeded as exc:
            return JSON({"message": str(exc)}, status_code=422)
        except (errors.QueryError, errors.ConfigurationError) as exc:
            return JSON({"message": str(exc)}, status_code=400)
        except errors.StoreError as exc:
            logger.warning("redis unavailable: %s", exc)
            return JSON({"message": f"redis unavailable: {exc.failure}"}, status_code=503)
        except Exception as exc:  # a bug: answered here, so the connection stays open
            logger.exception("datasource failed on %s", request.url.path)
            return JSON({"message": f"internal error: {type(exc).__name__}"}, status_code=500)

    return endpoint


async def _read_json(request: Request, limits: Limits) -> Mapping[str, Any]:
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise errors.QueryError(_too_big(int(declared), limits))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise errors.QueryError(_too_big(size, limits))
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    return require_object(parse_json(raw))


def _too_big(size: int, limits: Limits) -> str:
    return f"request body is {size} bytes, more than the limit of {limits.max_body_bytes}"


async def not_found(request: Request, exc: Exception) -> Response:
    message = f"no such endpoint: {request.method} {request.url.path}"
    if request.url.path.startswith(prometheus.PREFIX):
        return JSON(*prometheus_error("not_found", message))
    return JSON({"message": message}, 404)


async def method_not_allowed(request: Request, exc: Exception) -> Response:
    message = f"{request.method} is not allowed on {request.url.path}"
    if request.url.path.startswith(prometheus.PREFIX):
        return JSON(prometheus_error("bad_data", message)[0], 405)
    return JSON({"message": message}, 405)


async def server_error(request: Request, exc: Exception) -> Response:
    logger.exception("datasource failed on %s", request.url.path, exc_info=exc)
    message = f"internal error: {type(exc).__name__}"
    if request.url.path.startswith(prometheus.PREFIX):
        return JSON(*prometheus_error("internal", message))
    return JSON({"message": message}, 500)


ROUTES: dict[str, Handler] = {
    "/query": endpoints.query,
    "/search": endpoints.search,
    "/metrics": endpoints.metrics,
    "/metric-payload-options": endpoints.metric_payload_options,
    "/variable": endpoints.variable,
    "/tag-keys": endpoints.tag_keys,
    "/tag-values": endpoints.tag_values,
    "/annotations": endpoints.legacy_annotations,
}


COLLECTOR_THRESHOLDS = (50_000, 20, 20)
"""The cyclic garbage collector's thresholds while the datasource serves (Python's: 700, 10,
10). Its caches hold a few hundred thousand small objects (series, labels, discovery
answers) that a full collection walks every time, finding nothing: a 40-route dashboard
refreshed 93 times paid 579 ms in 16 of them, up to 68 ms each (one refresh's whole time);
with these, 112 ms. Restored when the app stops."""


class _Collector:
    """How many apps serve in this process, and the thresholds found when the first started."""

    lock = threading.Lock()
    apps = 0
    before: tuple[int, int, int] = gc.get_threshold()


def _serving(change: int) -> None:
    """One app more (+1) or fewer (-1) serving in this process: the first to start raises the
    collector's thresholds, the last to stop puts back the ones it found (apps started and
    stopped in any order, as a test's are, leave them as they were)."""
    with _Collector.lock:
        if change > 0 and _Collector.apps == 0:
            _Collector.before = gc.get_threshold()
            gc.set_threshold(*COLLECTOR_THRESHOLDS)
        _Collector.apps += change
        if change < 0 and _Collector.apps == 0:
            gc.set_threshold(*_Collector.before)


def create_app(
    settings: Settings | None = None,
    *,
    store: AsyncStore | None = None,
    limits: Limits | None = None,
    clock: Callable[[], float] = time.time,
) -> Starlette:
    """The datasource as an ASGI app (``uvicorn 'slicecount.datasource.app:from_env'``)."""
    owned = store is None
    store = store if store is not None else AsyncStore(settings or Settings.from_env(), clock=clock)
    reader = Reader(store, limits or Limits(), clock)

    async def openapi(request: Request) -> Response:
        return JSON(openapi_document(reader.settings, reader.limits))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        _serving(+1)
        try:
            yield
        finally:
            _serving(-1)
            if owned:
                await reader.close()

    routes: list[BaseRoute] = [
        *health.routes(reader),
        Route("/openapi.json", openapi),
        Mount("/ui", app=StaticFiles(directory=str(health.UI)), name="ui"),
    ]
    routes += [Route(path, _endpoint(reader, h), methods=["POST"]) for path, h in ROUTES.items()]
    routes += prometheus.routes(reader, lambda body, status: JSON(body, status_code=status))
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={404: not_found, 405: method_not_allowed, 500: server_error},
    )
    app.state.datasource = reader  # the one owner of store, settings, limits and clock
    token = reader.settings.token
    if token:
        app.add_middleware(TokenAuth, token=token)
    else:
        app.add_middleware(OpenNotice)
    return app


def from_env() -> Starlette:
    """Factory for ``uvicorn --factory slicecount.datasource.app:from_env`` (or gunicorn with
    uvicorn workers): settings from the ``SLICECOUNT_*`` environment. Without a token, each
    process says once that it is open."""
    settings = Settings.from_env()
    if not settings.token:
        logger.warning(open_warning("its port"))
    return create_app(settings, limits=Limits.from_env(os.environ))
