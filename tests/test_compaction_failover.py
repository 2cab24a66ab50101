"""Compaction through a failover (blocks layout): the primary is SIGKILLed while 3 cleaners
move open fields into blocks and a writer adds to recent and long-sealed seconds. A compaction
is one script, replicated whole, so the promoted replica holds each series either before or
after it: the history replicated before is all there, nothing is doubled, and the passes
after the failover finish the job."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

import pytest
import redis

from slicecount.cleaner.compaction import Compactor
from slicecount.config import Settings
from slicecount.core.keys import KeySpace
from slicecount.errors import StoreError
from slicecount.store import Store
from tests.cleaner.blocks_layout import (
    blocks_settings,
    expected,
    open_fields,
    open_write,
    stored,
    write_open,
)
from tests.topologies import ClusterGroup, SentinelGroup

# The suite's 120 s guard is less than this module's own waits: a cluster or Sentinel group
# started and filled, up to 60 s of passes before the strike, the promotion, up to 60 s after,
# the last pass and the checks (alone 17-24 s; beside the suite under coverage, up to 100 s when
# it had twice the series and half the clock's step). 60 series over 3 masters and ~60 passes
# still strike mid-compaction: each run meets dozens of failed passes.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
NOW = 1_700_006_400
RETENTION = {1: 3600, 5: 34560, 60: 44640, 3600: 9600}  # the 10 minutes written, all kept
SERIES = [f'http.requests{{route="/r{i}"}}' for i in range(60)]


def compact_through(
    settings: Settings,
    client: redis.Redis | redis.RedisCluster,
    replicated: Callable[[], object],
    failover: Callable[[], object],
) -> dict[str, int]:
    """Write 10 minutes of open fields for every series (replicated before anything else),
    then compact with 3 cleaners whose clock steps 10 s a run, beside a writer adding to recent
    and sealed seconds, while ``failover()`` strikes, and finish; return the figures."""
    written = {sid: {NOW - 600 + k: 1 + (k + n) % 4 for k in range(600)} for n, sid in
               enumerate(SERIES)}  # fmt: skip
    for sid, counts in written.items():
        write_open(client, settings, sid, counts)
    replicated()
    clock = [NOW - 590]
    stop = threading.Event()
    runs, errors = [0], [0]
    acked: dict[str, dict[int, int]] = {sid: {} for sid in SERIES}
    unknown: dict[str, dict[int, int]] = {sid: {} for sid in SERIES}  # failed: applied or not

    def write() -> None:
        rng = random.Random(3)
        with Store(settings) as store:
            while not stop.is_set():
                sid, n = rng.choice(SERIES), rng.randint(1, 3)
                t = clock[0] - rng.choice((0, 0, 1, 30, 200))  # now and then long sealed
                try:
                    store.run(open_write(store, sid, {t: n}))
                except StoreError:
                    unknown[sid][t] = unknown[sid].get(t, 0) + n
                    time.sleep(0.05)
                    continue
                acked[sid][t] = acked[sid].get(t, 0) + n

    def clean() -> None:
        with Store(settings) as store:
            compactor = Compactor(store)
            while not stop.is_set():
                try:
                    compactor.run(clock[0])
                except StoreError:
                    errors[0] += 1  # the primary is gone: the next run asks again
                    time.sleep(0.1)
                    continue
                runs[0] += 1
                clock[0] = min(NOW + 20, clock[0] + 10)

    cleaners = [threading.Thread(target=clean) for _ in range(3)]
    cleaners.append(threading.Thread(target=write))
    for thread in cleaners:
        thread.start()
    deadline = time.monotonic() + 60
    while clock[0] < NOW - 300 and time.monotonic() < deadline:
        time.sleep(0.01)  # half way through: strike
    failover()
    deadline = time.monotonic() + 60
    while clock[0] < NOW + 20 and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    for thread in cleaners:
        thread.join()
    lost = 0
    with Store(settings) as store:
        done = Compactor(store).run(NOW + 40)  # sealed past every write
        assert done is not None
        for sid, counts in written.items():
            # the history written before is all there; what the writer added is there at most
            # once (a write the old primary acknowledged and never replicated may be missing)
            got = stored(store, sid)
            least = expected(settings, counts)
            most = expected(settings, _sum(counts, acked[sid], unknown[sid]))
            for p in settings.precisions:
                for start in got[p].keys() | most[p].keys():
                    n = got[p].get(start, 0)
                    assert least[p].get(start, 0) <= n <= most[p].get(start, 0), (sid, p, start)
            lost += sum(acked[sid].values()) + sum(counts.values()) - sum(got[1].values())
            assert open_fields(store, sid) == 0, sid
    return {"runs": runs[0], "errors": errors[0], "lost": lost,
            "written after": sum(sum(c.values()) for c in acked.values())}  # fmt: skip


def _sum(*counts: dict[int, int]) -> dict[int, int]:
    total: dict[int, int] = {}
    for one in counts:
        for t, n in one.items():
            total[t] = total.get(t, 0) + n
    return total


def test_a_failover_during_compaction_loses_and_doubles_nothing() -> None:
    with SentinelGroup() as group:
        settings = blocks_settings(group.url, socket_timeout=1.0, retention=RETENTION)

        def replicated() -> None:
            with redis.Redis(port=group.primary_port()) as primary:
                assert primary.wait(1, 10_000) == 1

        with group.client() as client:  # the primary: it writes before the failover
            figures = compact_through(settings, client, replicated, group.kill_primary)
    print(figures)
    assert figures["errors"] > 0  # the cleaners did meet the failover


def test_a_cluster_master_killed_during_compaction_loses_and_doubles_nothing() -> None:
    with ClusterGroup() as cluster:
        settings = blocks_settings(cluster.url, socket_timeout=1.0, retention=RETENTION)

        def replicated() -> None:
            for node in cluster.masters():
                with redis.Redis(port=node.port) as master:
                    assert master.wait(1, 10_000) == 1

        victim = KeySpace(settings.prefix, settings.shards).open(SERIES[0])
        client = cluster.client()
        try:
            figures = compact_through(
                settings, client, replicated, lambda: cluster.kill_master_of(victim)
            )
        finally:
            client.close()
    print(figures)
    assert figures["errors"] > 0
