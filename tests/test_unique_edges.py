"""Edges of the unique counts a review of issue 15 found (each test failed before its fix):
the buffer's bound, mixed modes, a wide members() range, retention, the registry after it,
first-seen counts on short ranges, one refused key."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from slicecount.cleaner.daemon import Cleaner
from slicecount.config import Settings
from slicecount.core.slices import oldest_kept
from slicecount.datasource.app import create_app
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from tests.test_unique_writing import hll_count

# -- 1. the Recorder's bound -----------------------------------------------------------------


def test_a_burst_past_the_bound_drops_only_the_excess_not_the_whole_second(store: Store) -> None:
    """The bound drops "the oldest second" whole: when every buffered value is in one second
    (the usual case: the current one), one value past the bound empties the buffer, the
    value just added included. The counts' buffer drops only the excess."""
    recorder = Recorder(store, flush_interval=60, max_pending=1000)
    now = int(time.time())
    for i in range(1001):
        recorder.add_unique("burst", f"v{i}", now=now)
    assert recorder.dropped <= 1  # one value past the bound
    recorder.close()


def test_a_burst_past_the_bound_is_flushed_not_dropped_while_redis_is_up(
    store: Store, redis_client: Any
) -> None:
    """Issue 15: "past the bound, flush early or fold into a local sketch". Neither is done:
    with Redis up and answering, values past max_pending between two flushes are dropped."""
    recorder = Recorder(store, flush_interval=60, max_pending=1000)
    now = int(time.time())
    for i in range(5000):
        recorder.add_unique("burst", f"v{i}", now=now)
        if i % 50 == 49:
            time.sleep(0.001)  # requests between the calls: other threads get to run
    assert recorder.close()
    assert recorder.dropped == 0
    assert abs(hll_count(store, redis_client, "burst", 60, now - now % 60) - 5000) <= 100


# -- 2. mixed modes in one slice ---------------------------------------------------------------


def test_a_slice_written_in_exact_and_plain_mode_counts_every_value(store: Store) -> None:
    """THE COUNT RULE trusts the SET whenever it holds 1..cap values; values written without
    exact=True reach the HLL only, so one exact write hides every plain one of the slice."""
    now = int(time.time())
    store.add_unique("mixed", ["a"], exact=True, now=now)
    store.add_unique("mixed", [f"p{i}" for i in range(50)], now=now)
    start = now - now % 60
    assert dict(store.get_unique("mixed", 60))[start] == 51  # got 1
    (listed,) = store.members("mixed", 60, None, start, start)
    assert not listed.complete  # said complete, with 1 value of 51


# -- 3. members() over a long range -------------------------------------------------------------


class _Slow(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Slow


@pytest.fixture
def two_seconds() -> Iterator[None]:
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(2)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_members_over_a_wide_range_answers_at_once(store: Store, two_seconds: None) -> None:
    """members() walks every slice from start to end in Python before keeping those in
    retention: a range in milliseconds by mistake (or 0 .. far future) never returns."""
    now = int(time.time())
    store.add_unique("keys", ["a"], exact=True, now=now)
    try:
        found = store.members("keys", 60, None, 0, now * 1000)
    except _Slow:
        pytest.fail("members(0, now in ms) was still walking slices after 2 s")
    assert [m.values for m in found] == [["a"]]


# -- 4. retention: one slice too many -----------------------------------------------------------


def test_a_unique_slice_lives_as_long_as_a_counter_slice(redis_url: str) -> None:
    """Counters keep the current slice and retention - 1 before it (slices.oldest_kept, the
    cleaner, the datasource); a unique slice expires at start + p x (retention + 1), so
    get_unique (and Redis) keep one slice more than get() and the dashboards."""
    settings = Settings(redis_url=redis_url, precisions=(1, 60), retention=3)
    with Store(settings) as store:
        now = time.time()
        first_kept = oldest_kept(60, 3, now)
        store.add_unique("r", ["x"], now=first_kept - 60)  # just past retention
        store.incr("r.count", now=first_kept - 60)
        assert store.get_unique("r", 60) == []


# -- 5. the registry after retention ------------------------------------------------------------


@pytest.mark.slow
def test_after_retention_the_registry_holds_nothing_of_the_series(
    redis_url: str, redis_client: Any
) -> None:
    """Acceptance 3: "after the retention at each precision nothing of a series is left". The
    HLLs expire by themselves; the cleaner's pass drops the registry member."""
    settings = Settings(redis_url=redis_url, precisions=(1,), unique_precisions=(1,), retention=1)
    with Store(settings) as store:
        store.add_unique("brief", ["a"])
        time.sleep(2.5)
        assert redis_client.keys("unique:*") == []
        stats = Cleaner(store).run_once(every_precision=True)
        assert stats is not None and stats.uniques == 1
        assert redis_client.zrange("uniques:", 0, -1) == []


# -- 6. first_seen counters at the finer precisions ---------------------------------------------


def test_a_first_seen_counter_reads_on_a_short_dashboard_range(redis_url: str) -> None:
    """README: a first_seen counter is read by "everything that reads counters (get, the
    dashboards, increase())". It is written at the unique precisions only (60 s and coarser),
    so a dashboard over the last minutes, answered from the 1 s or 5 s slices, shows 0."""
    with Store(Settings(redis_url=redis_url)) as store:
        now = time.time()
        store.add_unique("buyers", ["ann", "bob", "cy"], first_seen=True, now=now - 2)
        with TestClient(create_app(store.settings, clock=lambda: now)) as client:
            body = client.post(
                "/api/v1/query", data={"query": "increase(buyers_total[1m])", "time": str(now)}
            ).json()
    assert body["data"]["result"], body["infos"]  # [] ("answered from ... precision 1 s")
    (line,) = body["data"]["result"]
    assert float(line["value"][1]) == 3


# -- 7. one foreign key refuses a whole flush ---------------------------------------------------


@pytest.mark.parametrize("topology", ["standalone"])
def test_one_bad_key_refuses_only_its_own_values(store: Store, redis_client: Any) -> None:
    """A permanent refusal of one command (here WRONGTYPE: a foreign string where a slice's
    HLL goes) makes UniqueValues.flush refuse every value taken, counted as rejected{redis},
    though Redis ran every other command of the batch (not a transaction): 1 000 values of
    another series written and counted as lost."""
    now = int(time.time())
    start = now - now % 60
    redis_client.set(store.keys.unique_layout("bad", (60,)).slots[0].hll(start), "not an hll")
    recorder = Recorder(store, flush_interval=60)
    recorder.add_unique("bad", "x", now=now)
    for i in range(1000):
        recorder.add_unique("good", f"g{i}", now=now)
    recorder.close()
    assert abs(hll_count(store, redis_client, "good", 60, start) - 1000) <= 20  # written...
    assert sum(n for _, n in store.get("slicecount.rejected", 86400, {"reason": "redis"})) <= 5
