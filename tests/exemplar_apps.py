"""The apps the exemplar tests serve under gunicorn and uvicorn: counted by slicecount (the
default Recorder, from SLICECOUNT_*), traced by OpenTelemetry's SDK when a request asks for it
(``x-span: 1``: a span around the request, as OpenTelemetry's middleware starts, its ids said
back in ``x-trace-id`` and ``x-span-id``) or by its ``traceparent`` header alone.

    gunicorn -w 3 tests.exemplar_apps:flask_app
    uvicorn tests.exemplar_apps:starlette_app
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from flask import Flask
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from slicecount.middleware.flask import SliceCount
from slicecount.middleware.starlette import SliceCountMiddleware

TRACER = TracerProvider().get_tracer("exemplar-tests")  # no exporter: the ids are what counts


def _ids(span: Any) -> list[tuple[str, str]]:
    ids = span.get_span_context()
    return [("x-trace-id", f"{ids.trace_id:032x}"), ("x-span-id", f"{ids.span_id:016x}")]


class _SpanWSGI:
    def __init__(self, app: Any) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("HTTP_X_SPAN") != "1":
            return self.app(environ, start_response)
        with trace.use_span(TRACER.start_span("request"), end_on_exit=True) as span:

            def start(status: str, headers: list[Any], exc_info: Any = None) -> Any:
                return start_response(status, [*headers, *_ids(span)], exc_info)

            body = self.app(environ, start)
            try:
                return list(body)
            finally:
                close = getattr(body, "close", None)
                if close is not None:
                    close()


class _SpanASGI:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or (b"x-span", b"1") not in scope["headers"]:
            await self.app(scope, receive, send)
            return
        with TRACER.start_as_current_span("request") as span:
            said = [(k.encode(), v.encode()) for k, v in _ids(span)]

            async def send_ids(message: Any) -> None:
                if message["type"] == "http.response.start":
                    message = {**message, "headers": [*message.get("headers", []), *said]}
                await send(message)

            await self.app(scope, receive, send_ids)


def _flask() -> Flask:
    app = Flask("exemplar-tests")

    @app.get("/health")
    def health() -> str:
        return "ok"

    @app.get("/sleep/<int:ms>")
    def sleep(ms: int) -> str:
        time.sleep(ms / 1000)
        return "slept"

    SliceCount(app, exclude_paths=["/health"])
    app.wsgi_app = _SpanWSGI(app.wsgi_app)  # type: ignore[method-assign]  # the span outside
    return app


async def _health(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


async def _sleep(request: Request) -> PlainTextResponse:
    await asyncio.sleep(request.path_params["ms"] / 1000)
    return PlainTextResponse("slept")


def _starlette() -> Starlette:
    app = Starlette(routes=[Route("/health", _health), Route("/sleep/{ms:int}", _sleep)])
    app.add_middleware(_SpanASGI)  # the span inside slicecount's middleware
    app.add_middleware(SliceCountMiddleware, exclude_paths=["/health"])
    return app


flask_app = _flask()
starlette_app = _starlette()
