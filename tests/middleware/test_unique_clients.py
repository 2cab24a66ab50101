"""``unique_clients=``: the distinct clients of each route per slice, through Flask's test
client and Starlette's TestClient (real WSGI and ASGI call paths) and a real Redis."""

from __future__ import annotations

import time

import pytest
from flask import Flask
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

from slicecount.middleware.asgi import SliceCountMiddleware
from slicecount.middleware.flask import SliceCount
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from slicecount.throttle.clients import header
from tests.test_unique_writing import hll_count

pytestmark = pytest.mark.topologies


def clients_of(store: Store, route: str) -> int:
    now = int(time.time())
    series_id = f'http.unique_clients{{route="{route}"}}'
    return hll_count(store, store.client, series_id, 60, now - now % 60)


def flask_app(recorder: Recorder, **options: object) -> Flask:
    app = Flask(__name__)
    app.add_url_rule("/a", "a", lambda: "a")
    app.add_url_rule("/items/<int:n>", "item", lambda n: str(n))
    SliceCount(app, recorder=recorder, **options)  # type: ignore[arg-type]
    return app


def test_flask_counts_distinct_client_addresses_per_route(recorder: Recorder, store: Store) -> None:
    client = flask_app(recorder, unique_clients=True).test_client()
    for i in range(30):  # 10 clients on /a, each three times; 4 of them on an item too
        address = f"10.0.0.{i % 10}"
        client.get("/a", environ_overrides={"REMOTE_ADDR": address}, buffered=True)
        if i % 10 < 4:
            client.get(f"/items/{i}", environ_overrides={"REMOTE_ADDR": address}, buffered=True)
    assert recorder.flush()
    assert clients_of(store, "/a") == 10
    assert clients_of(store, "/items/<int:n>") == 4


def test_a_key_function_names_the_client(recorder: Recorder, store: Store) -> None:
    client = flask_app(recorder, unique_clients=header("X-User")).test_client()
    for user in ["ann", "bob", "ann", "cy"]:
        client.get("/a", headers={"X-User": user}, buffered=True)
    client.get("/a", buffered=True)  # no header: the key function says None, nobody counted
    assert recorder.flush()
    assert clients_of(store, "/a") == 3


def test_without_the_option_no_unique_series_is_written(recorder: Recorder, store: Store) -> None:
    client = flask_app(recorder).test_client()
    client.get("/a", buffered=True)
    assert recorder.flush()
    assert clients_of(store, "/a") == 0


def test_a_bad_option_is_refused_at_start_up(recorder: Recorder) -> None:
    with pytest.raises(TypeError, match="unique_clients= takes True"):
        flask_app(recorder, unique_clients="yes")


async def hello(request: Request) -> Response:
    return PlainTextResponse("hello")


def test_starlette_counts_distinct_clients_per_route(recorder: Recorder, store: Store) -> None:
    app = Starlette(routes=[Route("/hello", hello)])
    app.add_middleware(SliceCountMiddleware, recorder=recorder, unique_clients=header("X-Api-Key"))
    with TestClient(app) as client:
        for i in range(50):
            assert client.get("/hello", headers={"X-Api-Key": f"key-{i % 7}"}).status_code == 200
    assert recorder.flush()
    assert clients_of(store, "/hello") == 7
