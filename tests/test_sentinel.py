"""slicecount behind Sentinel: the store (sync and asyncio) finds the primary through the
Sentinels, and Recorders writing through a failover double nothing and lose at most what the
old primary acknowledged but never replicated."""

from __future__ import annotations

import asyncio

import pytest

from slicecount.config import Settings
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from slicecount.store.asyncio import AsyncStore
from tests.topologies import SentinelGroup, write_through

pytestmark = pytest.mark.slow


@pytest.fixture
def group(spawned_sentinels: SentinelGroup) -> SentinelGroup:
    """The session's primary and Sentinels, emptied."""
    spawned_sentinels.flush()
    return spawned_sentinels


def test_the_store_finds_the_primary_through_the_sentinels(group: SentinelGroup) -> None:
    with Store.from_url(group.url) as store:
        store.apply({'jobs{kind="a"}': {1_700_000_000: 3}, "jobs": {1_700_000_001: 1}})
        assert store.get("jobs", 60, {"kind": "a"}) == [(1_699_999_980, 3)]
        assert store.series("jobs", 1) == ["jobs", 'jobs{kind="a"}']

    async def read() -> list[tuple[int, int]]:
        store = AsyncStore(Settings(redis_url=group.url))
        try:
            return await store.get("jobs", 60)
        finally:
            await store.close()

    assert asyncio.run(read()) == [(1_699_999_980, 1)]


def test_the_datasource_answers_through_the_sentinels(group: SentinelGroup) -> None:
    from starlette.testclient import TestClient

    from slicecount.datasource.app import create_app

    now = 1_700_000_030
    with Store.from_url(group.url) as store:
        store.apply({'served{route="/s"}': {s: 2 for s in range(now - 300, now)}})
    with TestClient(create_app(Settings(redis_url=group.url), clock=lambda: now)) as client:
        body = client.post(
            "/api/v1/query", data={"query": "sum(increase(served_total[1m]))", "time": "1700000010"}
        ).json()
    assert body["data"]["result"] == [{"metric": {}, "value": [1_700_000_010, "120"]}]


def test_the_cleaner_trims_through_the_sentinels(group: SentinelGroup) -> None:
    from slicecount.cleaner import Cleaner
    from slicecount.core.slices import oldest_kept

    now = 1_700_006_400
    with Store(Settings(redis_url=group.url, layout="book")) as store:  # the book's trims
        store.apply({"trimmed": {now - s: 1 for s in range(300)}})
        stats = Cleaner(store, clock=lambda: now).run_once(every_precision=True)
        assert stats is not None and not stats.interrupted
        kept = [start for start, _ in store.get("trimmed", 1)]
        assert len(kept) == 120 and min(kept) >= oldest_kept(1, 120, now)


def test_a_flask_app_counts_every_request_through_the_sentinels(group: SentinelGroup) -> None:
    from flask import Flask

    from slicecount.middleware.flask import SliceCount

    app = Flask(__name__)

    @app.get("/hello/<name>")
    def hello(name: str) -> str:
        return name

    own = Store.from_url(group.url)
    recorder = Recorder(own, flush_interval=3600)
    SliceCount(app, recorder=recorder)
    client = app.test_client()
    for i in range(200):
        assert client.get(f"/hello/{i}", buffered=True).status_code == 200
    assert recorder.flush()
    labels = {"method": "GET", "route": "/hello/<name>", "status": "200"}
    for precision in (1, 60, 86400):
        got = recorder.store.get("http.requests", precision, labels)
        assert sum(n for _, n in got) == 200, precision
    recorder.close()
    own.close()


def test_writers_through_a_failover_double_nothing() -> None:
    """4 Recorders flushing every 100 ms; the primary is SIGKILLed under them."""
    with SentinelGroup() as fresh:
        lost = write_through(fresh.url, fresh.kill_primary)
    print(f"lost {sum(lost.values())}")
    assert all(n >= 0 for n in lost.values()), "a count was applied twice"
    # only what the old primary acknowledged and never replicated: about one flush a writer
    assert sum(lost.values()) <= 4 * 250 * 2, lost
