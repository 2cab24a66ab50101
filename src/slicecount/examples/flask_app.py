"""An example Flask app instrumented with slicecount (used by the demo and the server tests).

    SLICECOUNT_REDIS_URL=redis://127.0.0.1:6379/0 \\
        gunicorn -w 4 -c examples/gunicorn.conf.py slicecount.examples.flask_app:app
"""

from __future__ import annotations

import os
import threading
import time

import slicecount
from slicecount.errors import extra_imports
from slicecount.examples import USER_HEADER, visitor
from slicecount.middleware.flask import SliceCount
from slicecount.middleware.sqlalchemy import instrument_sqlalchemy

with extra_imports("examples", "the example Flask app"):
    from flask import Flask, Response, abort, jsonify, request
    from sqlalchemy import Engine, create_engine, text
    from sqlalchemy.pool import StaticPool

_engine_lock = threading.Lock()
_engines: dict[int, Engine] = {}


def engine() -> Engine:
    """One in-memory SQLite database per process (forked workers must not share one)."""
    pid = os.getpid()
    with _engine_lock:
        if pid not in _engines:
            db = create_engine(
                "sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False}
            )
            with db.begin() as conn:
                conn.execute(text("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)"))
                conn.execute(
                    text("INSERT INTO users (id, name) VALUES (:id, :name)"),
                    [{"id": i, "name": f"user{i}"} for i in range(1, 101)],
                )
            instrument_sqlalchemy(db)
            _engines[pid] = db
        return _engines[pid]


def create_app() -> Flask:
    app = Flask(__name__)
    # track_queries: the engine() below is instrumented, so requests report their queries
    # limits: the search is rate limited per client address (429 past 10 a second)
    # unique_clients: the distinct visitors of each route per slice (http.unique_clients)
    SliceCount(
        app,
        exclude_paths=["/health"],
        track_queries=True,
        limits={"/search": "10/second"},
        unique_clients=visitor,
    )

    @app.get("/")
    def index() -> str:
        return "slicecount example"

    @app.get("/health")
    def health() -> str:
        return "ok"

    @app.get("/users/<int:user_id>")
    def user(user_id: int) -> Response:
        with engine().connect() as conn:
            row = conn.execute(
                text("SELECT id, name FROM users WHERE id = :id"), {"id": user_id}
            ).first()
        if row is None:
            abort(404)
        return jsonify(id=row.id, name=row.name)

    @app.get("/users")
    def users() -> Response:
        # An N+1 page on purpose: one query for the ids, one per user.
        with engine().connect() as conn:
            ids = [r.id for r in conn.execute(text("SELECT id FROM users ORDER BY id LIMIT 3"))]
            names = [
                conn.execute(text("SELECT name FROM users WHERE id = :id"), {"id": i}).scalar()
                for i in ids
            ]
        return jsonify(names)

    @app.post("/orders")
    def order() -> tuple[Response, int]:
        slicecount.event("orders.created", plan=request.args.get("plan", "free"))
        # the distinct buyers per slice, each also counted once per slice into shop.buyers
        buyer = request.headers.get(USER_HEADER, request.remote_addr or "anonymous")
        slicecount.unique("shop.buyers", buyer, first_seen=True)
        return jsonify(ok=True), 201

    @app.get("/search")
    def search() -> Response:
        return jsonify(results=[], q=request.args.get("q", ""))

    @app.get("/slow")
    def slow() -> str:
        time.sleep(float(request.args.get("seconds", "0.3")))
        return "slow"

    @app.get("/error")
    def error() -> str:
        raise RuntimeError("an example failure")

    return app


app = create_app()
