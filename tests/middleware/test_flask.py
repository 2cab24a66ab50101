"""Flask apps through Flask's test client (a real WSGI call path) and a real Redis."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest
from flask import Flask, abort
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import StaticPool

from slicecount.config import Settings
from slicecount.embedded import EmbeddedRedis
from slicecount.middleware.flask import SliceCount
from slicecount.middleware.sqlalchemy import instrument_sqlalchemy, uninstrument_sqlalchemy
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from tests.middleware.helpers import by_label, total

pytestmark = pytest.mark.topologies


def make_app(recorder: Recorder, **options: object) -> Flask:
    app = Flask(__name__)

    @app.get("/")
    def index() -> str:
        return "home"

    @app.get("/users/<int:user_id>")
    def user(user_id: int) -> str:
        if user_id > 100:
            abort(404)
        return f"user {user_id}"

    @app.get("/boom")
    def boom() -> str:
        raise RuntimeError("boom")

    SliceCount(app, recorder=recorder, **options)  # type: ignore[arg-type]
    return app


def test_routes_are_rule_templates_and_misses_are_unmatched(
    recorder: Recorder, store: Store
) -> None:
    client = make_app(recorder).test_client()
    assert client.get("/users/1", buffered=True).status_code == 200
    assert client.get("/users/2", buffered=True).status_code == 200
    assert client.get("/users/101", buffered=True).status_code == 404
    assert client.get("/nowhere", buffered=True).status_code == 404
    assert client.post("/", buffered=True).status_code == 405
    assert recorder.flush()
    assert by_label(store, "http.requests", "route") == {
        "/users/<int:user_id>": 3,
        "<unmatched>": 2,
    }
    assert total(store, "http.requests", route="/users/<int:user_id>", status="404") == 1
    assert total(store, "http.requests", route="<unmatched>", method="POST", status="405") == 1


@pytest.mark.slow
@pytest.mark.topologies("standalone")  # the route namer's test: one is enough
def test_two_thousand_random_paths_add_only_a_few_series(recorder: Recorder, store: Store) -> None:
    client = make_app(recorder).test_client()
    rng = random.Random(1)
    for _ in range(2_000):
        client.get(f"/{rng.getrandbits(64):x}/{rng.getrandbits(32)}", buffered=True)
    assert recorder.flush()
    assert len(store.series("http.requests", 60)) == 1
    assert len(store.series("http.request.duration.bucket", 60)) <= 12
    assert total(store, "http.requests", route="<unmatched>", status="404") == 2_000


def test_a_view_that_raises_is_500_and_the_server_sees_the_exception(
    recorder: Recorder, store: Store
) -> None:
    app = make_app(recorder)
    app.config["PROPAGATE_EXCEPTIONS"] = True  # as under a debugging server
    with pytest.raises(RuntimeError, match="boom"):
        app.test_client().get("/boom", buffered=True)
    app.config["PROPAGATE_EXCEPTIONS"] = False  # production: Flask answers 500 itself
    assert app.test_client().get("/boom", buffered=True).status_code == 500
    assert recorder.flush()
    assert total(store, "http.requests", route="/boom", status="500") == 2


def test_route_is_known_even_when_an_earlier_hook_answers(recorder: Recorder, store: Store) -> None:
    app = Flask(__name__)

    @app.before_request
    def deny() -> tuple[str, int]:
        return "no", 401

    @app.get("/secret/<name>")
    def secret(name: str) -> str:
        return name

    first = SliceCount(recorder=recorder)
    first.init_app(app)
    SliceCount(recorder=recorder).init_app(app)  # a second init on the same app is a no-op
    assert app.extensions["slicecount"] is first
    assert app.wsgi_app is first.middleware
    assert app.test_client().get("/secret/x", buffered=True).status_code == 401
    assert recorder.flush()
    assert by_label(store, "http.requests", "route", status="401") == {"/secret/<name>": 1}


def test_one_extension_instruments_several_apps_and_refuses_unknown_options(
    recorder: Recorder, store: Store
) -> None:
    extension = SliceCount(recorder=recorder, exclude_paths=(p for p in ["/users/*"]))
    for name in ("first", "second"):
        app = Flask(name)
        app.add_url_rule("/", "home", lambda: "home")
        app.add_url_rule("/users/<int:user_id>", "user", lambda user_id: "user")
        extension.init_app(app)
        app.test_client().get("/users/1", buffered=True)  # excluded in both: read twice
        app.test_client().get("/", buffered=True)
    assert recorder.flush()
    assert by_label(store, "http.requests", "route") == {"/": 2}
    with pytest.raises(TypeError, match="labelz"):
        SliceCount(labelz={"a": "b"})  # type: ignore[call-arg]


def test_excluded_paths_are_not_counted(recorder: Recorder, store: Store) -> None:
    client = make_app(recorder, exclude_paths=["/users/*"]).test_client()
    client.get("/users/1", buffered=True)
    client.get("/", buffered=True)
    assert recorder.flush()
    assert by_label(store, "http.requests", "route") == {"/": 1}


@pytest.mark.slow
def test_redis_stopping_mid_traffic_fails_no_request_and_loses_no_count(
    private_redis: EmbeddedRedis,
) -> None:
    store = Store(Settings(redis_url=private_redis.url, socket_timeout=0.5))
    recorder = Recorder(store, flush_interval=0.05, max_backoff=0.2)
    client = make_app(recorder).test_client()
    statuses = []
    for i in range(600):
        if i == 200:
            private_redis.stop()
        if i == 400:
            private_redis.start()  # an empty server: everything must come from the buffer
            time.sleep(0.01)
        statuses.append(client.get(f"/users/{i % 50}", buffered=True).status_code)
        if i in (0, 199):
            deadline = time.monotonic() + 5
            while recorder.pending and time.monotonic() < deadline:
                time.sleep(0.02)
    assert statuses == [200] * 600
    deadline = time.monotonic() + 10
    while recorder.pending and time.monotonic() < deadline:
        time.sleep(0.05)
    recorder.close()
    # the first 200 were written before the restart wiped the server; the rest came through
    assert total(store, "http.requests") == 400
    store.close()


@pytest.fixture
def engine(recorder: Recorder) -> Iterator[Engine]:
    engine = create_engine("sqlite://", poolclass=StaticPool)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"))
    metrics = instrument_sqlalchemy(engine, recorder=recorder)
    yield engine
    uninstrument_sqlalchemy(engine, metrics)
    engine.dispose()


def test_a_view_with_three_queries(engine: Engine, recorder: Recorder, store: Store) -> None:
    app = make_app(recorder, track_queries=True)

    @app.get("/three")
    def three() -> str:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO t (v) VALUES ('a')"))
            conn.execute(text("UPDATE t SET v = 'b'"))
            return str(conn.execute(text("SELECT count(*) FROM t")).scalar())

    assert app.test_client().get("/three", buffered=True).status_code == 200
    assert app.test_client().get("/", buffered=True).status_code == 200
    assert recorder.flush()
    assert by_label(store, "db.queries", "operation") == {"INSERT": 1, "UPDATE": 1, "SELECT": 1}
    assert total(store, "db.query.duration.bucket") == 3
    assert by_label(store, "http.request.queries.bucket", "le", route="/three") == {"3": 1}
    assert total(store, "http.request.queries.sum_us", route="/three") == 3_000_000
    assert by_label(store, "http.request.queries.bucket", "le", route="/") == {"0": 1}


def test_failed_queries_are_counted_too(engine: Engine, recorder: Recorder, store: Store) -> None:
    with pytest.raises(Exception, match="no such table"), engine.connect() as conn:
        conn.execute(text("DELETE FROM missing"))
    with engine.connect() as conn:
        conn.execute(text("PRAGMA user_version"))
    assert recorder.flush()
    assert by_label(store, "db.queries", "operation") == {"DELETE": 1, "OTHER": 1}


def test_track_queries_is_per_middleware(engine: Engine, recorder: Recorder, store: Store) -> None:
    tracked = make_app(recorder, track_queries=True)
    untracked = make_app(recorder, labels={"app": "untracked"})
    for app in (tracked, untracked):

        @app.get("/count")
        def count() -> str:
            with engine.connect() as conn:
                return str(conn.execute(text("SELECT count(*) FROM t")).scalar())

        assert app.test_client().get("/count", buffered=True).status_code == 200
    assert recorder.flush()
    assert by_label(store, "http.requests", "app", route="/count") == {"": 1, "untracked": 1}
    assert by_label(store, "http.request.queries.bucket", "le", route="/count") == {"1": 1}
    assert total(store, "http.request.queries.bucket", app="untracked") == 0
    assert total(store, "db.queries", operation="SELECT") == 2
