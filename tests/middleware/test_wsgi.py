"""The WSGI middleware around plain WSGI apps, called the way a WSGI server calls them."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from werkzeug.test import Client

import slicecount
from slicecount.config import Settings
from slicecount.middleware.wsgi import SliceCountMiddleware, StartResponse
from slicecount.recording import default
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from tests.middleware.helpers import by_label, total

pytestmark = pytest.mark.topologies


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


@pytest.mark.slow
def test_duration_covers_the_streamed_body_to_its_last_chunk(
    recorder: Recorder, store: Store
) -> None:
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
    assert recorder.pending > 0  # read to its end: counted (a test client may never close it)
    body.close()  # type: ignore[attr-defined]
    assert closed == [True]  # the app's body is closed all the same, and nothing counted twice
    assert recorder.flush()
    assert total(store, "http.request.duration.sum_us") >= 1_000_000
    assert by_label(store, "http.request.duration.bucket", "le") == {"2.5": 1}
    assert by_label(store, "http.requests", "status") == {"200": 1}


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


def test_two_middlewares_with_their_own_settings(settings: Settings) -> None:
    first = SliceCountMiddleware(
        hello, settings=settings.with_changes(prefix="a:"), labels={"app": "a"}
    )
    second = SliceCountMiddleware(
        hello, settings=settings.with_changes(prefix="b:"), exclude_paths=["/missing"]
    )
    for app in (first, second):
        for path in ("/", "/missing"):
            Client(app).get(path, buffered=True)
    recorders = [app.counter.source.get() for app in (first, second)]
    assert recorders[0] is not recorders[1]
    for recorder in recorders:
        assert recorder is not None and recorder.close()
        recorder.store.close()
    with (
        Store(settings.with_changes(prefix="a:")) as a,
        Store(settings.with_changes(prefix="b:")) as b,
        Store(settings) as unprefixed,
    ):
        assert by_label(a, "http.requests", "status", app="a") == {"200": 1, "404": 1}
        assert by_label(b, "http.requests", "status") == {"200": 1}
        assert unprefixed.series("http.requests", 60) == []


def test_without_recorder_or_settings_the_current_default_counts(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(default, "_recorder", None)  # the process default is restored after
    app = SliceCountMiddleware(hello, route_resolver=lambda environ: environ["PATH_INFO"])
    first = slicecount.configure(settings.with_changes(prefix="a:"))
    Client(app).get("/one", buffered=True)
    # The new default admits one label set per metric: ids the old one named are not reused.
    second = slicecount.configure(settings.with_changes(prefix="b:", max_series_per_metric=1))
    Client(app).get("/two", buffered=True)
    Client(app).get("/one", buffered=True)
    assert second.close()
    for recorder in (first, second):
        recorder.store.close()
    with (
        Store(settings.with_changes(prefix="a:")) as a,
        Store(settings.with_changes(prefix="b:")) as b,
    ):
        assert by_label(a, "http.requests", "route") == {"/one": 1}
        assert by_label(b, "http.requests", "route") == {"/two": 1, "": 1}
        assert total(b, "http.requests", overflow="true") == 1


def test_a_request_the_core_cannot_name_is_served_and_logged_once(
    recorder: Recorder, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    too_long = "/" + "x" * 300  # label values stop at 256 characters
    app = SliceCountMiddleware(hello, recorder=recorder, route_resolver=lambda environ: too_long)
    with caplog.at_level(logging.ERROR, logger="slicecount"):
        for _ in range(3):
            assert Client(app).get("/", buffered=True).status_code == 200
    assert recorder.flush()
    assert store.series("http.requests", 60) == []
    logged = [r for r in caplog.records if "could not record a request" in r.getMessage()]
    assert len(logged) == 1
