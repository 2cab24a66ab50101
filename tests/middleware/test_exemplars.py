"""A traced request's duration keeps an exemplar, through the Starlette middleware (Starlette's
TestClient: a real ASGI path) and the Flask extension (Werkzeug's client: a real WSGI call),
traced by OpenTelemetry's current span (a span started around or inside the middleware, or by
Flask hooks as its instrumentation does) or by a ``traceparent`` header alone."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask, Response, g
from opentelemetry import context, trace
from opentelemetry.sdk.trace import TracerProvider
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from werkzeug.test import Client

from slicecount.core.exemplars import Exemplar
from slicecount.core.series import parse
from slicecount.middleware.flask import SliceCount
from slicecount.middleware.starlette import SliceCountMiddleware
from slicecount.recording.losses import REJECTED_METRIC
from slicecount.recording.recorder import Recorder
from slicecount.store import Store

pytestmark = pytest.mark.topologies

TRACER = TracerProvider().get_tracer("tests")
SPAN = "x-span"
"""A request header asking the test's span wrapper for a span; its ids come back in
``x-trace-id`` and ``x-span-id``."""
BUCKET = "http.request.duration.bucket"


def header(trace_id: str, span_id: str, flags: str = "01") -> str:
    return f"00-{trace_id}-{span_id}-{flags}"


def ids(n: int) -> tuple[str, str]:
    return f"{0xABC0 + n:032x}", f"{0xDEF0 + n:016x}"


class SpanASGI:
    """Starts a span around a request that asks for one (as OpenTelemetry's ASGI middleware
    does for every request) and says its ids in the response's headers."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or (SPAN.encode(), b"1") not in scope["headers"]:
            await self.app(scope, receive, send)
            return
        with TRACER.start_as_current_span("request") as span:
            ids = span.get_span_context()
            said = [(b"x-trace-id", f"{ids.trace_id:032x}".encode()),
                    (b"x-span-id", f"{ids.span_id:016x}".encode())]  # fmt: skip

            async def send_ids(message: Any) -> None:
                if message["type"] == "http.response.start":
                    message = {**message, "headers": [*message.get("headers", []), *said]}
                await send(message)

            await self.app(scope, receive, send_ids)


class SpanWSGI:
    """The same around a WSGI app."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("HTTP_X_SPAN") != "1":
            return self.app(environ, start_response)
        with TRACER.start_as_current_span("request") as span:
            ids = span.get_span_context()
            said = [("x-trace-id", f"{ids.trace_id:032x}"), ("x-span-id", f"{ids.span_id:016x}")]

            def start(status: str, headers: list[Any], exc_info: Any = None) -> Any:
                return start_response(status, [*headers, *said], exc_info)

            body = self.app(environ, start)
            try:
                return list(body)  # the body read (and closed: counted) inside the span
            finally:
                close = getattr(body, "close", None)
                if close is not None:
                    close()


async def hello(request: Request) -> PlainTextResponse:
    return PlainTextResponse("hello")


def starlette(recorder: Recorder, where: str, **options: Any) -> Callable[..., Any]:
    """A Starlette app counted by slicecount, with the span wrapper ``where``: "outside" the
    middleware, "inside" it (between it and the app), or "none"; a GET function."""
    app = Starlette(routes=[Route("/traced/{n}", hello), Route("/plain", hello)])
    if where == "inside":
        app.add_middleware(SpanASGI)
    app.add_middleware(SliceCountMiddleware, recorder=recorder, **options)
    served: Any = SpanASGI(app) if where == "outside" else app
    client = TestClient(served)

    def get(path: str, headers: dict[str, str]) -> dict[str, str]:
        response = client.get(path, headers=headers)
        assert response.status_code == 200
        return dict(response.headers)

    return get


def flask(recorder: Recorder, where: str, **options: Any) -> Callable[..., Any]:
    """The same in Flask; "hooks": the span started in before_request and ended in
    teardown_request, as OpenTelemetry's Flask instrumentation does."""
    app = Flask("exemplars")

    @app.get("/traced/<int:n>")
    @app.get("/plain")
    def hello(n: int = 0) -> str:
        return "hello"

    if where == "hooks":

        @app.before_request
        def start_span() -> None:
            from flask import request

            if request.headers.get(SPAN) == "1":
                g.span = TRACER.start_span("request")
                g.token = context.attach(trace.set_span_in_context(g.span))

        @app.after_request
        def say_ids(response: Response) -> Response:
            if "span" in g:
                ids = g.span.get_span_context()
                response.headers["x-trace-id"] = f"{ids.trace_id:032x}"
                response.headers["x-span-id"] = f"{ids.span_id:016x}"
            return response

        @app.teardown_request
        def end_span(error: BaseException | None) -> None:
            if "span" in g:
                context.detach(g.token)
                g.span.end()

    if where == "inside":
        app.wsgi_app = SpanWSGI(app.wsgi_app)  # type: ignore[method-assign]
    SliceCount(app, recorder=recorder, **options)
    if where == "outside":
        app.wsgi_app = SpanWSGI(app.wsgi_app)  # type: ignore[method-assign]
    client = Client(app)

    def get(path: str, headers: dict[str, str]) -> dict[str, str]:
        response = client.get(path, headers=headers, buffered=True)  # closed: counted
        assert response.status_code == 200
        return dict(response.headers)

    return get


APPS = {"starlette": starlette, "flask": flask}


def exemplars_by_route(store: Store, since: float) -> dict[str, list[tuple[str, Exemplar]]]:
    """route -> (le, exemplar) of every exemplar kept since ``since``."""
    series = store.series(BUCKET, 60)
    found = store.exemplars(series, since, time.time() + 1)
    out: dict[str, list[tuple[str, Exemplar]]] = {}
    for series_id, kept in found.items():
        labels = parse(series_id)[1]
        out.setdefault(labels["route"], []).extend((labels["le"], e) for e in kept)
    return out


def in_bucket(le: str, value: float) -> bool:
    bounds = (0, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, float("inf"))
    upper = float(le)
    lower = max(b for b in bounds if b < upper)
    return lower < value <= upper or (upper == bounds[1] and 0 <= value <= upper)


def rejected(store: Store) -> int:
    return sum(n for s in store.series(REJECTED_METRIC, 60) for _, n in
               store.get(REJECTED_METRIC, 60, parse(s)[1]))  # fmt: skip


@pytest.mark.parametrize(
    ("framework", "where"),
    [("starlette", "outside"), ("starlette", "inside"), ("flask", "outside"),
     ("flask", "inside"), ("flask", "hooks")],
)  # fmt: skip
def test_the_current_span_is_the_exemplars_trace(
    recorder: Recorder, store: Store, framework: str, where: str
) -> None:
    get = APPS[framework](recorder, where)
    started = time.time()
    said = get("/traced/1", {SPAN: "1"})
    ended = time.time()
    get("/plain", {})  # untraced, after it: never in its place
    assert recorder.flush()
    found = exemplars_by_route(store, started - 1)
    route = "/traced/{n}" if framework == "starlette" else "/traced/<int:n>"
    assert set(found) == {route}
    ((le, exemplar),) = found[route]
    assert dict(exemplar.labels) == {"trace_id": said["x-trace-id"], "span_id": said["x-span-id"]}
    assert in_bucket(le, exemplar.value) and started - 0.001 <= exemplar.time <= ended + 0.001


@pytest.mark.parametrize("framework", ["starlette", "flask"])
def test_a_traceparent_alone_makes_a_request_traced(
    recorder: Recorder, store: Store, framework: str
) -> None:
    get = APPS[framework](recorder, "none")
    started = time.time()
    traced = [ids(n) for n in range(5)]
    for n, (trace_id, span_id) in enumerate(traced):
        get(f"/traced/{n}", {"traceparent": header(trace_id, span_id)})
        # then requests that must not take its place: not sampled, malformed, none at all
        get(f"/traced/{n}", {"traceparent": header(*ids(100 + n), flags="00")})
        get(f"/traced/{n}", {"traceparent": "00-" + "x" * 51 + "1"})  # sampled by its flags
        get(f"/traced/{n}", {"traceparent": "garbage"})
        get(f"/traced/{n}", {})
        get("/plain", {"traceparent": header(*ids(200 + n), flags="00")})
    ended = time.time()
    assert recorder.flush()
    found = exemplars_by_route(store, started - 1)
    assert set(found) == {"/traced/{n}" if framework == "starlette" else "/traced/<int:n>"}
    kept = [e for _, kept in found.items() for _, e in kept]
    slots = [(le, int(e.time) // 60) for _, kept in found.items() for le, e in kept]
    assert len(slots) == len(set(slots))  # the last of each bucket and minute they fell in
    for exemplar in kept:
        labels = dict(exemplar.labels)
        assert (labels["trace_id"], labels["span_id"]) in traced
        assert started - 0.001 <= exemplar.time <= ended + 0.001
    assert traced[-1] in [(dict(e.labels)["trace_id"], dict(e.labels)["span_id"]) for e in kept]
    assert rejected(store) == 0  # a bad header is the client's: counted nowhere


@pytest.mark.parametrize("framework", ["starlette", "flask"])
def test_exemplars_off_keeps_none(recorder: Recorder, store: Store, framework: str) -> None:
    get = APPS[framework](recorder, "outside", exemplars=False)
    started = time.time()
    get("/traced/1", {SPAN: "1"})
    get("/traced/2", {"traceparent": header(*ids(1))})
    assert recorder.flush()
    assert exemplars_by_route(store, started - 1) == {}
    assert store.series(BUCKET, 60)  # the durations are counted all the same


class Unsampled:
    """An unsampled span current around the request (a sampler said no)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

        span = NonRecordingSpan(SpanContext(0xABC, 0xDEF, False, TraceFlags(0)))
        with trace.use_span(span):
            await self.app(scope, receive, send)


def test_an_unsampled_span_leaves_the_header_to_decide(recorder: Recorder, store: Store) -> None:
    app = Starlette(routes=[Route("/traced/{n}", hello)])
    app.add_middleware(SliceCountMiddleware, recorder=recorder)
    client = TestClient(Unsampled(app))
    started = time.time()
    trace_id, span_id = ids(7)
    assert client.get("/traced/1", headers={"traceparent": header(trace_id, span_id)}).is_success
    assert client.get("/traced/1").is_success  # the unsampled span alone: untraced
    assert recorder.flush()
    ((_, exemplar),) = exemplars_by_route(store, started - 1)["/traced/{n}"]
    assert dict(exemplar.labels) == {"trace_id": trace_id, "span_id": span_id}
