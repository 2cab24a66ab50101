"""Starlette apps through Starlette's TestClient (a real ASGI call path) and a real Redis."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2 as httpx
import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import StaticPool
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route, Router, WebSocketRoute
from starlette.testclient import TestClient
from starlette.websockets import WebSocket

from slicecount.middleware.asgi import Message, Scope
from slicecount.middleware.sqlalchemy import instrument_sqlalchemy, uninstrument_sqlalchemy
from slicecount.middleware.starlette import SliceCountMiddleware
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from tests.middleware.helpers import by_label, total

pytestmark = pytest.mark.topologies


async def ok(request: Request) -> Response:
    return PlainTextResponse("ok")


async def boom(request: Request) -> Response:
    raise RuntimeError("boom")


async def stream(request: Request) -> Response:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(4):
            await asyncio.sleep(0.25)
            yield b"chunk"

    return StreamingResponse(chunks())


async def echo(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_text(await websocket.receive_text())
    await websocket.close()


def make_app(recorder: Recorder, **options: Any) -> Starlette:
    inner = Router(routes=[Route("/items/{item_id:int}", ok)])
    app = Starlette(
        routes=[
            Route("/", ok),
            Route("/users/{user_id:int}", ok),
            Route("/only-post", ok, methods=["POST"]),
            Route("/boom", boom),
            Route("/stream", stream),
            WebSocketRoute("/ws", echo),
            Mount("/api/{version}", routes=[Mount("/shop", app=inner)]),
        ]
    )
    app.add_middleware(SliceCountMiddleware, recorder=recorder, **options)
    return app


def test_routes_are_templates_with_mounts_resolved(recorder: Recorder, store: Store) -> None:
    with TestClient(make_app(recorder)) as client:
        assert client.get("/users/7").status_code == 200
        assert client.get("/api/v2/shop/items/3").status_code == 200
        assert client.get("/api/v3/shop/items/4").status_code == 200
        assert client.get("/api/v3/shop/nothing").status_code == 404
        assert client.get("/nowhere").status_code == 404
        assert client.get("/only-post").status_code == 405
    assert by_label(store, "http.requests", "route") == {
        "/users/{user_id}": 1,
        "/api/{version}/shop/items/{item_id}": 2,
        "<unmatched>": 2,
        "/only-post": 1,
    }
    assert total(store, "http.requests", route="/only-post", status="405") == 1


def test_lifespan_shutdown_flushes_the_recorder(recorder: Recorder, store: Store) -> None:
    with TestClient(make_app(recorder)) as client:
        client.get("/")
        assert recorder.pending > 0  # flush_interval is an hour: only shutdown can write
    assert recorder.pending == 0
    assert total(store, "http.requests") == 1


@pytest.mark.slow
@pytest.mark.topologies("standalone")  # the route namer's test: one is enough
def test_two_thousand_random_paths_add_only_a_few_series(recorder: Recorder, store: Store) -> None:
    rng = random.Random(2)
    app = make_app(recorder)

    async def load() -> None:  # one event loop, no thread portal: ~20x faster than TestClient
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            for _ in range(2_000):
                await client.get(f"/{rng.getrandbits(64):x}")

    asyncio.run(load())
    assert recorder.flush()
    assert len(store.series("http.requests", 60)) == 1
    assert total(store, "http.requests", route="<unmatched>", status="404") == 2_000


def test_an_endpoint_that_raises_is_500_and_the_server_sees_it(
    recorder: Recorder, store: Store
) -> None:
    with TestClient(make_app(recorder)) as client, pytest.raises(RuntimeError, match="boom"):
        client.get("/boom")
    with TestClient(make_app(recorder), raise_server_exceptions=False) as client:
        assert client.get("/boom").status_code == 500
    assert total(store, "http.requests", route="/boom", status="500") == 2


@pytest.mark.slow
def test_a_streaming_response_is_timed_to_its_last_chunk(recorder: Recorder, store: Store) -> None:
    with TestClient(make_app(recorder)) as client:
        assert client.get("/stream").content == b"chunk" * 4
    assert total(store, "http.request.duration.sum_us", route="/stream") >= 1_000_000
    assert by_label(store, "http.request.duration.bucket", "le", route="/stream") == {"2.5": 1}


def test_websockets_pass_through_uncounted(recorder: Recorder, store: Store) -> None:
    with TestClient(make_app(recorder)) as client, client.websocket_connect("/ws") as ws:
        ws.send_text("hi")
        assert ws.receive_text() == "hi"
    assert store.series("http.requests", 60) == []


def test_excluded_paths_and_static_labels(recorder: Recorder, store: Store) -> None:
    app = make_app(recorder, exclude_paths=["/users/*"], labels={"service": "shop"})
    with TestClient(app) as client:
        client.get("/users/1")
        client.get("/")
    assert by_label(store, "http.requests", "route", service="shop") == {"/": 1}


def test_a_raw_asgi_app_that_never_answers_counts_500(recorder: Recorder, store: Store) -> None:
    async def silent(scope: Scope, receive: object, send: object) -> None:
        return None

    async def call() -> None:
        async def receive() -> Message:
            return {"type": "http.request", "body": b""}

        async def send(message: Message) -> None:
            return None

        app = SliceCountMiddleware(silent, recorder=recorder)
        await app({"type": "http", "method": "GET", "path": "/x"}, receive, send)

    asyncio.run(call())
    assert recorder.flush()
    assert by_label(store, "http.requests", "status") == {"500": 1}


@pytest.fixture
def engine(recorder: Recorder) -> Iterator[Engine]:
    engine = create_engine(
        "sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False}
    )
    metrics = instrument_sqlalchemy(engine, recorder=recorder)
    yield engine
    uninstrument_sqlalchemy(engine, metrics)
    engine.dispose()


@pytest.mark.parametrize("track_queries", [True, False])
def test_queries_in_a_threadpool_endpoint_count_for_the_request_when_tracked(
    engine: Engine, recorder: Recorder, store: Store, track_queries: bool
) -> None:
    def two_queries(request: Request) -> Response:  # sync: Starlette runs it in a thread
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
            conn.execute(text("SELECT 2"))
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/q", two_queries)])
    app.add_middleware(SliceCountMiddleware, recorder=recorder, track_queries=track_queries)
    with TestClient(app) as client:
        client.get("/q")
    queries = by_label(store, "http.request.queries.bucket", "le", route="/q")
    assert queries == ({"2": 1} if track_queries else {})
    assert total(store, "db.queries", operation="SELECT") == 2  # the engine counts either way
    assert total(store, "http.requests", route="/q") == 1
