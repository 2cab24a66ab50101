"""Bad input costs nothing: refused at add(), counted with its reason, never raised, and the
good counts of the same flushes all arrive (real redis-server)."""

from __future__ import annotations

import logging
import threading
import time

import pytest
import redis

from slicecount.config import Settings
from slicecount.core.series import MAX_SERIES_ID_LENGTH, parse
from slicecount.recording import default
from slicecount.recording.losses import REJECTED_METRIC
from slicecount.recording.recorder import Recorder
from slicecount.store import Store

NOW = 1_700_000_000.5


def rejected(store: Store) -> dict[str, int]:
    out: dict[str, int] = {}
    for series_id in store.series(REJECTED_METRIC, 86400):
        _, labels = parse(series_id)
        out[labels["reason"]] = sum(n for _, n in store.get(REJECTED_METRIC, 86400, labels))
    return out


def test_every_kind_of_bad_event_is_refused_counted_and_costs_the_good_nothing(
    store: Store, redis_client: redis.Redis
) -> None:
    recorder = Recorder(store, flush_interval=3600, max_metrics=1000)
    good = 0
    bad: list[tuple[str, object, object, object]] = [
        ("lone surrogate", "hits", 1, {"user": "\ud800"}),
        ("huge count", "hits", 10**20, None),
        ("negative huge count", "hits", -(10**20), None),
        ("float count", "hits", 1.5, None),
        ("1 MB name", "x" * 1_000_000, 1, None),
        ("long series id", "hits", 1, {f"k{i}": "v" * 250 for i in range(20)}),
        ("non-str label key", "hits", 1, {1: "a"}),
    ]
    for _, name, n, labels in bad:
        recorder.add(name, n, labels)  # type: ignore[arg-type]
        recorder.add("hits", 1)
        good += 1
    recorder.add("hits", 1, now=1e30)  # far future: would outlive retention
    recorder.add("hits", 1, now=NOW + 10**9)
    recorder.add("hits", 1, now=900_000_000)  # 1998: before slicecount's epoch
    recorder.add_ids([(None, 1)])  # type: ignore[list-item]  # not an id at all
    for i in range(5000):  # names past max_metrics (1000, "hits" is one of them)
        recorder.add(f"generated.{i}", 1)
    recorder.add("hits", 2)
    good += 2
    assert recorder.close()

    assert sum(n for _, n in store.get("hits", 86400)) == good
    assert rejected(store) == {
        "not_utf8": 1, "count_range": 2, "not_a_count": 1, "too_long": 2, "invalid_label": 1,
        "time_range": 3, "not_an_id": 1, "too_many_metrics": 4001,
    }  # fmt: skip
    assert len(store.names(86400)) == 1000 + 1  # the 999 generated names admitted, hits, rejected
    # nothing oversized reached Redis
    longest = max(len(key) for key in redis_client.scan_iter(count=1000))
    assert longest < MAX_SERIES_ID_LENGTH + 100


def test_event_never_raises_on_bad_input(settings: Settings) -> None:
    default.configure(settings, flush_interval=3600)
    try:
        import slicecount

        slicecount.event("bad name")
        slicecount.event("ok", 10**20)
        slicecount.event("ok", 1, user="\udfff")
        slicecount.event("ok", 3)
        recorder = default.get_recorder()
        assert recorder.close()
        store = recorder.store
        assert sum(n for _, n in store.get("ok", 60)) == 3
        assert rejected(store) == {"invalid_name": 1, "count_range": 1, "not_utf8": 1}
    finally:
        default._recorder = None  # the next test's default comes from the environment again


def test_the_store_refuses_what_redis_could_not_hold(store: Store) -> None:
    for bad in (10**20, -(2**63) - 1, 1.0, True):
        with pytest.raises(ValueError, match="count"):
            store.incr("x", bad)  # type: ignore[arg-type]
    for when in (1e30, time.time() + 3600, 900_000_000):
        with pytest.raises(ValueError, match="outside"):
            store.incr("x", now=when)
    with pytest.raises(ValueError, match="longer"):
        store.incr("x" * 300)
    with pytest.raises(ValueError, match="Unicode"):
        store.incr("x", labels={"k": "\ud800"})
    store.incr("x", 2**63 - 1)  # the largest count Redis holds is fine
    assert store.get("x", 60)[0][1] == 2**63 - 1


def test_a_flush_that_meets_a_bad_entry_writes_all_the_others(store: Store) -> None:
    recorder = Recorder(store, flush_interval=3600)
    recorder.add("good", 2, now=NOW)
    # what add() can never let in, put there by hand: a flush must still not lose the rest
    recorder._counts._pending[int(NOW)]["broken"] = "not a count"  # type: ignore[assignment]
    assert recorder.close()
    assert sum(n for _, n in store.get("good", 60)) == 2
    assert rejected(store) == {"error": 1}


def test_ids_that_series_id_did_not_hand_out_are_refused(
    store: Store, redis_client: redis.Redis
) -> None:
    recorder = Recorder(store, flush_interval=3600)
    good = recorder.series_id("good", {"k": "v"})
    recorder.add_ids([("bad\ud800", 1)])  # would fail to encode at flush time
    recorder.add_ids([("", 5)])  # would register a member that names nothing
    recorder.add_ids([(good, 3)])
    assert recorder.close()
    assert sum(n for _, n in store.get("good", 60, {"k": "v"})) == 3
    assert rejected(store) == {"not_an_id": 6}
    redis_client.zadd("known:", {"60:": 0, "60": 0})  # written by something else: ignored
    assert "good" in store.names(60)


def test_a_log_handler_that_counts_cannot_deadlock_the_overflow_warning(store: Store) -> None:
    recorder = Recorder(store, flush_interval=3600, max_series_per_metric=1)

    class Counting(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            recorder.add("log.records", 1, {"level": record.levelname})

    handler = Counting()
    logging.getLogger("slicecount").addHandler(handler)
    try:
        done = threading.Event()

        def overflow() -> None:
            recorder.add("m", 1, {"k": "a"})
            recorder.add("m", 1, {"k": "b"})  # past the bound: warns while admitting
            done.set()

        threading.Thread(target=overflow, daemon=True).start()
        assert done.wait(5), "add() deadlocked"
    finally:
        logging.getLogger("slicecount").removeHandler(handler)
    assert recorder.close()
    assert sum(n for _, n in store.get("log.records", 60, {"level": "WARNING"})) >= 1
