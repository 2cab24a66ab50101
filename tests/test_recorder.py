from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest
import redis

from slicecount.config import Settings
from slicecount.core.series import parse
from slicecount.embedded import EmbeddedRedis
from slicecount.recording import lifecycle
from slicecount.recording.count_buffer import Counts
from slicecount.recording.losses import DROPPED_METRIC, REJECTED_METRIC
from slicecount.recording.recorder import Recorder
from slicecount.store import Store

T0 = 1_700_000_000


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def total(store: Store, name: str, labels: dict[str, str] | None = None) -> int:
    return sum(n for _, n in store.get(name, 86400, labels))


def rejected(store: Store) -> dict[str, int]:
    """``slicecount.rejected`` per reason."""
    out = {}
    for series_id in store.series(REJECTED_METRIC, 86400):
        _, labels = parse(series_id)
        out[labels["reason"]] = sum(n for _, n in store.get(REJECTED_METRIC, 86400, labels))
    return out


@pytest.mark.slow
@pytest.mark.topologies
def test_eight_threads_are_counted_exactly_at_every_precision(store: Store) -> None:
    threads, per_thread, span = 8, 50_000, 30
    recorder = Recorder(store, flush_interval=0.05)  # flushes race with the adds

    def work(k: int) -> None:
        for i in range(per_thread):
            # spread over 30 s of injected time, fractional seconds included
            recorder.add("load", 1, {"thread": k % 2}, now=T0 + (i * 7 + k) % span + (i % 10) / 10)

    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert recorder.flush()
    recorder.close()

    expected_seconds: Counter[int] = Counter()
    for k in range(threads):
        for i in range(per_thread):
            expected_seconds[T0 + (i * 7 + k) % span] += 1
    for precision in store.settings.precisions:
        expected: Counter[int] = Counter()
        for second, n in expected_seconds.items():
            expected[second - second % precision] += n
        got: Counter[int] = Counter()
        for labels in ({"thread": "0"}, {"thread": "1"}):
            got.update(dict(store.get("load", precision, labels)))
        assert sum(got.values()) == threads * per_thread, precision
        assert got == expected, precision


@pytest.mark.topologies
def test_background_flush_needs_no_explicit_call(store: Store) -> None:
    recorder = Recorder(store, flush_interval=0.05)
    recorder.add("bg", 3, now=T0)
    wait_for(lambda: store.get("bg", 60) == [(T0 - 20, 3)])
    assert recorder.pending == 0
    recorder.close()


@pytest.mark.topologies
def test_counts_follow_the_injected_clock(store: Store) -> None:
    now = [T0 + 0.5]
    recorder = Recorder(store, clock=lambda: now[0])
    recorder.add("c")
    now[0] = T0 + 61.2
    recorder.add("c", 2)
    recorder.close()
    assert store.get("c", 1) == [(T0, 1), (T0 + 61, 2)]


def test_outage_buffers_and_delivers_exactly(private_redis: EmbeddedRedis) -> None:
    settings = Settings(redis_url=private_redis.url, socket_timeout=1.0)
    store = Store(settings)
    recorder = Recorder(store, flush_interval=0.05, max_backoff=0.2)
    recorder.add("o", 1, now=T0)
    wait_for(lambda: recorder.pending == 0)

    private_redis.stop()
    slowest = 0.0
    for i in range(5000):
        started = time.perf_counter()
        recorder.add("o", 1, {"i": i % 5}, now=T0 + 1 + i % 10)
        slowest = max(slowest, time.perf_counter() - started)
    assert recorder.flush() is False  # Redis is down: the prepared batch waits, unchanged
    for _ in range(1000):
        recorder.add("o", 2, {"i": 0}, now=T0 + 1)
    # No add waited for the network: a connect attempt alone would be a socket timeout (1 s).
    assert slowest < 0.25
    # what a flush took waits in doubt, unchanged; the rest stays buffered (bounded)
    assert recorder.in_doubt >= 1 and recorder.pending <= 10

    private_redis.start()
    wait_for(lambda: recorder.pending == 0 and recorder.in_doubt == 0)
    recorder.close()
    assert sum(total(store, "o", {"i": str(i)}) for i in range(5)) == 5000 + 2000
    assert total(store, "o", {"i": "0"}) == 1000 + 2000
    assert store.get("o", 1, {"i": "3"}) == [(T0 + 4, 500), (T0 + 9, 500)]
    assert store.get(DROPPED_METRIC, 60) == []
    store.close()


def test_past_max_pending_the_oldest_are_dropped_and_reported(
    private_redis: EmbeddedRedis, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store(Settings(redis_url=private_redis.url, socket_timeout=1.0))
    recorder = Recorder(store, flush_interval=3600, max_pending=100)
    private_redis.stop()
    for second in range(150):
        recorder.add("b", second + 1, now=T0 + second)
    assert recorder.pending == 100
    with caplog.at_level(logging.WARNING, logger="slicecount"):
        assert recorder.flush() is False
    assert "cannot write to redis" in caplog.text
    # The failed batch waits as it was prepared (it may have been applied: it cannot be
    # dropped); new counts buffer beside it, bounded again by max_pending.
    assert recorder.in_doubt == 1 and recorder.pending == 0
    recorder.add("b", 1000, now=T0 + 150)
    assert recorder.pending == 1

    private_redis.start()
    assert recorder.flush()
    kept = dict(store.get("b", 1))
    assert sorted(kept) == [T0 + s for s in range(50, 151)]
    assert kept[T0 + 150] == 1000 and kept[T0 + 50] == 51
    dropped_events = sum(range(1, 51))  # the 50 oldest seconds carried 1 + 2 + ... + 50
    assert total(store, DROPPED_METRIC) == dropped_events == recorder.dropped
    recorder.close()
    store.close()


@pytest.mark.topologies
def test_cardinality_guard_folds_new_label_sets_into_overflow(
    store: Store, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder(store)
    with caplog.at_level(logging.WARNING, logger="slicecount"):
        for i in range(5000):
            recorder.add("user.hits", 1, {"user": f"u{i}"}, now=T0)
        for i in range(10):  # admitted label sets keep their own series
            recorder.add("user.hits", 1, {"user": f"u{i}"}, now=T0)
    recorder.close()
    series = store.series("user.hits", 60)
    assert len(series) == 1001
    assert total(store, "user.hits", {"overflow": "true"}) == 4000
    assert total(store, "user.hits", {"user": "u0"}) == 2
    members = len(store.settings.precisions) if store.settings.layout == "book" else 1
    assert sum(redis_client.zcard(known) for known in store.keys.registries()) == members * 1001
    assert caplog.text.count("reached 1000 label sets") == 1


@pytest.mark.topologies
def test_bad_events_never_raise_and_are_counted(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder(store)
    with caplog.at_level(logging.WARNING, logger="slicecount"):
        recorder.add("bad name")
        recorder.add("bad name")
        recorder.add("ok", 1, {"bad-label": "x"})
        recorder.add("ok", 1.5)  # type: ignore[arg-type]
        recorder.add("ok", 1, {"k": ["unhashable"]})  # type: ignore[dict-item]
        recorder.add("ok", 1, now=-3)
        recorder.add("ok", 4, now=T0)
    recorder.close()
    assert total(store, "ok") == 4
    assert rejected(store) == {
        "invalid_name": 2, "invalid_label": 1, "not_a_count": 1, "error": 1, "time_range": 1,
    }  # fmt: skip
    assert caplog.text.count("'bad name'") == 1
    assert "'bad-label'" in caplog.text


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # 3.12+ warns on fork with threads
@pytest.mark.topologies
def test_a_forked_child_flushes_only_its_own_counts(store: Store) -> None:
    recorder = Recorder(store, flush_interval=3600)
    recorder.add("forked", 10, now=T0)
    assert recorder.pending == 1
    pid = os.fork()
    if pid == 0:  # child: inherits the parent's unflushed buffer in memory, must not write it
        code = 1
        try:
            code = 0 if recorder.pending == 0 else 2
            recorder.add("forked", 5, now=T0)
            code = code or (0 if recorder.flush() else 3)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert total(store, "forked") == 5
    assert recorder.pending == 1
    recorder.close()
    assert total(store, "forked") == 15
    for precision in store.settings.precisions:
        assert sum(n for _, n in store.get("forked", precision)) == 15


@pytest.mark.slow
@pytest.mark.topologies
def test_buffer_is_flushed_at_interpreter_exit(store: Store, settings: Settings) -> None:
    # A process that records and exits without close(): atexit writes the buffer; a forked
    # child that records starts its own flusher lazily and flushes at its own exit too.
    script = f"""
import os, sys
from slicecount import Recorder, Store
recorder = Recorder(Store.from_url({settings.redis_url!r}), flush_interval=3600)
recorder.add("atexit", 7, now={T0})
pid = os.fork()
if pid == 0:
    recorder.add("atexit", 100, now={T0})
    sys.exit(0)
os.waitpid(pid, 0)
"""
    subprocess.run([sys.executable, "-W", "ignore", "-c", script], check=True, timeout=60)
    assert total(store, "atexit") == 107


def test_close_stops_the_flusher_and_context_manager_closes(store: Store) -> None:
    with Recorder(store, flush_interval=0.05) as recorder:
        recorder.add("cm", now=T0)
        thread = recorder._thread
        assert thread is not None and thread.is_alive()
    assert not thread.is_alive()
    assert total(store, "cm") == 1


@pytest.mark.layouts("book", "blocks")
def test_close_gives_up_after_its_timeout(
    private_redis: EmbeddedRedis, caplog: pytest.LogCaptureFixture, layout: str
) -> None:
    store = Store(Settings(redis_url=private_redis.url, socket_timeout=0.5, layout=layout))
    increments = 7 if layout == "book" else 1  # one per precision, or the one open slice
    recorder = Recorder(store, flush_interval=3600)
    private_redis.stop()
    recorder.add("lost", 3, now=T0)
    with caplog.at_level(logging.ERROR, logger="slicecount"):
        assert recorder.close(timeout=0.3) is False
    assert (
        f"could not write to {private_redis.url} within 0.3 s of closing: 3 counts lost (0 "
        f"buffered, of 0 series over 0 seconds; 3 in 1 chunk ({increments} increments) that "
        "Redis may have applied) and 0 unique values"
    ) in caplog.text
    store.close()


@pytest.mark.layouts("book", "blocks")
def test_a_close_that_gave_up_says_what_is_lost_and_the_exit_does_not_wait_again(
    caplog: pytest.LogCaptureFixture, layout: str
) -> None:
    # nobody listens on port 1: every flush fails at once, as with a wrong port
    settings = Settings(redis_url="redis://127.0.0.1:1/0", close_timeout=0.2, layout=layout)
    # jobs: 2 slices at 1 s, 1 at each coarser precision; the sum: 1 at each (the book's 8 + 7),
    # or one open slice per series and second (2 + 1)
    increments = 15 if layout == "book" else 3
    with Store(settings) as store:
        recorder = Recorder(store, flush_interval=3600)
        recorder.add("jobs", 3, now=T0)
        recorder.add("jobs", 2, now=T0 + 1)
        recorder.add("http.request.duration.sum_us", 250_000, now=T0)  # micro-units: no count
        with caplog.at_level(logging.ERROR, logger="slicecount"):
            assert recorder.close() is False  # close_timeout: the default timeout
            assert recorder.gave_up and recorder.has_unwritten()
            lifecycle._close_at_exit()  # what the interpreter's exit runs
        (line,) = caplog.messages  # the exit tried nothing more (a close_timeout saved)
        # the flush prepared the buffer into a chunk: refused, it waits in doubt
        assert line == (
            "slicecount could not write to redis://127.0.0.1:1/0 within 0.2 s of closing: 5 "
            f"counts lost (0 buffered, of 0 series over 0 seconds; 5 in 1 chunk ({increments} "
            "increments) that Redis may have applied) and 0 unique values"
        )


def test_the_loss_line_counts_events_not_histogram_sums() -> None:
    counts = Counts(100, 300.0, lambda: T0, lambda n: None)
    counts.reset(threading.Lock())
    counts.add(T0, "jobs", 3)
    counts.add(T0 + 1, "jobs", 2)
    counts.add(T0, 'http.request.duration.sum_us{route="/"}', 250_000)  # micro-units
    assert counts.describe() == (5, 2, 2)  # events, series, seconds


def test_a_full_redis_keeps_counts_buffered_until_it_has_room(
    store: Store, redis_client: redis.Redis
) -> None:
    recorder = Recorder(store, flush_interval=3600)
    recorder.add("oom", 2, now=T0)
    redis_client.config_set("maxmemory", 1)
    try:
        assert recorder.flush() is False  # OOM: nothing written, the chunk waits
        assert recorder.in_doubt == 1
    finally:
        redis_client.config_set("maxmemory", 0)
    assert recorder.flush()
    assert store.get("oom", 1) == [(T0, 2)]
    recorder.close()


@pytest.mark.topologies
def test_add_ids_counts_several_ids_at_once_and_rejects_bad_counts(store: Store) -> None:
    recorder = Recorder(store, flush_interval=3600)
    a, b = recorder.series_id("pair", {"side": "a"}), recorder.series_id("pair", {"side": "b"})
    recorder.add_ids([(a, 2), (b, 3)], now=T0)
    recorder.add_ids([(a, 1), (b, 1.5)], now=T0)  # type: ignore[list-item]  # all or nothing
    recorder.close()
    assert total(store, "pair", {"side": "a"}) == 2
    assert total(store, "pair", {"side": "b"}) == 3
    assert rejected(store) == {"not_a_count": 2}  # both entries of the refused call


def _record_in_a_child(url: str) -> None:
    recorder = Recorder(Store.from_url(url), flush_interval=3600)
    recorder.add("child.events", 3, now=T0)  # returns without close(): the finalizer writes


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # 3.12+ warns on fork with threads
@pytest.mark.topologies
def test_a_multiprocessing_child_writes_its_counts_on_the_way_out(
    store: Store, settings: Settings
) -> None:
    import multiprocessing

    Recorder(store)  # this process records too: the fork hook is registered
    child = multiprocessing.get_context("fork").Process(
        target=_record_in_a_child, args=(settings.redis_url,)
    )
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert total(store, "child.events") == 3
