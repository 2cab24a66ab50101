"""The cleaner on a real Redis Cluster (3 masters, a replica each, 64 shards): every trim call
stays in its shard's slot, retention is exact on every shard, emptied counters leave their
shard's registry, and cleaners racing each other and writers orphan nothing and lose nothing."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
import redis

from slicecount.cleaner import Cleaner
from slicecount.config import Settings
from slicecount.core.series import encode
from slicecount.core.slices import oldest_kept, slice_start
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from tests.cleaner import record_sweeps
from tests.topologies import ClusterGroup

pytestmark = pytest.mark.slow
NOW = 1_700_006_400  # a multiple of 86400
HASH = re.compile(r"count:\{(\d+)\}:(.*)", re.S)
REGISTRY = re.compile(r"known:\{(\d+)\}")


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterGroup]:
    with ClusterGroup() as started:
        yield started


@pytest.fixture
def settings(cluster: ClusterGroup) -> Settings:
    for node in cluster.masters():  # each test starts from an empty cluster
        with redis.Redis(port=node.port) as client:
            client.flushall()
    return Settings(redis_url=cluster.url, layout="book")  # the book's trims and sweeps


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    with Store(settings) as opened:
        yield opened


def layout(cluster: ClusterGroup) -> tuple[set[tuple[int, str]], set[tuple[int, str]]]:
    """(every counter hash, every registry member) on every master, as (shard, member)."""
    hashes: set[tuple[int, str]] = set()
    members: set[tuple[int, str]] = set()
    for node in cluster.masters():
        with redis.Redis(port=node.port, decode_responses=True) as client:
            for key in client.scan_iter("count:*", count=1000):
                found = HASH.fullmatch(key)
                assert found, key
                hashes.add((int(found[1]), found[2]))
            for key in client.scan_iter("known:*", count=1000):
                shard = REGISTRY.fullmatch(key)
                assert shard, key
                members |= {(int(shard[1]), m) for m in client.zrange(key, 0, -1)}
    return hashes, members


def kept(store: Store, name: str, precision: int, i: str) -> list[int]:
    """The slice starts a hash holds (series ``name{i="..."}``)."""
    return [start for start, _ in store.get(name, precision, {"i": i})]


def test_retention_is_exact_on_every_shard(cluster: ClusterGroup, store: Store) -> None:
    ids = [encode("spread", {"i": i}) for i in range(400)]
    assert {store.keys.shard(i) for i in ids} == set(range(64))
    # 200 s of history each; every 7th also an old slice, which a cold pass leaves in the
    # short hashes (1 s and 5 s slices) for the sweep
    writes = {
        sid: {NOW - k for k in range(200)} | ({NOW - 5000} if n % 7 == 0 else set())
        for n, sid in enumerate(ids)
    }
    store.apply({sid: dict.fromkeys(seconds, 1) for sid, seconds in writes.items()})
    precisions = store.settings.precisions

    def expected(sid: str, precision: int, now: float) -> set[int]:
        floor = oldest_kept(precision, 120, now)
        starts = {slice_start(t, precision) for t in writes[sid]}
        return {start for start in starts if start >= floor}

    record_sweeps(store, NOW)  # a cleaner back after a gap, its last sweep recent
    cleaner = Cleaner(store, clock=lambda: NOW + 1)
    cold = cleaner.run_once(every_precision=True)
    assert cold is not None and cold.removed == 0 and cold.full == 0
    for n, sid in enumerate(ids):
        for precision in precisions:
            straggler = {slice_start(NOW - 5000, precision)} if n % 7 == 0 else set()
            left = straggler if precision in (1, 5) else set()
            found = kept(store, "spread", precision, str(n))
            assert set(found) == expected(sid, precision, NOW + 1) | left
    record_sweeps(store, NOW - 10**6)  # its last sweep long ago: this pass sweeps
    cleaner.clock = lambda: NOW + 61
    sweep = cleaner.run_once(every_precision=True)
    assert sweep is not None and sweep.full == sweep.hashes
    for n, sid in enumerate(ids):
        for precision in precisions:
            found = kept(store, "spread", precision, str(n))
            assert set(found) == expected(sid, precision, NOW + 61)
    hashes, members = layout(cluster)
    mine = {(s, m) for s, m in members if "spread" in m}
    assert len(mine) == 400 * len(precisions) and mine <= hashes


def test_emptied_counters_leave_their_shards_registry(cluster: ClusterGroup, store: Store) -> None:
    ended = [encode("ended", {"i": i}) for i in range(300)]  # 1 s slices: an expired run
    stale = [encode("stale", {"i": i}) for i in range(300)]  # one slice 2.3 days old
    live = [encode("live", {"i": i}) for i in range(300)]
    store.apply(
        {sid: {NOW - k: 1 for k in range(120, 300)} for sid in ended}
        | {sid: {NOW - 200_000: 1} for sid in stale}
        | {sid: {NOW - 1: 1} for sid in live}
    )
    assert {store.keys.shard(sid) for sid in ended} == {store.keys.shard(s) for s in stale}
    assert len({store.keys.shard(sid) for sid in ended}) == 64
    record_sweeps(store, NOW)
    cleaner = Cleaner(store, clock=lambda: NOW)

    def registered(ids: list[str], precision: int) -> set[str]:
        _, members = layout(cluster)
        return {sid for sid in ids if (store.keys.shard(sid), f"{precision}:{sid}") in members}

    cold = cleaner.run_once(every_precision=True)
    assert cold is not None and cold.removed == 300
    assert registered(ended, 1) == set() and registered(ended, 5) == set(ended)
    assert registered(stale, 1) == set(stale)  # a short hash's old slice: the sweep's
    record_sweeps(store, NOW - 10**6)
    cleaner.clock = lambda: NOW + 60
    sweep = cleaner.run_once(every_precision=True)
    assert sweep is not None and sweep.removed == 300 * 4  # 1, 5, 60 and 300 s slices
    for precision in (1, 5, 60, 300):
        assert registered(stale, precision) == set()
    for precision in (3600, 18000, 86400):
        assert registered(stale, precision) == set(stale)
    assert registered(live, 1) == set(live)
    hashes, members = layout(cluster)
    assert hashes == members  # nothing orphaned, nothing registered without its hash


# Run on one master, it sees one instant of every shard that master holds: each hash has its
# registry member and each member its hash (both in the shard's slot, so on this node).
CHECK_NOW = """
local found = {}
for _, key in ipairs(redis.call('KEYS', 'count:{*')) do
  local shard, member = string.match(key, '^count:{(%d+)}:(.*)$')
  if not redis.call('ZSCORE', 'known:{' .. shard .. '}', member) then
    found[#found + 1] = 'orphan ' .. key
  end
end
for _, registry in ipairs(redis.call('KEYS', 'known:{*')) do
  local shard = string.match(registry, '^known:{(%d+)}$')
  for _, member in ipairs(redis.call('ZRANGE', registry, 0, -1)) do
    if redis.call('EXISTS', 'count:{' .. shard .. '}:' .. member) == 0 then
      found[#found + 1] = 'no hash for ' .. member
    end
  end
end
return found
"""
RACE_SPEED = 50.0
"""Simulated seconds per wall second: 6 s of wall time are 5 minutes of traffic. Slow enough
that a pass (64 shards x 3 precisions) ends long before writes outrun its horizon."""


def test_cleaners_and_writers_race_without_orphans_or_losses(
    cluster: ClusterGroup, settings: Settings
) -> None:
    """Three cleaners (each its own store and owner) pass every 2 simulated seconds over all
    64 shards while three Recorders write the same drifting series, flushing every 2. With
    1 s slices kept for 5 s, hashes empty and refill all the time, so the cleaners' "empty ->
    forget" step meets the writers' ZADD NX + HINCRBY on every master."""
    race = settings.with_changes(precisions=(1, 5, 60), retention=5)
    start_real = time.monotonic()
    clock_lock = threading.Lock()
    frozen: list[float] = []

    def clock() -> float:
        with clock_lock:
            return frozen[0] if frozen else NOW + (time.monotonic() - start_real) * RACE_SPEED

    expected: Counter[tuple[str, int]] = Counter()  # (label s, second) -> count
    lock = threading.Lock()
    done = threading.Event()
    failures: list[str] = []
    removed, passes, checks = [0], Counter[str](), [0]

    def writer(k: int) -> None:
        with Store(race) as store:
            recorder = Recorder(store, flush_interval=2 / RACE_SPEED, clock=clock)
            n = 0
            while True:
                stopping = done.is_set()
                now = clock()
                live = str((int(now // 4) * 7 + n % 5) % 60)  # 5 of 60, new ones every 4 s
                recorder.add("race", 1, {"s": live}, now=now)
                with lock:
                    expected[(live, int(now))] += 1
                if stopping:
                    break
                n += 1
                time.sleep(0.001)
            if not recorder.close(timeout=30):
                failures.append(f"writer {k} could not flush")

    def cleaner_loop(owner: str) -> None:
        with Store(race) as store:
            cleaner = Cleaner(store, interval=2, clock=clock, owner=owner, sweep_period=8)
            while not done.is_set():
                stats = cleaner.run_once()
                if stats is not None:
                    with lock:
                        removed[0] += stats.removed
                        passes[owner] += 1

    def watcher() -> None:
        clients = [redis.Redis(port=n.port, decode_responses=True) for n in cluster.masters()]
        checks_now = [client.register_script(CHECK_NOW) for client in clients]
        while not done.is_set():
            for check in checks_now:
                if found := check():
                    failures.append(f"at {clock() - NOW:.0f} s: {found[:5]}")
            checks[0] += 1
            time.sleep(0.005)
        for client in clients:
            client.close()

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    threads += [threading.Thread(target=cleaner_loop, args=(f"c{k}",)) for k in range(3)]
    threads.append(threading.Thread(target=watcher))
    for thread in threads:
        thread.start()
    time.sleep(6)
    with clock_lock:
        frozen.append(NOW + (time.monotonic() - start_real) * RACE_SPEED)
    done.set()
    for thread in threads:
        thread.join(timeout=120)
    end = frozen[0]
    print(f"hashes forgotten {removed[0]}, passes {dict(passes)}, checks {checks[0]}")
    assert failures == []
    assert removed[0] > 50 and checks[0] > 20, (removed, checks)  # it raced, and was watched
    assert len(passes) >= 2, passes  # more than one cleaner did passes
    with Store(race) as store:
        # a sweep at the end (interval 1: a pass number of its own, no lease of the race's)
        record_sweeps(store, int(end) - 10**6)
        last = Cleaner(store, interval=1, clock=lambda: end, owner="last")
        assert last.run_once(every_precision=True) is not None
        hashes, members = layout(cluster)
        assert hashes == members
        values = {s for s, _ in expected}
        assert len({store.keys.shard(encode("race", {"s": s})) for s in values}) > 30
        for precision in race.precisions:
            floor = oldest_kept(precision, 5, end)
            want: Counter[tuple[str, int]] = Counter()
            for (series, second), n in expected.items():
                if slice_start(second, precision) >= floor:
                    want[(series, slice_start(second, precision))] += n
            got: Counter[tuple[str, int]] = Counter()
            for s in values:
                for start, n in store.get("race", precision, {"s": s}):
                    assert start >= floor, (s, precision, start)  # retention exact
                    got[(s, start)] += n
            assert got == want, precision
            assert want, precision
