"""The test clients of Flask and Starlette (Django's: test_django.py): a request is counted once
its response has been read, with nothing closed by hand, and never twice."""

from __future__ import annotations

from flask import Flask
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from slicecount.middleware.flask import SliceCount
from slicecount.middleware.starlette import SliceCountMiddleware
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from tests.middleware.helpers import by_label


def test_flasks_test_client_counts_a_response_once_it_is_read(
    recorder: Recorder, store: Store
) -> None:
    app = Flask(__name__)
    SliceCount(app, recorder=recorder)

    @app.get("/users/<int:user_id>")
    def user(user_id: int) -> str:
        return f"user {user_id}"

    client = app.test_client()
    for i in range(3):
        assert client.get(f"/users/{i}").text.startswith("user")  # read: never closed here
    kept = client.get("/users/9")
    assert kept.data == b"user 9"
    assert recorder.flush()
    assert by_label(store, "http.requests", "route") == {"/users/<int:user_id>": 4}
    kept.close()  # closing it later counts nothing more
    assert recorder.flush()
    assert by_label(store, "http.requests", "route") == {"/users/<int:user_id>": 4}


def test_starlettes_test_client_counts_a_response_once_it_is_read(
    recorder: Recorder, store: Store
) -> None:
    async def item(request: object) -> PlainTextResponse:
        return PlainTextResponse("item")

    async def stream(request: object) -> StreamingResponse:
        return StreamingResponse(iter([b"a", b"b"]))

    app = Starlette(routes=[Route("/items/{id}", item), Route("/stream", stream)])
    app.add_middleware(SliceCountMiddleware, recorder=recorder)
    client = TestClient(app)
    assert client.get("/items/1").text == "item"
    with client.stream("GET", "/stream") as response:
        assert b"".join(response.iter_bytes()) == b"ab"
    assert recorder.flush()
    assert by_label(store, "http.requests", "route") == {"/items/{id}": 1, "/stream": 1}
