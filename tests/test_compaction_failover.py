"""Compaction through a failover (blocks layout): the primary is SIGKILLed while cleaners move
open fields into blocks. A compaction is one script, replicated whole, so the promoted
replica holds each series either before or after it: nothing written is lost or doubled,
and the passes after the failover finish the job exactly."""

from __future__ import annotations

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
    stored,
    write_open,
)
from tests.topologies import ClusterGroup, SentinelGroup

pytestmark = pytest.mark.slow
NOW = 1_700_006_400
RETENTION = {1: 3600, 5: 34560, 60: 44640, 3600: 9600}  # the 10 minutes written, all kept
SERIES = [f'http.requests{{route="/r{i}"}}' for i in range(120)]


def compact_through(
    settings: Settings,
    client: redis.Redis | redis.RedisCluster,
    replicated: Callable[[], object],
    failover: Callable[[], object],
) -> dict[str, int]:
    """Write 10 minutes of open fields for every series (replicated before anything else),
    then compact with 3 cleaners whose clock steps 5 s a run while ``failover()`` strikes, and
    finish; return the figures."""
    written = {sid: {NOW - 600 + k: 1 + (k + n) % 4 for k in range(600)} for n, sid in
               enumerate(SERIES)}  # fmt: skip
    for sid, counts in written.items():
        write_open(client, settings, sid, counts)
    replicated()
    clock = [NOW - 590]
    stop = threading.Event()
    runs, errors = [0], [0]

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
                clock[0] = min(NOW + 20, clock[0] + 5)

    cleaners = [threading.Thread(target=clean) for _ in range(3)]
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
    with Store(settings) as store:
        done = Compactor(store).run(NOW + 30)
        assert done is not None
        for sid, counts in written.items():
            assert stored(store, sid) == expected(settings, counts), sid
            assert open_fields(store, sid) == 0, sid
    return {"runs": runs[0], "errors": errors[0]}


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
