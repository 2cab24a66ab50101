"""The throttle in the shells, through real WSGI/ASGI call paths and a real Redis: Flask's
extension and WSGI middleware, the ASGI middleware, the ``limit`` decorator on Flask views
and Starlette endpoints; answers, headers, keys, exemptions, counts, failing open or closed."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

import slicecount
from slicecount.config import Settings
from slicecount.embedded import EmbeddedRedis
from slicecount.middleware.asgi import SliceCountMiddleware
from slicecount.middleware.flask import SliceCount
from slicecount.middleware.throttle import Throttle
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from slicecount.throttle.clients import forwarded_for, header
from slicecount.throttle.limiter import Limiter
from tests.middleware.helpers import by_label, total


class Buffered(FlaskClient):
    """Responses read whole and closed, as a server does (the middleware counts at close)."""

    def open(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("buffered", True)
        return super().open(*args, **kwargs)


T0 = 1_700_006_400.25  # a quarter into a one-second window (and into every longer one)


@pytest.fixture
def clock() -> list[float]:
    return [T0]


@pytest.fixture
def limiter(settings: Settings, clock: list[float]) -> Iterator[Limiter]:
    with Limiter(settings, deadline=1.0, clock=lambda: clock[0]) as made:
        yield made


@pytest.fixture
def recorder(store: Store) -> Iterator[Recorder]:
    made = Recorder(store, flush_interval=3600)
    yield made
    made.close()


def flask_app(recorder: Recorder, throttle: Throttle) -> Flask:
    app = Flask(__name__)
    app.test_client_class = Buffered
    SliceCount(app, recorder=recorder, throttle=throttle)

    @app.get("/limited/<int:n>")
    def limited(n: int) -> str:
        return f"ok {n}"

    @app.get("/free")
    def free() -> str:
        return "free"

    @app.get("/health")
    def health() -> str:
        return "up"

    return app


def test_flask_routes_get_their_limits_answers_and_headers(
    limiter: Limiter, recorder: Recorder, store: Store, clock: list[float]
) -> None:
    throttle = Throttle(
        {"/limited/<int:n>": "3/second; 100/hour", "/health": "1/second"},
        exempt=["/health"], limiter=limiter, recorder=recorder, headers=True,
    )  # fmt: skip
    client = flask_app(recorder, throttle).test_client()
    answers = [client.get(f"/limited/{i}") for i in range(5)]  # different paths, one route
    assert [a.status_code for a in answers] == [200, 200, 200, 429, 429]
    assert [a.headers["RateLimit-Remaining"] for a in answers[:3]] == ["2", "1", "0"]
    assert answers[0].headers["RateLimit-Limit"] == "3"
    refused = answers[3]
    assert refused.headers["Retry-After"] == "1"  # 0.75 s to the window's end, rounded up
    assert refused.headers["RateLimit-Reset"] == "1"
    assert refused.get_json() == {
        "error": "too many requests", "limit": "3/second", "retry_after": 1,
    }  # fmt: skip
    assert all(client.get("/free").status_code == 200 for _ in range(5))  # not in the mapping
    assert all(client.get("/health").status_code == 200 for _ in range(5))  # exempt
    clock[0] += 1  # the next window
    assert client.get("/limited/9").status_code == 200
    recorder.flush()
    assert by_label(store, "http.throttled", "limit") == {"3/second": 2}
    assert total(store, "http.throttled", route="/limited/<int:n>", method="GET") == 2
    assert total(store, "http.requests", route="/limited/<int:n>", status="429") == 2


def test_keys_count_clients_apart_and_forwarded_for_trusts_only_its_proxies(
    limiter: Limiter, recorder: Recorder
) -> None:
    throttle = Throttle("2/second", key=forwarded_for(1), limiter=limiter, recorder=recorder)
    client = flask_app(recorder, throttle).test_client()

    def status(forwarded: str) -> int:
        return client.get("/free", headers={"X-Forwarded-For": forwarded}).status_code

    assert [status("10.0.0.1") for _ in range(3)] == [200, 200, 429]
    assert [status("10.0.0.2") for _ in range(2)] == [200, 200]  # another client
    # a client writing its own header gets the address the proxy appended: still 10.0.0.1
    assert status("6.6.6.6, 10.0.0.1") == 429
    by_key = Throttle("1/second", key=header("X-Api-Key"), limiter=limiter, recorder=recorder)
    client = flask_app(recorder, by_key).test_client()
    assert [client.get("/free", headers={"X-Api-Key": "k"}).status_code for _ in range(2)] == [
        200, 429,
    ]  # fmt: skip
    assert client.get("/free").status_code == 200  # no key: not limited by this one


def test_shared_scope_counts_a_client_across_routes(limiter: Limiter, recorder: Recorder) -> None:
    throttle = Throttle("3/second", scope="shared", limiter=limiter, recorder=recorder)
    client = flask_app(recorder, throttle).test_client()
    codes = [client.get(path).status_code for path in ("/free", "/limited/1", "/health", "/free")]
    assert codes == [200, 200, 200, 429]


def starlette_app(recorder: Recorder, throttle: Throttle, limited: Any) -> Starlette:
    async def home(request: Request) -> PlainTextResponse:
        return PlainTextResponse("home")

    app = Starlette(routes=[Route("/", home), Route("/items/{item_id:int}", limited)])
    app.add_middleware(SliceCountMiddleware, recorder=recorder, throttle=throttle)
    return app


def test_asgi_middleware_and_the_decorator_on_starlette_endpoints(
    limiter: Limiter, recorder: Recorder, store: Store, clock: list[float]
) -> None:
    decorated = Throttle(limiter=limiter, recorder=recorder, headers=True)

    @slicecount.limit("2/second", throttle=decorated)
    async def item(request: Request) -> JSONResponse:
        return JSONResponse({"item": request.path_params["item_id"]})

    throttle = Throttle({"/": "1/second"}, limiter=limiter, recorder=recorder)
    with TestClient(starlette_app(recorder, throttle, item)) as client:
        assert [client.get("/").status_code for _ in range(2)] == [200, 429]
        answers = [client.get(f"/items/{i}") for i in range(3)]
        assert [a.status_code for a in answers] == [200, 200, 429]
        assert answers[0].headers["ratelimit-remaining"] == "1"
        assert answers[2].json()["limit"] == "2/second"
        assert answers[2].headers["retry-after"] == "1"
    recorder.flush()
    assert by_label(store, "http.throttled", "route") == {"/": 1, "/items/{item_id}": 1}
    assert by_label(store, "http.requests", "status") == {"200": 3, "429": 2}


def test_the_decorator_on_sync_and_async_flask_views_and_sync_starlette_endpoints(
    limiter: Limiter, recorder: Recorder
) -> None:
    shared = Throttle(limiter=limiter, recorder=recorder)
    app = Flask(__name__)
    app.test_client_class = Buffered

    @app.get("/sync")
    @slicecount.limit("1/second", throttle=shared)
    def sync_view() -> str:
        return "sync"

    @app.get("/async")
    @slicecount.limit("1/second", throttle=shared)
    async def async_view() -> str:
        return "async"

    client = app.test_client()
    assert [client.get("/sync").status_code for _ in range(2)] == [200, 429]
    assert [client.get("/async").status_code for _ in range(2)] == [200, 429]

    @slicecount.limit("1/second", throttle=shared)
    def endpoint(request: Request) -> PlainTextResponse:
        return PlainTextResponse("sync endpoint")

    with TestClient(starlette_app(recorder, Throttle(limiter=limiter), endpoint)) as starlette:
        assert [starlette.get("/items/1").status_code for _ in range(2)] == [200, 429]

    @slicecount.limit("1/second")
    def outside() -> str:
        return "no request"

    with pytest.raises(TypeError, match="no Flask request context"):
        outside()


def test_bad_limits_and_options_are_refused_at_start_up(recorder: Recorder) -> None:
    with pytest.raises(ValueError, match="'10 per fortnight'"):
        slicecount.limit("10 per fortnight")
    with pytest.raises(ValueError, match="scope"):
        Throttle("1/second", scope="global")
    with pytest.raises(TypeError, match="exempt= without limits="):
        SliceCount(Flask(__name__), recorder=recorder, exempt=["/health"])
    with pytest.raises(ValueError, match="'/x'"):
        Throttle({"/x": "often"})


@pytest.mark.parametrize("fail_closed", [False, True])
def test_redis_down_fails_open_or_closed_and_counts_the_errors(
    private_redis: EmbeddedRedis, recorder: Recorder, store: Store, fail_closed: bool
) -> None:
    settings = Settings(redis_url=private_redis.url)
    with Limiter(settings, deadline=0.05, fail_closed=fail_closed, recorder=recorder) as down:
        throttle = Throttle("1/second", limiter=down, recorder=recorder)
        client = flask_app(recorder, throttle).test_client()
        assert client.get("/free").status_code == 200
        private_redis.stop()
        codes = [client.get("/free").status_code for _ in range(3)]
    assert codes == ([503] * 3 if fail_closed else [200] * 3)
    recorder.flush()
    assert total(store, "slicecount.throttle.errors") == 3
    assert total(store, "http.requests", status="503" if fail_closed else "200") == (
        3 if fail_closed else 4
    )


def test_a_paused_redis_costs_a_request_about_the_deadline(
    private_redis: EmbeddedRedis, recorder: Recorder, store: Store
) -> None:
    settings = Settings(redis_url=private_redis.url)
    with Limiter(settings, deadline=0.1, recorder=recorder) as paused:
        throttle = Throttle("100/second", limiter=paused, recorder=recorder)
        client = flask_app(recorder, throttle).test_client()
        assert client.get("/free").status_code == 200  # connected
        recorder.flush()
        before = total(store, "slicecount.throttle.errors")
        pid = private_redis.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            started = time.perf_counter()
            codes = [client.get("/free").status_code for _ in range(3)]
            waited = (time.perf_counter() - started) / 3
        finally:
            os.kill(pid, signal.SIGCONT)
    assert codes == [200, 200, 200]  # fail-open
    assert 0.09 <= waited < 0.6, waited  # each waited about the deadline, not Redis' return
    recorder.flush()
    assert total(store, "slicecount.throttle.errors") - before == 3
