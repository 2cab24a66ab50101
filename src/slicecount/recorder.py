"""The write buffer: O(1) in-memory counting on the request path, flushed to Redis on a thread.

``add()`` takes one lock and updates a dict keyed by (epoch second, series id). A flusher thread
started lazily in the process that records swaps the dict every ``flush_interval`` seconds and
writes it with ``Store.apply`` (one HINCRBY per precision, series and slice). A failed flush is
merged back and retried with backoff; past ``max_pending`` buffered entries the oldest are
dropped and their counts are written later as ``slicecount.dropped``. After ``fork()`` the child
starts empty, so nothing is counted twice; at interpreter exit the buffer is flushed.
"""

from __future__ import annotations

import atexit
import logging
import os
import random
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Mapping, Sequence

from slicecount.errors import StoreError
from slicecount.series import Labels, LabelValue, encode
from slicecount.store import Store

logger = logging.getLogger("slicecount")

DROPPED_METRIC = "slicecount.dropped"
"""Events dropped because the buffer was full while Redis was unreachable."""
REJECTED_METRIC = "slicecount.rejected"
"""Events refused because their name, labels or count were invalid (each cause logged once)."""
OVERFLOW_LABELS = {"overflow": "true"}
"""Labels of the series that takes a metric's label sets beyond ``max_series_per_metric``."""
MAX_BACKOFF = 10.0
"""Longest pause in seconds between two flush attempts while Redis is unreachable."""
CLOSE_TIMEOUT = 5.0
"""Seconds ``close()`` (and interpreter exit) keeps trying to write what is buffered."""
_MAX_WARNED = 100

Clock = Callable[[], float]
Pending = dict[int, dict[str, int]]  # epoch second -> series id -> count


class Recorder:
    """Buffers counts in memory and writes them to a ``Store`` in the background."""

    def __init__(
        self,
        store: Store,
        flush_interval: float | None = None,
        max_pending: int | None = None,
        *,
        max_series_per_metric: int | None = None,
        clock: Clock = time.time,
        max_backoff: float = MAX_BACKOFF,
    ) -> None:
        settings = store.settings
        self.store = store
        self.flush_interval = flush_interval or settings.flush_interval
        self.max_pending = max_pending or settings.max_pending
        self.max_series_per_metric = max_series_per_metric or settings.max_series_per_metric
        self.max_backoff = max(max_backoff, self.flush_interval)
        self._clock = clock
        self._ids: dict[Hashable, str] = {}
        self._admitted: dict[str, set[str]] = {}
        self._warned: set[str] = set()
        self._dropped_total = 0
        self._failing = False
        self._reset()
        _live.add(self)

    def _reset(self) -> None:
        """Fresh buffer, locks and flusher state (at start and in a forked child)."""
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._pending: Pending = {}
        self._size = 0
        self._dropped = 0
        self._rejected = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False

    # -- the hot path ----------------------------------------------------------------------

    def add(
        self, name: str, n: int = 1, labels: Labels | None = None, now: float | None = None
    ) -> None:
        """Count ``n`` events of a series at ``now`` (default: the clock). Never raises."""
        try:
            series_id = self._ids.get((name, tuple(labels.items())) if labels else name)
            if series_id is None:
                series_id = self._admit(name, labels)
        except Exception as exc:  # a counting bug must never reach the caller's request
            self._reject(name, n, exc)
            return
        self.add_id(series_id, n, now)

    def add_id(self, series_id: str, n: int = 1, now: float | None = None) -> None:
        """Count ``n`` events of an id obtained from ``series_id()``. Never raises."""
        try:
            if n.__class__ is not int:
                raise ValueError(f"count must be an integer, got {n!r}")
            second = int(self._clock()) if now is None else int(now)
            # acquire/release is measurably cheaper than ``with`` on this path (~1.5M vs 1.2M/s)
            lock = self._lock
            lock.acquire()
            try:
                bucket = self._pending.get(second)
                count = None if bucket is None else bucket.get(series_id)
                if count is None:
                    self._new_entry(second, series_id, n)
                else:
                    bucket[series_id] = count + n  # type: ignore[index]
            finally:
                lock.release()
            if self._thread is None:
                self._start()
        except Exception as exc:
            self._reject(series_id, n, exc)

    def add_many(self, entries: Sequence[tuple[str, int]], now: float | None = None) -> None:
        """Count several (series id, n) pairs at one instant under one lock. Never raises."""
        for series_id, n in entries:
            if n.__class__ is not int:
                self._reject(series_id, 1, ValueError(f"count must be an integer, got {n!r}"))
                return
        self.add_many_trusted(entries, now)

    def add_many_trusted(
        self, entries: Sequence[tuple[str, int]], now: float | None = None
    ) -> None:
        """``add_many`` for callers whose counts are ints by construction (the middleware)."""
        try:
            second = int(self._clock()) if now is None else int(now)
            lock = self._lock
            lock.acquire()
            try:
                pending = self._pending
                for series_id, n in entries:
                    bucket = pending.get(second)
                    count = None if bucket is None else bucket.get(series_id)
                    if count is None:
                        self._new_entry(second, series_id, n)
                    else:
                        bucket[series_id] = count + n  # type: ignore[index]
            finally:
                lock.release()
            if self._thread is None:
                self._start()
        except Exception as exc:
            self._reject("add_many", len(entries), exc)

    def series_id(self, name: str, labels: Labels | None = None) -> str:
        """The id ``add_id()`` counts into: validated (ValueError naming the bad value) and
        folded into the overflow series past ``max_series_per_metric`` label sets."""
        series_id = self._ids.get((name, tuple(labels.items())) if labels else name)
        return series_id if series_id is not None else self._admit(name, labels)

    def _new_entry(self, second: int, series_id: str, n: int) -> None:
        """First count of a (second, series) pair: check it and apply the buffer bound."""
        if second < 0:
            raise ValueError(f"time must be an epoch second, got {second!r}")
        self._pending.setdefault(second, {})[series_id] = n
        self._size += 1
        if self._size > self.max_pending:
            self._drop_oldest()

    def _admit(self, name: str, labels: Labels | None) -> str:
        """Validate a new (name, labels) pair and apply the per-metric cardinality guard.

        The guard counts label sets without ``le``, so a histogram's buckets count once.
        """
        series_id = encode(name, labels)
        key: Hashable = (name, tuple(labels.items())) if labels else name
        le = labels.get("le") if labels else None
        guard_id = series_id if le is None else encode(name, _without_le(labels))
        with self._lock:
            admitted = self._admitted.setdefault(name, set())
            if guard_id not in admitted:
                if len(admitted) >= self.max_series_per_metric:
                    # Not cached: a raw id in a label must not grow this process's memory either.
                    self._warn_once(
                        f"overflow:{name}",
                        "metric %r reached %d label sets in this process; further new label "
                        'sets are counted as %s{overflow="true"}',
                        name,
                        self.max_series_per_metric,
                        name,
                    )
                    overflow = OVERFLOW_LABELS if le is None else {**OVERFLOW_LABELS, "le": le}
                    return encode(name, overflow)
                admitted.add(guard_id)
            self._ids[key] = series_id
        return series_id

    def _reject(self, name: object, n: object, exc: Exception) -> None:
        with self._lock:
            self._rejected += n if n.__class__ is int and n > 0 else 1
        self._warn_once(f"reject:{name!r}", "slicecount dropped an event: %s", exc)
        if self._thread is None:
            self._start()

    def _warn_once(self, key: str, message: str, *args: object) -> None:
        if key in self._warned or len(self._warned) >= _MAX_WARNED:
            return
        self._warned.add(key)
        logger.warning(message, *args)

    def _drop_oldest(self) -> None:
        """Drop buffered entries, oldest second first, until the bound holds (lock held)."""
        pending = self._pending
        while self._size > self.max_pending and pending:
            oldest = min(pending)
            bucket = pending[oldest]
            while bucket and self._size > self.max_pending:
                _, count = bucket.popitem()
                self._size -= 1
                self._dropped += count
            if not bucket:
                del pending[oldest]

    # -- the flusher -----------------------------------------------------------------------

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(
                target=self._run, name="slicecount-flusher", daemon=True
            )
        self._thread.start()

    def _run(self) -> None:
        delay = self.flush_interval
        while not self._stop.wait(delay):
            if self.flush():
                delay = self.flush_interval
            else:
                delay = min(delay * 2, self.max_backoff) * random.uniform(0.8, 1.0)

    def flush(self) -> bool:
        """Write everything buffered now; True when Redis took it (else it stays buffered)."""
        with self._flush_lock:
            with self._lock:
                pending, self._pending, self._size = self._pending, {}, 0
                dropped, self._dropped = self._dropped, 0
                rejected, self._rejected = self._rejected, 0
            batch: dict[str, dict[int, int]] = {}
            for second, bucket in pending.items():
                for series_id, count in bucket.items():
                    batch.setdefault(series_id, {})[second] = count
            # The loss counters travel outside the bounded buffer, so reporting a loss never
            # causes another one.
            second = int(self._clock())
            for series_id, count in ((DROPPED_METRIC, dropped), (REJECTED_METRIC, rejected)):
                if count:
                    seconds = batch.setdefault(series_id, {})
                    seconds[second] = seconds.get(second, 0) + count
            if not batch:
                return True
            try:
                refused = self.store.apply(batch)
            except StoreError as exc:
                self._merge_back(pending, dropped, rejected)
                if not self._failing:
                    self._failing = True
                    logger.warning("slicecount cannot write to redis, buffering: %s", exc)
                return False
            except Exception:
                logger.exception("slicecount failed to write a batch; its counts are dropped")
                return True
            self._dropped_total += dropped
            if self._failing:
                self._failing = False
                logger.warning("slicecount writes to redis again")
            if refused:
                logger.error("redis refused %d commands of a batch (wrong key types?)", refused)
            return True

    def _merge_back(self, failed: Pending, dropped: int, rejected: int) -> None:
        """Put a batch that could not be written back in front of what arrived meanwhile."""
        with self._lock:
            self._dropped += dropped
            self._rejected += rejected
            for second, bucket in self._pending.items():
                target = failed.setdefault(second, {})
                for series_id, count in bucket.items():
                    target[series_id] = target.get(series_id, 0) + count
            self._pending = failed
            self._size = sum(len(bucket) for bucket in failed.values())
            if self._size > self.max_pending:
                self._drop_oldest()

    # -- introspection and shutdown -----------------------------------------------------------

    @property
    def pending(self) -> int:
        """Buffered (second, series) entries not yet written."""
        return self._size

    @property
    def dropped(self) -> int:
        """Events dropped so far because the buffer was full (written or not yet written)."""
        return self._dropped_total + self._dropped

    def close(self, timeout: float = CLOSE_TIMEOUT) -> bool:
        """Stop the flusher and write what is left, retrying up to ``timeout`` seconds."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._stop.set()
        deadline = time.monotonic() + timeout
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        delay = 0.05
        while True:
            if self.flush():
                return True
            if time.monotonic() + delay > deadline:
                break
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        lost = sum(sum(bucket.values()) for bucket in self._pending.values())
        logger.error("slicecount could not write %d buffered events before closing", lost)
        return False

    def _after_fork_in_child(self) -> None:
        # The parent's buffer is the parent's to write; its thread does not exist here.
        self._reset()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    add_ids = add_many_trusted  # shim until the Recorder rewrite lands


def _without_le(labels: Labels | None) -> Mapping[str, LabelValue]:
    return {k: v for k, v in (labels or {}).items() if k != "le"}


_live: weakref.WeakSet[Recorder] = weakref.WeakSet()


def close_all(timeout: float = CLOSE_TIMEOUT) -> bool:
    """Flush and stop every Recorder of this process (gunicorn ``worker_exit``, shutdown hooks)."""
    return all([recorder.close(timeout) for recorder in list(_live)])


def _reset_after_fork() -> None:
    for recorder in list(_live):
        recorder._after_fork_in_child()


def _close_at_exit() -> None:
    for recorder in list(_live):
        if recorder.pending or recorder._dropped or recorder._rejected:
            recorder.close()


os.register_at_fork(after_in_child=_reset_after_fork)
atexit.register(_close_at_exit)
