"""The WSGI middleware around plain WSGI apps, called the way a WSGI server calls them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from werkzeug.test import Client

from slicecount.middleware.wsgi import SliceCountMiddleware, StartResponse
from slicecount.recorder import Recorder
from slicecount.store import Store
from tests.middleware.helpers import by_label, total


def hello(environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
    status = "404 Not Found" if environ["PATH_INFO"] == "/missing" else "200 OK"
    start_response(status, [("Content-Type", "text/plain")])
    return [b"hello"]


def test_counts_status_from_start_response(recorder: Recorder, store: Store) -> None:
    client = Client(SliceCountMiddleware(hello, recorder=recorder, exclude_paths=["/health"]))
    for path in ("/", "/", "/missing", "/health"):
        client.get(path, buffered=True)
    client.post("/", buffered=True)
    assert recorder.flush()
    assert by_label(store, "http.requests", "status") == {"200": 3, "404": 1}
    assert by_label(store, "http.requests", "method") == {"GET": 3, "POST": 1}
    # a plain WSGI app has no route templates: never the raw path
    assert by_label(store, "http.requests", "route") == {"<unmatched>": 4}


def test_custom_route_resolver_and_static_labels(recorder: Recorder, store: Store) -> None:
    app = SliceCountMiddleware(
        hello,
        recorder=recorder,
        labels={"service": "api"},
        route_resolver=lambda environ: environ["PATH_INFO"].rsplit("/", 1)[0] + "/{id}",
    )
    Client(app).get("/users/42", buffered=True)
    assert recorder.flush()
    assert by_label(store, "http.requests", "route", service="api") == {"/users/{id}": 1}


def test_an_app_that_raises_counts_500_and_the_exception_reaches_the_server(
    recorder: Recorder, store: Store
) -> None:
    def broken(environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        Client(SliceCountMiddleware(broken, recorder=recorder)).get("/", buffered=True)
    assert recorder.flush()
    assert by_label(store, "http.requests", "status") == {"500": 1}


def test_a_body_that_fails_midway_counts_500(recorder: Recorder, store: Store) -> None:
    def failing(environ: dict[str, Any], start_response: StartResponse) -> Iterator[bytes]:
        start_response("200 OK", [])
        yield b"first"
        raise ValueError("midway")

    app = SliceCountMiddleware(failing, recorder=recorder)
    with pytest.raises(ValueError, match="midway"):
        Client(app).get("/", buffered=True)
    assert recorder.flush()
    assert by_label(store, "http.requests", "status") == {"500": 1}


def test_duration_covers_the_streamed_body_up_to_close(recorder: Recorder, store: Store) -> None:
    closed = []

    class Body:
        def __iter__(self) -> Iterator[bytes]:
            for _ in range(4):
                time.sleep(0.25)
                yield b"chunk"

        def close(self) -> None:
            closed.append(True)

    def streaming(environ: dict[str, Any], start_response: StartResponse) -> Body:
        start_response("200 OK", [])
        return Body()

    app = SliceCountMiddleware(streaming, recorder=recorder)
    body = app({"REQUEST_METHOD": "GET", "PATH_INFO": "/s"}, lambda s, h, e=None: lambda b: None)
    assert b"".join(body) == b"chunk" * 4
    assert recorder.pending == 0  # nothing recorded before the server closes the body
    body.close()  # type: ignore[attr-defined]
    assert closed == [True]
    assert recorder.flush()
    assert total(store, "http.request.duration.sum_us") >= 1_000_000
    assert by_label(store, "http.request.duration.bucket", "le") == {"2.5": 1}


def test_a_client_that_goes_away_is_counted_once_with_the_sent_status(
    recorder: Recorder, store: Store
) -> None:
    def endless(environ: dict[str, Any], start_response: StartResponse) -> Iterator[bytes]:
        start_response("200 OK", [])
        while True:
            yield b"x"

    app = SliceCountMiddleware(endless, recorder=recorder)
    body = app({"REQUEST_METHOD": "GET", "PATH_INFO": "/"}, lambda s, h, e=None: lambda b: None)
    iterator = iter(body)
    next(iterator)
    iterator.close()  # type: ignore[attr-defined]  # the server gives up on the client
    body.close()  # type: ignore[attr-defined]
    body.close()  # type: ignore[attr-defined]  # a second close records nothing more
    assert recorder.flush()
    assert by_label(store, "http.requests", "status") == {"200": 1}
