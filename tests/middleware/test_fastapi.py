"""FastAPI apps through a real ASGI path (Starlette's TestClient, lifespan included) and a
real Redis: route templates (APIRouter prefixes, mounted sub-apps), the limit decorator, the
flush at shutdown, and what the Prometheus API answers about them. (No Flask here: the
decorator's check reads the endpoint's module.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import APIRouter, FastAPI, Request
from starlette.testclient import TestClient

import slicecount
from slicecount.config import Settings
from slicecount.datasource.app import create_app as create_datasource
from slicecount.middleware.starlette import SliceCountMiddleware
from slicecount.middleware.throttle import Throttle
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from slicecount.throttle.limiter import Limiter
from tests.middleware.helpers import by_label, total


def make_app(recorder: Recorder, throttle: Throttle | None = None) -> FastAPI:
    users = APIRouter(prefix="/users")

    @users.get("/{user_id}")
    async def user(user_id: int) -> dict[str, int]:
        return {"id": user_id}

    @users.get("/{user_id}/orders/{order_id}")
    def order(user_id: int, order_id: str) -> dict[str, str]:  # sync: a worker thread
        return {"order": order_id}

    api = APIRouter(prefix="/api")
    api.include_router(users)
    sub = FastAPI()
    sub.include_router(users)

    app = FastAPI()

    @app.get("/")
    async def index() -> dict[str, str]:
        return {"ok": "yes"}

    @app.get("/search")
    @slicecount.limit("2/hour", throttle=throttle)
    async def search(request: Request, q: str = "") -> dict[str, str]:
        return {"q": q}

    app.include_router(api)
    app.mount("/v2", sub)
    app.add_middleware(SliceCountMiddleware, recorder=recorder)
    return app


def test_routes_are_counted_under_their_templates(recorder: Recorder, store: Store) -> None:
    with TestClient(make_app(recorder)) as client:
        assert client.get("/").status_code == 200
        for i in range(3):
            assert client.get(f"/api/users/{i}").json() == {"id": i}
        assert client.get("/api/users/7/orders/a-1").status_code == 200
        assert client.get("/v2/users/5").status_code == 200
        assert client.get("/api/users/not-a-number").status_code == 422  # FastAPI's validation
        assert client.get("/nowhere/1").status_code == 404
        recorder.flush()
    assert by_label(store, "http.requests", "route") == {
        "/": 1,
        "/api/users/{user_id}": 4,  # three found, one refused by validation
        "/api/users/{user_id}/orders/{order_id}": 1,
        "/v2/users/{user_id}": 1,
        "<unmatched>": 1,
    }
    assert total(store, "http.requests", route="/api/users/{user_id}", status="422") == 1
    assert total(store, "http.request.duration.bucket", route="/v2/users/{user_id}") == 1


def test_the_limit_decorator_throttles_a_fastapi_endpoint(
    recorder: Recorder, settings: Settings, store: Store
) -> None:
    limiter = Limiter(settings, deadline=5.0)  # a busy machine must not make it fail open
    throttle = Throttle(limiter=limiter, recorder=recorder)
    try:
        with TestClient(make_app(recorder, throttle)) as client:
            answers = [client.get("/search", params={"q": "x"}) for _ in range(3)]
            recorder.flush()
    finally:
        limiter.close()
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[0].json() == {"q": "x"}
    assert "retry-after" in answers[2].headers
    assert by_label(store, "http.requests", "status", route="/search") == {"200": 2, "429": 1}
    assert total(store, "http.throttled", route="/search") == 1


def test_the_limit_decorator_refuses_an_endpoint_without_its_request() -> None:
    with pytest.raises(TypeError) as raised:

        @slicecount.limit("5/minute")
        async def no_request(q: str = "") -> dict[str, str]:
            return {"q": q}

    message = str(raised.value)
    assert "no_request" in message and "`request: Request`" in message


def test_the_lifespan_shutdown_writes_the_last_counts(store: Store) -> None:
    recorder = Recorder(store, flush_interval=3600)  # never flushes by itself in this test
    try:
        with TestClient(make_app(recorder)) as client:
            for i in range(5):
                client.get(f"/v2/users/{i}")
            assert total(store, "http.requests") == 0  # still buffered
        # leaving the block ran the lifespan's shutdown: the middleware flushed
        assert recorder.pending == 0
        assert total(store, "http.requests", route="/v2/users/{user_id}") == 5
    finally:
        recorder.close()


def _value(client: TestClient, query: str) -> Any:
    body = client.get("/api/v1/query", params={"query": query}).json()
    assert body["status"] == "success", body
    (sample,) = body["data"]["result"]
    return float(sample["value"][1])


@pytest.fixture
def counted(store: Store) -> Iterator[int]:
    """Requests made to a FastAPI app, written (the lifespan's flush)."""
    recorder = Recorder(store, flush_interval=3600)
    with TestClient(make_app(recorder)) as client:
        for i in range(7):
            client.get(f"/api/users/{i}")
    recorder.close()
    yield 7


def test_prometheus_names_the_duration_histogram_in_seconds(
    counted: int, settings: Settings
) -> None:
    with TestClient(create_datasource(settings)) as prom:
        assert _value(prom, "sum(http_request_duration_seconds_count)") == counted
        assert _value(prom, "sum(http_requests_total)") == counted
        # the name of 0.1, kept as an alias for a release
        assert _value(prom, "sum(http_request_duration_count)") == counted
        le = 'sum(http_request_duration_seconds_bucket{le="+Inf"})'
        assert _value(prom, le) == counted
        assert 0 < _value(prom, "sum(http_request_duration_seconds_sum)") < counted * 10


@pytest.mark.slow
def test_the_example_app_counts_its_routes_and_events(
    store: Store, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slicecount.examples.fastapi_app import create_app
    from slicecount.recording import default

    monkeypatch.setenv("SLICECOUNT_REDIS_URL", settings.redis_url)
    previous, default._recorder = default._recorder, None  # the example counts by the default
    try:
        with TestClient(create_app()) as client:
            assert client.get("/items/3").json() == {"id": 3}
            assert client.get("/items/2000").status_code == 404
            assert client.post("/items").status_code == 201
            assert client.get("/v2/items/4").status_code == 200
            assert client.get("/health").status_code == 200  # excluded
            searches = [client.get("/search").status_code for _ in range(12)]
        # (the lifespan's shutdown wrote the counts)
    finally:
        if default._recorder is not None:
            default._recorder.close(timeout=5)
        default._recorder = previous
    # (its limit counts in the process-wide Limiter, made by whichever test came first: the
    # decorator's throttling is tested above with a Limiter of its own)
    assert searches[0] == 200 and set(searches) <= {200, 429}
    assert by_label(store, "http.requests", "route") == {
        "/items/{item_id}": 2,
        "/items": 1,
        "/v2/items/{item_id}": 1,
        "/search": 12,
    }
    assert total(store, "items.created") == 1
