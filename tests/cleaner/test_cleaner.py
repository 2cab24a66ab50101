"""The cleaner against a real Redis: retention, schedule, races, bad data, shutdown."""

from __future__ import annotations

import itertools
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
import redis

from slicecount.cleaner import Cleaner
from slicecount.config import Settings
from slicecount.core.slices import oldest_kept, slice_start
from slicecount.embedded import EmbeddedRedis
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from tests.cleaner import record_sweeps

pytestmark = pytest.mark.layouts("book")  # the book's trims and sweeps (blocks: test_compaction)

NOW = 1_700_006_400  # a multiple of 86400


def registry(client: redis.Redis, prefix: str = "") -> set[str]:
    return {str(member) for member in client.zrange(f"{prefix}known:", 0, -1)}


def orphans(client: redis.Redis, prefix: str = "") -> list[str]:
    """Hashes with data whose registry member is missing (what must never happen)."""
    known = registry(client, prefix)
    return [
        key for key in client.scan_iter(f"{prefix}count:*", count=1000)
        if key[len(prefix) + len("count:"):] not in known
    ]  # fmt: skip


def test_a_pass_keeps_only_slices_inside_retention(store: Store, redis_client: redis.Redis) -> None:
    # 300 s of history for "busy", a single old event for "stale"
    store.apply({"busy": {NOW - s: 1 for s in range(300)}, "stale": {NOW - 200_000: 1}})
    stats = Cleaner(store, clock=lambda: NOW).run_once(every_precision=True)
    assert stats is not None and not stats.interrupted
    for precision in store.settings.precisions:
        kept = [start for start, _ in store.get("busy", precision)]
        floor = oldest_kept(precision, 120, NOW)
        assert kept and min(kept) >= floor and len(kept) <= 120, precision
        assert max(kept) == slice_start(NOW, precision)
    assert len(store.get("busy", 1)) == 120
    assert len(store.get("busy", 5)) == 61  # all 300 s (61 slices of 5 s) fit in retention
    # "stale" (2.3 days old) survives only where retention reaches back that far (3600 s
    # slices keep 5 days), and its emptied hashes leave the registry with their data
    for precision in (1, 5, 60, 300):
        assert store.get("stale", precision) == []
        assert not redis_client.exists(f"count:{precision}:stale")
        assert f"{precision}:stale" not in registry(redis_client)
    for precision in (3600, 18000, 86400):
        assert store.get("stale", precision) == [(slice_start(NOW - 200_000, precision), 1)]
    assert orphans(redis_client) == []
    assert stats.removed == 4 and stats.deleted > 0


def test_retention_per_precision_and_future_slices_never_push_out_real_ones(
    settings: Settings, redis_client: redis.Redis
) -> None:
    changed = settings.with_changes(precisions=(1, 60), retention="1=10,60=3", max_future=20)
    with Store(changed, clock=lambda: NOW) as store:
        # slices a little ahead (clock skew, up to max_future) stay beside the last 10 s
        store.apply({"x": {NOW + s: 1 for s in range(-30, 20)}})
        # a writer without bounds left slices far ahead: they go, and take nothing with them
        redis_client.hset("count:1:x", mapping={str(NOW + 3600): 1, str(NOW + 10**6): 1})
        Cleaner(store, clock=lambda: NOW).run_once(every_precision=True)
        assert [s for s, _ in store.get("x", 1)] == list(range(NOW - 9, NOW + 20))
        assert [s for s, _ in store.get("x", 60)] == [NOW - 60, NOW]


@pytest.mark.slow
def test_the_schedule_with_an_injected_clock(store: Store) -> None:
    store.apply({"s": {NOW - k: 1 for k in range(0, 200_000, 7)}})
    record_sweeps(store, NOW)  # the schedule alone: no sweep due in these 12 passes
    clock = [float(NOW)]
    cleaner = Cleaner(store, interval=60, clock=lambda: clock[0], sweep_period=10**9)
    trimmed: list[list[int]] = []
    for _ in range(12):
        clock[0] += 60
        stats = cleaner.run_once()
        assert stats is not None
        trimmed.append(stats.precisions)
        store.apply({"s": {int(clock[0]) - 1: 1}})
    for index, precisions in enumerate(trimmed):
        assert {1, 5, 60} <= set(precisions), index
    fifth = [i for i, p in enumerate(trimmed) if 300 in p]
    first_index = (NOW + 60) // 60
    assert len(fifth) >= 2 and all((first_index + i) % 5 == 0 for i in fifth)
    assert [b - a for a, b in itertools.pairwise(fifth)] == [5] * (len(fifth) - 1)
    assert all(3600 not in p or (first_index + i) % 60 == 0 for i, p in enumerate(trimmed))


def test_steady_passes_delete_only_what_expired(store: Store, redis_client: redis.Redis) -> None:
    store.apply({f"m{i}": {NOW - k: 1 for k in range(200)} for i in range(20)})
    record_sweeps(store, NOW)  # a cleaner back after a gap, its last sweep recent
    cleaner = Cleaner(store, clock=lambda: NOW + 1)
    first = cleaner.run_once(every_precision=True)
    # cold, by name, no listing: each 1 s hash is 200 slices long, so the 80 before the cutoff
    # go, then the run goes on (the current slice is not written yet: 81 had expired); the
    # other precisions are within retention (one name probed each, not there)
    assert first is not None and (first.full, first.deleted) == (0, 20 * 81)
    cleaner.clock = lambda: NOW + 61
    second = cleaner.run_once()
    assert second is not None and second.full == 0 and second.precisions == [1, 5, 60]
    # 1 s slices: the 60 that expired in 60 s, deleted by name; 200 s of 5 s and 60 s slices
    # are all still inside their retention
    assert second.deleted == 20 * 60
    for i in range(20):
        assert [s for s, _ in store.get(f"m{i}", 1)] == list(range(NOW - 58, NOW + 1))


def test_late_writes_are_caught_by_the_length_check_and_the_sweep(store: Store) -> None:
    store.apply({"late": {NOW - k: 1 for k in range(100)}})
    record_sweeps(store, NOW)
    cleaner = Cleaner(store, clock=lambda: NOW)
    cleaner.run_once(every_precision=True)
    store.apply({"late": {NOW - 5000 - k: 1 for k in range(200)}})  # an old backfill
    cleaner.clock = lambda: NOW + 60
    cleaner.run_once()
    assert min(s for s, _ in store.get("late", 1)) >= oldest_kept(1, 120, NOW + 60)


def test_a_cold_pass_names_the_run_before_the_cutoff_and_leaves_stragglers_to_the_sweep(
    settings: Settings, redis_client: redis.Redis
) -> None:
    with Store(settings.with_changes(precisions=(1,))) as store:
        store.apply({
            "busy": {NOW - k: 1 for k in range(200)},  # 80 slices past retention
            "lagging": {NOW - k: 1 for k in range(2, 131)},  # newest 2 not written: 11 expired
            "gapped": {**{NOW - k: 1 for k in range(125)}, NOW - 200: 1},  # 5 + 1 straggler
            "sparse": {NOW - 500: 1, NOW - 300: 1, NOW - 10: 1},
            "ahead": {NOW - k: 1 for k in range(51)},
            "expired": {NOW - 120: 1},
            "ended": {NOW - k: 1 for k in range(120, 290)},  # a run longer than retention
        })  # fmt: skip
        redis_client.hset("count:1:ahead", str(NOW + 3600), 1)  # past the horizon (NOW + 300)
        record_sweeps(store, NOW)  # just swept: the next sweep is due at NOW + 20
        cleaner = Cleaner(store, interval=1, clock=lambda: NOW, sweep_period=20)
        cold = cleaner.run_once()
        assert cold is not None and cold.precisions == [1]

        def kept(name: str) -> list[int]:
            return [start for start, _ in store.get(name, 1)]

        within = list(range(NOW - 119, NOW + 1))
        assert kept("busy") == within and kept("lagging") == within[:-2]
        # a hash still longer than retention once its run is gone is listed: exact
        assert kept("gapped") == within
        # a short hash keeps what is not next to the cutoff: old slices, a far-future one
        assert kept("sparse") == [NOW - 500, NOW - 300, NOW - 10]
        assert kept("ahead") == [*range(NOW - 50, NOW + 1), NOW + 3600]
        # emptied: by name, or listed once its run outran the window (retention)
        assert store.series("expired", 1) == store.series("ended", 1) == []
        assert (cold.removed, cold.full) == (2, 2)
        assert (cold.deleted, cold.hashes) == (80 + 11 + 5 + 1 + 1 + 170, 7)
        cleaner.clock = lambda: NOW + 10
        steady = cleaner.run_once()  # incremental: only what expired in these 10 s, by name
        assert steady is not None and (steady.full, steady.deleted) == (0, 3 * 10)
        assert kept("sparse") == [NOW - 500, NOW - 300, NOW - 10]
        assert kept("ahead")[-1] == NOW + 3600
        cleaner.clock = lambda: NOW + 20  # a sweep period since the last sweep
        sweep = cleaner.run_once()  # lists every hash: the stragglers go
        assert sweep is not None and sweep.full == sweep.hashes > 5
        assert kept("sparse") == [NOW - 10]
        assert kept("ahead") == list(range(NOW - 50, NOW + 1))
        assert kept("busy") == kept("gapped") == list(range(NOW - 99, NOW + 1))
        assert orphans(redis_client) == []


def test_a_lease_elects_one_cleaner_per_pass(settings: Settings) -> None:
    with Store(settings) as a, Store(settings) as b:
        first = Cleaner(a, clock=lambda: NOW, owner="a").run_once()
        second = Cleaner(b, clock=lambda: NOW, owner="b").run_once()
        assert first is not None and second is None
        assert Cleaner(b, clock=lambda: NOW + 60, owner="b").run_once() is not None


def test_bad_data_is_skipped_and_logged(
    store: Store, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    store.apply({"good": {NOW - 1000: 1, NOW: 1}, "odd": {NOW - 1000: 1}})
    redis_client.hset("count:1:odd", "not-a-slice", "x")
    redis_client.zadd("known:", {"1:wrongtype": 0})
    redis_client.set("count:1:wrongtype", "a string")
    cleaner = Cleaner(store, clock=lambda: NOW)
    with caplog.at_level(logging.WARNING, logger="slicecount.cleaner"):
        stats = cleaner.run_once(every_precision=True)
    assert stats is not None and stats.bad == 2
    assert "count:1:wrongtype is a string" in caplog.text
    assert "count:1:odd field not-a-slice" in caplog.text
    assert redis_client.hgetall("count:1:odd") == {"not-a-slice": "x"}  # left alone
    assert store.get("good", 1) == [(NOW, 1)]
    assert redis_client.get("count:1:wrongtype") == "a string"
    cleaner.clock = lambda: NOW + 60
    assert cleaner.run_once() is not None  # and the next pass runs as usual


def test_annotations_are_trimmed_and_figures_recorded(store: Store) -> None:
    store.annotate("old", when=NOW - 200 * 86400)
    store.annotate("recent", when=NOW - 60)
    stats = Cleaner(store, clock=lambda: NOW).run_once()
    assert stats is not None and stats.annotations == 1
    assert [a["text"] for a in store.annotations(0, NOW)] == ["recent"]
    assert store.get("slicecount.cleaner.passes", 60) == [(slice_start(NOW, 60), 1)]
    assert sum(n for _, n in store.get("slicecount.cleaner.hashes_scanned", 60)) == stats.hashes


# Checked inside Redis, so it sees one consistent instant: every hash holding data must have
# its registry member at every moment, not only at the end (a lost member heals at the next
# write of its series, so an end-only check would miss most of them).
ORPHANS_NOW = """
local found = {}
for _, key in ipairs(redis.call('KEYS', 'count:*')) do
  if not redis.call('ZSCORE', 'known:', string.sub(key, 7)) then found[#found + 1] = key end
end
return found
"""
RACE_SPEED = 600.0
"""Simulated seconds per wall second: 3 s of wall time are 30 minutes of traffic."""


@pytest.mark.slow
def test_writers_and_three_cleaners_race_without_losing_a_slice(
    settings: Settings, redis_client: redis.Redis
) -> None:
    """Three writers flushing every 6 simulated seconds over drifting series and three
    cleaners passing every 5, on a clock running 600x: no hash is ever orphaned, and every
    slice inside retention at the end equals what was written. With 1 s slices kept for 5 s,
    the hashes of live series empty and refill between flushes, so the cleaner's "empty ->
    forget" step meets the writers' ZADD NX + HINCRBY thousands of times."""
    race = settings.with_changes(precisions=(1, 5, 60), retention=5)
    seconds, start_real = 3.0, time.monotonic()
    clock_lock = threading.Lock()
    frozen: list[float] = []  # the instant the race stopped; the clock stands still after

    def clock() -> float:
        with clock_lock:
            return frozen[0] if frozen else NOW + (time.monotonic() - start_real) * RACE_SPEED

    expected: Counter[tuple[str, int]] = Counter()  # (series, second) -> count
    lock = threading.Lock()
    done = threading.Event()
    failures: list[str] = []
    removed, checks = [0], [0]

    def writer(k: int) -> None:
        with Store(race) as store:
            recorder = Recorder(store, flush_interval=6 / RACE_SPEED, clock=clock)
            while True:
                stopping = done.is_set()  # then one last event at the stopped clock's instant
                now = clock()
                series = f"race{k}.{int(now // 30) % 7}"  # the set of live series drifts
                recorder.add(series, 1, now=now)
                with lock:
                    expected[(series, int(now))] += 1
                if stopping:
                    break
                time.sleep(0.001)
            if not recorder.close(timeout=10):
                failures.append(f"writer {k} could not flush")

    def cleaner_loop(owner: str) -> None:
        with Store(race) as store:
            cleaner = Cleaner(store, interval=5, clock=clock, owner=owner, sweep_period=15)
            while not done.is_set():
                stats = cleaner.run_once()
                with lock:
                    removed[0] += stats.removed if stats else 0
                time.sleep(0.002)

    def watcher() -> None:
        check = redis_client.register_script(ORPHANS_NOW)
        while not done.is_set():
            if found := check():
                failures.append(f"orphaned at {clock() - NOW:.0f} s: {found}")
            checks[0] += 1
            time.sleep(0.002)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    threads += [threading.Thread(target=cleaner_loop, args=(f"c{k}",)) for k in range(3)]
    threads.append(threading.Thread(target=watcher))
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    with clock_lock:
        frozen.append(NOW + (time.monotonic() - start_real) * RACE_SPEED)
    done.set()
    for thread in threads:
        thread.join(timeout=60)
    end = frozen[0]
    assert failures == []
    assert orphans(redis_client) == []
    assert removed[0] > 100 and checks[0] > 100  # the race did happen, and was watched
    with Store(race) as store:
        for precision in race.precisions:
            floor = oldest_kept(precision, 5, end)
            want: Counter[tuple[str, int]] = Counter()
            for (series, second), n in expected.items():
                if slice_start(second, precision) >= floor:
                    want[(series, slice_start(second, precision))] += n
            got: Counter[tuple[str, int]] = Counter()
            for name in {series for series, _ in expected}:
                for start, n in store.get(name, precision):
                    if start >= floor:
                        got[(name, start)] += n
            assert got == want, precision
            assert want, precision  # each precision has slices to compare


HASHES = 12_000


@pytest.fixture
def big_redis() -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis() as server:
        yield server


@pytest.mark.slow
def test_sigterm_mid_pass_exits_cleanly_and_leaves_redis_consistent(
    big_redis: EmbeddedRedis,
) -> None:
    client = redis.Redis.from_url(big_redis.url, decode_responses=True, socket_timeout=120)
    populate = """
    local fields = {}
    for k = 0, 149 do
      fields[#fields + 1] = string.format('%d', ARGV[2] - k)
      fields[#fields + 1] = '1'
    end
    for i = 0, tonumber(ARGV[1]) - 1 do
      redis.call('HSET', 'count:1:s' .. i, unpack(fields))
      redis.call('ZADD', 'known:', 0, '1:s' .. i)
    end"""
    client.eval(populate, 0, HASHES, NOW)  # test set-up only: fast, in one call
    process = subprocess.Popen(
        [sys.executable, "-m", "slicecount.cleaner", "--redis-url", big_redis.url, "--once",
         "--layout", "book", "--now", str(NOW + 3600)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ},
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not client.keys("cleaner:lease:*"):  # the pass has begun
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.01)
    time.sleep(0.2)
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0
    assert time.monotonic() - sent < 2.0
    assert process.stdout is not None
    output = process.stdout.read().decode()
    process.stdout.close()
    assert "(interrupted)" in output, output
    assert orphans(client) == []
    remaining = client.zcard("known:")
    assert 0 < remaining < HASHES  # part of the work was done, and it stopped
    assert client.hlen(f"count:1:s{HASHES - 1}") in (0, 150)
    client.close()


def test_foreign_fields_of_slice_width_never_break_a_trim(
    store: Store, redis_client: redis.Redis
) -> None:
    store.apply({"w": {NOW - k: 1 for k in range(130)}})
    redis_client.hset("count:1:w", mapping={"zzzzzzzzzz": "1", "0000000abc": "1", "1.5": "1"})
    stats = Cleaner(store, clock=lambda: NOW).run_once(every_precision=True)
    assert stats is not None
    fields = set(redis_client.hkeys("count:1:w"))
    assert {"zzzzzzzzzz", "0000000abc", "1.5"} <= fields  # foreign fields are left alone
    assert len(fields) == 120 + 3
    assert stats.bad >= 2


def test_a_cleaner_whose_clock_runs_far_ahead_still_passes_and_says_why_its_figures_are_lost(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    ahead = time.time() + 10 * store.settings.max_future
    with caplog.at_level(logging.WARNING, logger="slicecount"):
        stats = Cleaner(store, clock=lambda: ahead).run_once()
    assert stats is not None
    assert "could not record the pass figures" in caplog.text
    assert "is outside 2000-01-01 .. now + 300 s" in caplog.text  # the refused time, named
