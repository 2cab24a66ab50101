"""slicecount on a real Redis Cluster (3 masters, a replica each): every batch reaches the
node of its slot, flushes spread over the masters and stay exact, the cleaner trims per shard,
the datasource answers as on one server, and writers go through a master's failover."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import time
from collections import Counter
from collections.abc import Iterator
from multiprocessing.queues import Queue

import pytest
from starlette.testclient import TestClient

from slicecount.cleaner import Cleaner
from slicecount.config import Settings
from slicecount.core.keys import KeySpace
from slicecount.core.slices import oldest_kept
from slicecount.datasource.app import create_app
from slicecount.errors import StoreError
from slicecount.store import Store
from slicecount.store.asyncio import AsyncStore
from tests.topologies import ClusterGroup, write_through

pytestmark = pytest.mark.slow
NOW = 1_700_006_400


@pytest.fixture
def cluster(spawned_cluster: ClusterGroup) -> ClusterGroup:
    """The session's cluster, emptied."""
    spawned_cluster.flush()
    return spawned_cluster


@pytest.fixture
def store(cluster: ClusterGroup) -> Iterator[Store]:
    with Store(Settings(redis_url=cluster.url)) as opened:
        yield opened


def test_reads_and_writes_reach_every_slot(cluster: ClusterGroup, store: Store) -> None:
    assert store.settings.shards == 64
    store.apply({f'jobs{{i="{i}"}}': {NOW - 30: i} for i in range(1, 201)})
    ids = store.series("jobs", 60)
    assert len(ids) == 200
    counts = store.read(ids, 60, NOW - 60, NOW)
    assert sorted(values[0] or 0 for values in counts.values()) == list(range(1, 201))
    assert store.get("jobs", 60, {"i": 7}) == [(NOW - 60, 7)]
    holders = {cluster.master_of(store.keys.open(i)).port for i in ids}
    assert len(holders) == 3  # the series really are spread over the three masters

    async def read_async() -> int:
        async with AsyncStore(Settings(redis_url=cluster.url)) as reader:
            found = await reader.read(await reader.series("jobs", 60), 60, NOW - 60, NOW)
            return sum(values[0] or 0 for values in found.values())

    assert asyncio.run(read_async()) == sum(range(1, 201))


WRITERS, EVENTS, SERIES = 4, 50_000, 3_000


def _send_events(url: str, index: int, errors: Queue[str]) -> None:
    """One app process: ``slicecount.event()`` as an app calls it, then exit (which flushes)."""
    import slicecount

    slicecount.configure(redis_url=url, max_series_per_metric=SERIES, flush_interval=0.1)
    handler = _Collect(errors)
    logging.getLogger("slicecount").addHandler(handler)
    for k in range(EVENTS):
        slicecount.event("spread", s=(k * 7 + index) % SERIES)
    slicecount.get_recorder().close()
    logging.getLogger("slicecount").removeHandler(handler)


class _Collect(logging.Handler):
    """Every warning slicecount logs in a writer (a MOVED or CROSSSLOT would show here)."""

    def __init__(self, errors: Queue[str]) -> None:
        super().__init__(logging.WARNING)
        self.errors = errors

    def emit(self, record: logging.LogRecord) -> None:
        self.errors.put(record.getMessage())


def test_four_processes_of_events_are_exact_and_spread_over_the_masters(
    cluster: ClusterGroup, store: Store
) -> None:
    before = {
        node.port: cluster.commandstats(node.port).get("hincrby", 0) for node in cluster.masters()
    }
    context = multiprocessing.get_context("spawn")  # fresh processes, as app workers are
    errors: Queue[str] = context.Queue()
    processes = [
        context.Process(target=_send_events, args=(cluster.url, w, errors)) for w in range(WRITERS)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(300)
        assert process.exitcode == 0
    logged = []
    while not errors.empty():
        logged.append(errors.get())
    assert logged == []  # no MOVED, CROSSSLOT, nor anything else reached a writer
    expected = Counter((k * 7 + w) % SERIES for w in range(WRITERS) for k in range(EVENTS))
    now = time.time()
    for precision in store.settings.precisions:
        ids = store.series("spread", precision)
        assert len(ids) == SERIES
        span = max(600, 2 * precision)
        found = store.read(ids, precision, now - span, now)
        per_series = {sid: sum(v or 0 for v in values) for sid, values in found.items()}
        assert per_series == {f'spread{{s="{s}"}}': n for s, n in expected.items()}, precision
    assert store.series("slicecount.rejected", 86400) == []
    assert store.series("slicecount.dropped", 86400) == []
    calls = {
        port: cluster.commandstats(port).get("hincrby", 0) - done for port, done in before.items()
    }
    mean = sum(calls.values()) / len(calls)
    print("HINCRBY per master", calls)
    assert all(abs(n - mean) <= 0.1 * mean for n in calls.values()), calls


def test_the_book_layouts_cleaner_trims_every_shard(cluster: ClusterGroup) -> None:
    with Store(Settings(redis_url=cluster.url, layout="book")) as store:
        trim_every_shard(store)


def trim_every_shard(store: Store) -> None:
    store.apply({f'trim{{i="{i}"}}': {NOW - s: 1 for s in range(200)} for i in range(20)})
    store.apply({"gone": {NOW - 200_000: 1}})
    stats = Cleaner(store, clock=lambda: NOW).run_once(every_precision=True)
    assert stats is not None and not stats.interrupted
    for i in range(20):
        kept = [start for start, _ in store.get("trim", 1, {"i": i})]
        assert len(kept) == 120 and min(kept) >= oldest_kept(1, 120, NOW)
    assert store.series("gone", 1) == [] and store.series("gone", 86400) == ["gone"]


def test_the_datasource_answers_as_on_one_server(cluster: ClusterGroup, store: Store) -> None:
    store.apply(
        {
            f'http.requests{{route="/{r}",status="{s}"}}': {t: 1 for t in range(NOW - 600, NOW)}
            for r in range(5)
            for s in (200, 500)
        }
    )
    app = create_app(Settings(redis_url=cluster.url), clock=lambda: NOW)
    with TestClient(app) as client:
        body = client.post(
            "/api/v1/query",
            data={"query": "sum by (status) (increase(http_requests_total[1m]))", "time": str(NOW)},
        ).json()
        assert sorted((r["metric"]["status"], r["value"][1]) for r in body["data"]["result"]) == [
            ("200", "300"),
            ("500", "300"),
        ]
        values = client.post(
            "/api/v1/label/route/values", data={"match[]": "http_requests_total"}
        ).json()
        assert values["data"] == [f"/{r}" for r in range(5)]


def test_writers_through_a_master_failover_double_nothing() -> None:
    with ClusterGroup() as fresh:
        keys = KeySpace("", Settings(redis_url=fresh.url).shards)
        victim = keys.counter(86400, 'failover{i="0",w="0"}')
        lost = write_through(fresh.url, lambda: fresh.kill_master_of(victim))
    print(f"lost {sum(lost.values())}")
    assert all(n >= 0 for n in lost.values()), "a count was applied twice"
    assert sum(lost.values()) <= 4 * 250 * 2, lost


def test_a_cluster_no_node_answers_is_a_store_error_on_both_stores() -> None:
    """Every node gone (a failover's worst moment): relearning the slots finds no node
    (redis-py's RedisClusterException, not a RedisError), and the operation still fails as a
    StoreError that the cleaner, the writers and the datasource retry, never as that."""
    with ClusterGroup() as fresh:
        settings = Settings(redis_url=fresh.url, layout="blocks", socket_timeout=1.0)
        with Store(settings) as store:
            store.apply({'gone{i="0"}': {1_700_000_000: 1}})
            for node in fresh.nodes:
                node.close()
            with pytest.raises(StoreError):
                store.apply({'gone{i="0"}': {1_700_000_000: 1}})

            async def reading() -> bool:
                async with AsyncStore(settings) as own:
                    return await own.ping()

            assert asyncio.run(reading()) is False
