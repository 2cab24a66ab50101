"""The datasource service: Grafana's JSON datasource protocol over the Redis counters.

    slicecount datasource --redis-url redis://localhost:6379/0 --port 8080

Endpoints of both the legacy SimpleJSON plugin and simpod-json-datasource; see
``GRAFANA-PROTOCOL.md`` in the design notes and ``/openapi.json`` for the shapes.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from slicecount.config import Settings
from slicecount.datasource import discovery, frames
from slicecount.datasource.auth import TokenAuth
from slicecount.datasource.evaluate import evaluate, fetches
from slicecount.datasource.openapi import openapi_document
from slicecount.datasource.precision import choose_precision
from slicecount.datasource.protocol import (
    LimitExceeded,
    Limits,
    Target,
    adhoc_matchers,
    annotation_tags,
    compile_target,
    is_annotation_query,
    parse_range,
    positive_number,
    require_object,
    visible_targets,
)
from slicecount.datasource.reader import Reader
from slicecount.errors import ConfigurationError, QueryError, StoreError
from slicecount.store_async import AsyncStore

logger = logging.getLogger("slicecount.datasource")

Handler = Callable[["Datasource", Request, Mapping[str, Any]], Awaitable[Any]]
ANNOTATION_LIMIT = 1000
"""Annotations returned for one panel at most."""


class Datasource:
    """The state the routes share: settings, limits, the reader, the clock."""

    def __init__(self, store: AsyncStore, limits: Limits, clock: Callable[[], float]) -> None:
        self.store = store
        self.settings = store.settings
        self.limits = limits
        self.clock = clock
        self.reader = Reader(store, limits, clock)

    # -- /query ------------------------------------------------------------------------------

    async def query(self, request: Request, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        start, end = parse_range(body, self.limits)
        targets = visible_targets(body, self.limits)
        adhoc = adhoc_matchers(body)
        interval_ms = positive_number(body, "intervalMs")
        max_points = positive_number(body, "maxDataPoints")
        now = self.clock()
        answer: list[dict[str, Any]] = []
        for target in targets:
            if is_annotation_query(body, target):
                answer.append(await self._annotation_table(target, start, end))
                continue
            node, pinned = compile_target(target, adhoc)
            if pinned is None:
                precision = choose_precision(
                    self.settings, start, end, now, interval_ms, int(max_points or 0) or None
                )
            else:
                precision = self.settings.check_precision(pinned)
            timeline = self.reader.timeline(precision, start, end, now)
            data = await self.reader.load(fetches(node), timeline)
            series = evaluate(node, data, timeline)
            if target.table:
                answer.append(frames.table(target.ref_id, series))
            else:
                answer.extend(frames.timeseries(target.ref_id, series, timeline))
        return answer

    async def _annotation_table(self, target: Target, start: float, end: float) -> dict[str, Any]:
        tags = annotation_tags(target.text)
        found = await self.store.annotations(start, end, tags, ANNOTATION_LIMIT)
        return frames.annotation_table(target.ref_id, found)

    # -- pickers, variables, annotations ---------------------------------------------------

    async def search(self, request: Request, body: Mapping[str, Any]) -> list[str]:
        target = body.get("target", "")
        names = await self.reader.names()
        if isinstance(target, str) and "(" in target:
            return discovery.variable(target, names, await self.reader.everything())
        return discovery.search(names, target)

    async def metrics(self, request: Request, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        names = await self.reader.names()
        histograms = await self.reader.histograms()
        metric = body.get("metric")
        everything = await self.reader.everything() if isinstance(metric, str) and metric else None
        return [
            discovery.metric_entry(
                name,
                name in histograms,
                self.settings,
                discovery.of_metric(everything, [name]) if everything and name == metric else None,
            )
            for name in names
        ]

    async def metric_payload_options(
        self, request: Request, body: Mapping[str, Any]
    ) -> list[dict[str, str]]:
        metric, name = body.get("metric"), body.get("name")
        if not isinstance(metric, str) or not isinstance(name, str):
            raise QueryError("'metric' and 'name' must be strings")
        series = discovery.of_metric(await self.reader.everything(), [metric])
        histogram = metric in await self.reader.histograms()
        return discovery.payload_options(metric, name, histogram, self.settings, series)

    async def variable(self, request: Request, body: Mapping[str, Any]) -> list[dict[str, str]]:
        payload = require_object(body.get("payload", {}), "'payload'")
        query = payload.get("target", payload.get("query", ""))
        if not isinstance(query, str):
            raise QueryError(f"payload.target must be a string, got {query!r}")
        names = await self.reader.names()
        values = discovery.variable(query, names, await self.reader.everything())
        return [{"__text": v, "__value": v} for v in values]

    async def tag_keys(self, request: Request, body: Mapping[str, Any]) -> list[dict[str, str]]:
        keys = discovery.label_names(await self.reader.everything())
        return [{"type": "string", "text": k} for k in keys]

    async def tag_values(self, request: Request, body: Mapping[str, Any]) -> list[dict[str, str]]:
        key = body.get("key")
        if not isinstance(key, str) or not key:
            raise QueryError("'key' must be a label name")
        return [{"text": v} for v in discovery.label_values(await self.reader.everything(), key)]

    async def annotations(self, request: Request, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        start, end = parse_range(body, self.limits)
        annotation = require_object(body.get("annotation", {}), "'annotation'")
        tags = annotation_tags(annotation.get("query", ""))
        found = await self.store.annotations(start, end, tags, ANNOTATION_LIMIT)
        return frames.legacy_annotations(annotation, found)


def _endpoint(datasource: Datasource, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            body = await _read_json(request, datasource.limits)
            return JSONResponse(await handler(datasource, request, body))
        except LimitExceeded as exc:
            return JSONResponse({"message": str(exc)}, status_code=422)
        except (QueryError, ConfigurationError) as exc:
            return JSONResponse({"message": str(exc)}, status_code=400)
        except StoreError as exc:
            logger.warning("redis unavailable: %s", exc)
            return JSONResponse({"message": f"redis unavailable: {exc}"}, status_code=503)

    return endpoint


async def _read_json(request: Request, limits: Limits) -> Mapping[str, Any]:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise QueryError(_too_big(int(declared), limits))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise QueryError(_too_big(size, limits))
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise QueryError(f"request body is not valid JSON: {exc}") from None
    return require_object(body)


def _too_big(size: int, limits: Limits) -> str:
    return f"request body is {size} bytes, more than the limit of {limits.max_body_bytes}"


UI = resources.files("slicecount.datasource") / "ui"
"""The built-in page and its static files (uPlot vendored: no CDN, no build step)."""


async def health(request: Request) -> Response:
    """Browsers get the built-in page; Grafana's "Save & test" (JSON) gets its 200."""
    accept = request.headers.get("accept", "")
    if "text/html" in accept and request.method == "GET":
        return HTMLResponse((UI / "index.html").read_text(encoding="utf-8"))
    return JSONResponse({"status": "ok", "service": "slicecount datasource"})


async def not_found(request: Request, exc: Exception) -> Response:
    return JSONResponse({"message": f"no such endpoint: {request.method} {request.url.path}"}, 404)


async def method_not_allowed(request: Request, exc: Exception) -> Response:
    return JSONResponse({"message": f"{request.method} is not allowed on {request.url.path}"}, 405)


async def server_error(request: Request, exc: Exception) -> Response:
    logger.exception("datasource failed on %s", request.url.path, exc_info=exc)
    return JSONResponse({"message": f"internal error: {type(exc).__name__}"}, 500)


ROUTES: dict[str, Handler] = {
    "/query": Datasource.query,
    "/search": Datasource.search,
    "/metrics": Datasource.metrics,
    "/metric-payload-options": Datasource.metric_payload_options,
    "/variable": Datasource.variable,
    "/tag-keys": Datasource.tag_keys,
    "/tag-values": Datasource.tag_values,
    "/annotations": Datasource.annotations,
}


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
    datasource = Datasource(store, limits or Limits(), clock)

    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document(datasource.settings, datasource.limits))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if owned:
            await datasource.store.close()

    routes: list[BaseRoute] = [
        Route("/", health, methods=["GET", "HEAD"]),
        Route("/openapi.json", openapi),
        Mount("/ui", app=StaticFiles(directory=str(UI)), name="ui"),
    ]
    routes += [
        Route(path, _endpoint(datasource, h), methods=["POST"]) for path, h in ROUTES.items()
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={404: not_found, 405: method_not_allowed, 500: server_error},
    )
    app.state.datasource = datasource
    token = datasource.settings.token
    if token:
        app.add_middleware(TokenAuth, token=token)
    return app


def from_env() -> Starlette:
    """Factory for ``uvicorn --factory slicecount.datasource.app:from_env`` (or gunicorn with
    uvicorn workers): settings from the ``SLICECOUNT_*`` environment."""
    return create_app(Settings.from_env())
