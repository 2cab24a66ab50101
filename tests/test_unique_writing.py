"""Unique values written by the store and the Recorder: the keys, their expiry, the exact SET's
cap, first-seen counting, bad values, an outage and forked writers. Read back with raw commands
(the read operations have their own tests)."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from slicecount.config import Settings
from slicecount.embedded import EmbeddedRedis
from slicecount.operations.unique_writing import SKETCH_MIN_VALUES
from slicecount.recording.losses import DROPPED_METRIC, REJECTED_METRIC
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from tests.test_recorder import rejected

pytestmark = pytest.mark.topologies


def hll_count(store: Store, client: Any, series_id: str, precision: int, start: int) -> int:
    slot = store.keys.unique_layout(series_id, (precision,)).slots[0]
    return int(client.pfcount(slot.hll(start)))


def now_and_start(precision: int) -> tuple[int, int]:
    now = int(time.time())
    return now, now - now % precision


def test_store_writes_one_hll_per_precision_expiring_with_retention(
    store: Store, redis_client: Any
) -> None:
    now = int(time.time())
    written = store.add_unique("visitors", [f"u{i}" for i in range(500)], {"route": "/"}, now=now)
    assert written.over_cap == []
    series_id = 'visitors{route="/"}'
    for precision in store.settings.unique_precisions:
        start = now - now % precision
        slot = store.keys.unique_layout(series_id, (precision,)).slots[0]
        assert abs(redis_client.pfcount(slot.hll(start)) - 500) <= 10
        kept = store.settings.unique_retention_for(precision)
        assert kept == min(store.settings.retention_for(precision), 120)  # HLLs: the book's
        expire_at = start + precision * kept
        assert abs(redis_client.ttl(slot.hll(start)) - (expire_at - time.time())) <= 2
        registry = store.keys.unique_layout(series_id, (precision,)).registry
        assert redis_client.zscore(registry, slot.member) == expire_at
        assert not redis_client.exists(slot.members(start))  # not exact: no SET
    finer = [p for p in store.settings.precisions if p not in store.settings.unique_precisions]
    assert finer == [1, 5]
    for precision in finer:
        slot = store.keys.unique_layout(series_id, (precision,)).slots[0]
        assert not redis_client.exists(slot.hll(now - now % precision))


def test_exact_mode_lists_up_to_the_cap_then_says_so(settings: Settings, redis_client: Any) -> None:
    with Store(settings.with_changes(unique_exact_cap=10)) as store:
        now, start = now_and_start(60)
        assert store.add_unique("keys", ["a", "b", "c"], exact=True, now=now).over_cap == []
        slot = store.keys.unique_layout("keys", (60,)).slots[0]
        assert redis_client.smembers(slot.members(start)) == {"a", "b", "c"}
        # adding the same values again changes nothing (a resent batch is harmless)
        assert store.add_unique("keys", ["a", "b"], exact=True, now=now).over_cap == []
        assert redis_client.scard(slot.members(start)) == 3
        written = store.add_unique("keys", [f"k{i}" for i in range(20)], exact=True, now=now)
        assert written.over_cap == [f"{p}:keys" for p in store.settings.unique_precisions]
        assert redis_client.scard(slot.members(start)) == 11  # cap + 1: "over the cap"
        assert redis_client.pfcount(slot.hll(start)) == 23  # the HLL has every value
        assert redis_client.ttl(slot.members(start)) > 0


def test_first_seen_counts_each_value_once_per_slice_into_a_counter(settings: Settings) -> None:
    with Store(settings.with_changes(unique_exact_cap=100)) as store:
        now, start = now_and_start(60)
        store.add_unique("logins", ["ann", "bob"], exact=True, first_seen=True, now=now)
        store.add_unique("logins", ["ann", "bob", "cy"], exact=True, first_seen=True, now=now)
        assert store.get("logins", 60) == [(start, 3)]
        assert store.series("logins", 60) == ["logins"]  # an ordinary counter: registered
        # without exact mode the count is the HLL's (exact at this size)
        store.add_unique("signins", ["ann", "bob", "ann"], first_seen=True, now=now)
        assert store.get("signins", 60) == [(start, 2)]


def test_bad_values_are_refused_naming_them(store: Store) -> None:
    with pytest.raises(ValueError, match="must be a string, got 42"):
        store.add_unique("v", [42])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="1025 characters"):
        store.add_unique("v", ["x" * 1025])
    with pytest.raises(ValueError, match="not UTF-8"):
        store.add_unique("v", ["\ud800"])
    with pytest.raises(ValueError, match="collection of strings"):
        store.add_unique("v", "abc")
    with pytest.raises(ValueError, match="metric name"):
        store.add_unique("bad name", ["a"])


def test_recorder_buffers_distinct_values_and_counts_them_per_slice(
    store: Store, redis_client: Any
) -> None:
    recorder = Recorder(store, flush_interval=60)
    now, start = now_and_start(60)
    for i in range(30_000):
        recorder.add_unique("users", f"user-{i % 10_000}", {"plan": "pro"}, now=now)
        recorder.add_unique("keys", f"key-{i % 50}", exact=True, now=now)
    assert recorder.pending == 0 and recorder.has_unwritten()
    assert recorder.flush()
    assert not recorder.has_unwritten()
    got = hll_count(store, redis_client, 'users{plan="pro"}', 60, start)
    assert abs(got - 10_000) <= 200  # within 2 % (the HLL's standard error is 0.81 %)
    slot = store.keys.unique_layout("keys", (60,)).slots[0]
    assert redis_client.smembers(slot.members(start)) == {f"key-{i}" for i in range(50)}
    recorder.close()


def test_recorder_refuses_bad_values_and_counts_them(store: Store) -> None:
    recorder = Recorder(store, flush_interval=60)
    recorder.add_unique("v", 42)  # type: ignore[arg-type]
    recorder.add_unique("v", None)  # type: ignore[arg-type]
    recorder.add_unique("v", "x" * 2000)
    recorder.add_unique("v", "\udc80")
    recorder.add_unique("bad name", "a")
    recorder.add_unique("v", "a", now=time.time() + 3600)
    recorder.add_unique("v", "fine")
    recorder.close()
    assert rejected(store) == {
        "not_a_value": 2,
        "too_long": 1,
        "not_utf8": 1,
        "invalid_name": 1,
        "time_range": 1,
    }


@pytest.mark.topologies("standalone")
def test_an_outage_buffers_a_bounded_number_of_values_and_counts_the_rest(
    private_redis: EmbeddedRedis,
) -> None:
    settings = Settings(redis_url=private_redis.url, socket_timeout=0.5)
    store = Store(settings)
    recorder = Recorder(store, flush_interval=60, max_pending=1000)
    now, start = now_and_start(60)
    private_redis.stop()
    for i in range(400):
        recorder.add_unique("seen", f"old-{i}", now=now - 120)
    assert not recorder.flush()  # Redis away: put back
    for i in range(800):
        recorder.add_unique("seen", f"new-{i}", now=now)
    assert recorder.dropped == 200  # the excess, from the oldest second
    private_redis.start()
    assert recorder.flush()
    assert recorder.flush()  # the loss is written with the next flush
    assert abs(hll_count(store, store.client, "seen", 60, start) - 800) <= 16
    old_start = now - 120 - (now - 120) % 60
    assert abs(hll_count(store, store.client, "seen", 60, old_start) - 200) <= 4
    assert sum(n for _, n in store.get(DROPPED_METRIC, 86400)) == 200
    assert not store.series(REJECTED_METRIC, 86400)
    recorder.close()
    store.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # 3.12+ warns on fork with threads
def test_forked_writers_make_a_union_not_a_sum(store: Store) -> None:
    now = int(time.time())
    children = []
    for k in range(4):
        pid = os.fork()
        if pid == 0:  # each child its own Recorder; values overlap between children
            code = 1
            try:
                with Store(store.settings) as own:
                    recorder = Recorder(own, flush_interval=0.05)
                    for i in range(5000):
                        recorder.add_unique("clients", f"c{k * 2500 + i}", now=now)
                    code = 0 if recorder.close() else 1
            finally:
                os._exit(code)
        children.append(pid)
    for pid in children:
        assert os.waitpid(pid, 0)[1] == 0
    truth = 3 * 2500 + 5000  # c0 .. c12499: the children's sets overlap by half
    for precision in store.settings.unique_precisions:
        ((at, got),) = store.get_unique("clients", precision)
        assert at == now - now % precision
        assert abs(got - truth) <= truth * 0.02, precision  # a union: the sum is 20 000


@pytest.mark.slow  # it waits for the keys to expire
@pytest.mark.topologies("standalone")
def test_after_retention_nothing_of_a_series_is_left(redis_url: str, redis_client: Any) -> None:
    settings = Settings(
        redis_url=redis_url, precisions=(1, 2, 3), unique_precisions=(1, 2, 3), retention=1
    )
    with Store(settings) as store:
        now = int(time.time())
        store.add_unique("brief", ["a", "b"], exact=True, first_seen=False, now=now)
        assert redis_client.keys("unique:*") and redis_client.keys("members:*")
        time.sleep(3 * 2 + 1.2)  # the coarsest slice ends, then its retention passes
        assert redis_client.keys("unique:*") == [] and redis_client.keys("members:*") == []
        store.add_unique("other", ["x"])  # a later write drops the stale registry members
        left = redis_client.zrange("uniques:", 0, -1)  # by score: when each expires
        assert sorted(left) == [f"{p}:other" for p in (1, 2, 3)]


def test_first_seen_also_counts_into_the_finer_slices_at_the_second_values_came(
    store: Store,
) -> None:
    now = int(time.time()) - 5
    if now % 60 < 2:  # the three seconds below must lie in one minute, before now
        now -= now % 60 + 1
    start = now - now % 60
    recorder = Recorder(store, flush_interval=3600)
    for value, at in [("ann", start), ("bob", start + 1), ("ann", start + 2), ("cy", start + 2)]:
        recorder.add_unique("buyers", value, first_seen=True, now=min(at, now))
    assert recorder.flush()
    seconds = sorted({min(at, now) for at in (start, start + 1, start + 2)})
    by_second = dict(store.get("buyers", 1))
    assert sum(by_second.values()) == 3  # ann, bob, cy: each once in its minute
    assert by_second[seconds[0]] == 1
    assert store.get("buyers", 60) == [(start, 3)]
    assert sum(n for _, n in store.get("buyers", 5)) == 3
    # sent again (a lost reply): nothing counts twice
    store.add_unique("buyers", ["ann", "bob", "cy"], first_seen=True, now=now)
    assert sum(n for _, n in store.get("buyers", 1)) == 3
    assert store.get("buyers", 60) == [(start, 3)]


def test_a_value_past_the_retention_of_every_unique_precision_is_refused_and_counted(
    store: Store,
) -> None:
    recorder = Recorder(store, flush_interval=3600)
    coarsest = max(store.settings.unique_precisions)
    long_ago = time.time() - coarsest * store.settings.unique_retention_for(coarsest) - coarsest
    recorder.add_unique("late", "v", now=long_ago)
    recorder.add_unique("late", "w", now=time.time() - 7200)  # still kept at coarse precisions
    recorder.close()
    assert rejected(store) == {"time_range": 1}
    assert [p for p in store.settings.unique_precisions if store.get_unique("late", p)] == [
        p
        for p in store.settings.unique_precisions
        if p * store.settings.unique_retention_for(p) > 7200
    ]


def test_a_big_slice_is_sent_as_a_sketch_with_the_registers_pfadd_would_set(
    store: Store, redis_client: Any
) -> None:
    now, start = now_and_start(60)
    values = [f"client-{i}" for i in range(SKETCH_MIN_VALUES + 500)]
    recorder = Recorder(store, flush_interval=3600)
    for value in values:
        recorder.add_unique("busy", value, now=now)
    assert recorder.flush()
    store.add_unique("busy", [*values[:10], "one more"], now=now)  # later, a small PFADD
    # the same values PFADDed into a key of the same slot: the same registers, the same count
    slot = store.keys.unique_layout("busy", (60,)).slots[0]
    twin = store.keys.scratch(store.keys.shard("busy"), "twin")
    for i in range(0, len(values), 1000):
        redis_client.pfadd(twin, *values[i : i + 1000])
    redis_client.pfadd(twin, "one more")
    for precision in store.settings.unique_precisions:
        key = store.keys.unique_layout("busy", (precision,)).slots[0].hll(now - now % precision)
        assert redis_client.pfcount(key) == redis_client.pfcount(twin), precision
        assert redis_client.ttl(key) > 0
    assert redis_client.pfcount(slot.hll(start)) > 3000
    redis_client.delete(twin)
    assert not [k for k in redis_client.keys("*scratch*")]  # every scratch key deleted
    recorder.close()
