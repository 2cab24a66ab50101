"""Edges of the throttle in the shells, each found by a review: routes known before the app
runs, the shell's own Redis, URL timeouts under the deadline, a view limited twice, a new
event loop per request, and options given wrongly."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import time
from typing import Any

import pytest
from flask import Flask
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

import slicecount
from slicecount.config import Settings
from slicecount.embedded import EmbeddedRedis
from slicecount.middleware.asgi import SliceCountMiddleware as ASGIMiddleware
from slicecount.middleware.flask import SliceCount
from slicecount.middleware.throttle import Throttle
from slicecount.middleware.wsgi import SliceCountMiddleware as WSGIMiddleware
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from slicecount.throttle.limiter import Limiter
from tests.middleware.helpers import total
from tests.throttle.test_http import Buffered


async def ok(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


def test_an_asgi_middleware_wrapping_the_app_from_outside_knows_its_routes(
    settings: Settings,
) -> None:
    app = Starlette(routes=[Route("/search", ok), Route("/free", ok)])
    # its own Recorder, closed with the test (the default one would wait at the worker's exit
    # for a Redis at the environment's URL, for close_timeout)
    with (
        Limiter(settings, deadline=1.0) as limiter,
        Store(settings) as store,
        Recorder(store, flush_interval=3600) as recorder,
    ):
        throttle = Throttle(
            {"/search": "3/minute"}, exempt=["/free"], limiter=limiter, recorder=recorder
        )
        wrapped = ASGIMiddleware(app, throttle=throttle, recorder=recorder)
        with TestClient(wrapped) as client:
            assert [client.get("/search").status_code for _ in range(5)] == [200] * 3 + [429] * 2
            assert [client.get("/free").status_code for _ in range(5)] == [200] * 5


def test_plain_wsgi_refuses_route_limits_it_could_not_apply(settings: Settings) -> None:
    with pytest.raises(TypeError, match="route_resolver"):
        WSGIMiddleware(Flask(__name__).wsgi_app, settings=settings, limits={"/a": "1/second"})


def test_the_shell_settings_are_where_the_throttle_counts(
    settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLICECOUNT_REDIS_URL", "redis://127.0.0.1:1/0")  # nobody there
    app = Flask(__name__)
    app.test_client_class = Buffered
    shell = SliceCount(app, settings=settings, limits="3/minute")
    app.get("/a")(lambda: "a")
    client = app.test_client()
    assert [client.get("/a").status_code for _ in range(5)] == [200] * 3 + [429] * 2
    # the Recorder the shell built on ``settings``: closed while its Redis is up, not at the
    # worker's exit, after the session's server stopped (close_timeout spent for nothing)
    assert shell.middleware is not None and shell.middleware.counter.source.fixed is not None
    assert shell.middleware.counter.source.fixed.close()
    assert total(store, "http.requests", route="/a") == 5  # the requests and the refusals too
    assert total(store, "http.throttled", route="/a") == 2


def test_the_shell_settings_are_where_the_limiter_errors_count(
    private_redis: EmbeddedRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLICECOUNT_REDIS_URL", "redis://127.0.0.1:1/0")  # nobody there
    settings = Settings(redis_url=private_redis.url, throttle_deadline=0.05)
    app = Flask(__name__)
    app.test_client_class = Buffered
    shell = SliceCount(app, settings=settings, limits="100/second")
    app.get("/a")(lambda: "a")
    client = app.test_client()
    assert client.get("/a").status_code == 200  # connected
    pid = private_redis.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        codes = [client.get("/a").status_code for _ in range(3)]
    finally:
        os.kill(pid, signal.SIGCONT)
    assert codes == [200] * 3  # fail-open, each error counted
    assert shell.middleware is not None and shell.middleware.counter.source.fixed is not None
    assert shell.middleware.counter.source.fixed.close()
    with Store(settings) as store:
        assert total(store, "slicecount.throttle.errors") == 3
        assert total(store, "http.requests", route="/a") == 4


def test_a_timeout_in_the_url_does_not_outlast_the_deadline(private_redis: EmbeddedRedis) -> None:
    settings = Settings(redis_url=private_redis.url + "?socket_timeout=3")
    with (
        Store(settings) as store,
        Recorder(store, flush_interval=3600) as recorder,  # its error count: written at close
        Limiter(settings, deadline=0.05, recorder=recorder) as limiter,
    ):
        limits = slicecount.throttle.parse_limits("10/second")
        assert limiter.check(limits, "a").allowed
        pid = private_redis.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            started = time.perf_counter()
            verdict = limiter.check(limits, "a")
            waited = time.perf_counter() - started
        finally:
            os.kill(pid, signal.SIGCONT)
    assert verdict.decision is None and verdict.allowed
    assert waited < 1.0, waited


def test_a_view_limited_by_the_extension_and_the_decorator_counts_each_once(
    settings: Settings, store: Store
) -> None:
    recorder = Recorder(store, flush_interval=3600)
    with Limiter(settings, deadline=1.0) as limiter:
        app = Flask(__name__)
        app.test_client_class = Buffered
        SliceCount(
            app,
            recorder=recorder,
            throttle=Throttle("10/minute", limiter=limiter, recorder=recorder, headers=True),
        )

        @app.get("/a")
        @slicecount.limit(
            "10/minute", throttle=Throttle(limiter=limiter, recorder=recorder, headers=True)
        )
        def view() -> str:
            return "a"

        answers = [app.test_client().get("/a") for _ in range(11)]
    recorder.close()
    assert [a.status_code for a in answers] == [200] * 10 + [429]  # not 5: counted apart
    assert answers[0].headers.getlist("RateLimit-Remaining") == ["9"]  # one set of headers


# The connections left on each closed loop can only be reclaimed by the collector, which warns
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_a_new_event_loop_per_request_still_counts_exactly(settings: Settings) -> None:
    # a check past its deadline fails open (allowed): 5 s, so a busy machine cannot pass as one
    with Limiter(settings, deadline=5.0) as limiter:
        limits = slicecount.throttle.parse_limits("3/minute")

        async def one(last: bool = False) -> bool:
            allowed = (await limiter.check_async(limits, "loop")).allowed
            if last:
                await limiter.aclose()  # the connections of the loop still running
            return allowed

        answers = [asyncio.run(one(last=i == 4)) for i in range(5)]  # every run a new loop
        assert answers == [True] * 3 + [False] * 2
    gc.collect()  # the earlier loops' connections: here, under this test's filters


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Throttle("1/second", exempt="/health"), "list of route templates"),
        (lambda: slicecount.limit("1/second", headers=True, throttle=Throttle()), "Throttle"),
    ],
)
def test_options_given_wrongly_are_refused_naming_them(build: Any, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        build()
