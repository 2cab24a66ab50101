"""The write buffer: O(1) in-memory counting on the request path, flushed to Redis on a thread.

Every count goes through one entry point, ``_add()``: one lock and a dict update keyed by
(epoch second, series id). A flusher thread, started lazily in the process that records, swaps
the buffer every ``flush_interval`` seconds and hands it as it is to ``Store.write_buffer``
(one HINCRBY per precision, series and slice). A failed flush is merged back and retried with
backoff; past ``max_pending`` buffered entries the oldest are dropped and their counts written
later as ``slicecount.dropped``. After ``fork()`` the child starts empty, so nothing is counted
twice; at interpreter exit the buffer is flushed.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Sequence

from slicecount import lifecycle
from slicecount.admission import Admission, Warnings
from slicecount.batches import Clock
from slicecount.errors import ConfigurationError, StoreError
from slicecount.series import Labels
from slicecount.store import Store

logger = logging.getLogger("slicecount")

DROPPED_METRIC = "slicecount.dropped"
"""Events dropped because the buffer was full while Redis was unreachable."""
REJECTED_METRIC = "slicecount.rejected"
"""Events refused because their name, labels or count were invalid (each cause logged once)."""
MAX_BACKOFF = 10.0
"""Longest pause in seconds between two flush attempts while Redis is unreachable."""
CLOSE_TIMEOUT = lifecycle.CLOSE_TIMEOUT

Pending = dict[int, dict[str, int]]  # epoch second -> series id -> count
Entries = Sequence[tuple[str, int]]  # (series id from series_id(), count)


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
        self.max_backoff = max(max_backoff, self.flush_interval)
        self._clock = clock
        self._warnings = Warnings()
        self._admission = Admission(
            max_series_per_metric or settings.max_series_per_metric, self._warnings
        )
        self._ids = self._admission.ids  # read without a lock on the hot path
        self._dropped_total = 0
        self._failing = False
        self.reset()
        lifecycle.track(self)

    def reset(self) -> None:
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

    # -- counting ------------------------------------------------------------------------------

    def add(
        self, name: str, n: int = 1, labels: Labels | None = None, now: float | None = None
    ) -> None:
        """Count ``n`` events of a series at ``now`` (default: the clock). Never raises: a bad
        name, label or count is logged once and counted as ``slicecount.rejected``."""
        try:
            series_id = self._ids.get((name, tuple(labels.items())) if labels else name)
            if series_id is None:
                series_id = self._admission.series_id(name, labels)
            if n.__class__ is not int:
                raise ConfigurationError(f"count must be an integer, got {n!r}")
        except Exception as exc:  # a counting bug must never reach the caller's request
            self._reject(name, n, exc)
            return
        self._add(now, series_id, n)

    def series_id(self, name: str, labels: Labels | None = None) -> str:
        """The id ``add_ids()`` counts into: validated (ValueError naming the bad value) and
        folded into ``name{overflow="true"}`` past ``max_series_per_metric`` label sets."""
        return self._admission.series_id(name, labels)

    def add_ids(self, entries: Entries, now: float | None = None) -> None:
        """Count several (id from ``series_id()``, n) pairs at one instant under one lock: what
        the middleware records per request. Never raises."""
        if not entries:
            return
        for _, n in entries:
            if n.__class__ is not int:
                self._reject("add_ids", 1, ConfigurationError(f"count must be an int, got {n!r}"))
                return
        first_id, first_n = entries[0]
        self._add(now, first_id, first_n, entries[1:])

    def _add(self, now: float | None, series_id: str, n: int, more: Entries = ()) -> None:
        """The one way into the buffer: ``n`` events of ``series_id``, then each pair of
        ``more``, at one instant. (The first pair travels apart so that ``add()``, the common
        call, builds no tuple.)"""
        try:
            second = int(self._clock()) if now is None else int(now)
            # acquire/release is measurably cheaper than ``with`` on this path
            lock = self._lock
            lock.acquire()
            try:
                bucket = self._pending.get(second)
                if bucket is None:
                    if second < 0:
                        raise ConfigurationError(f"time must be an epoch second, got {now!r}")
                    bucket = self._pending[second] = {}
                index = 0
                while True:
                    count = bucket.get(series_id)
                    if count is None:
                        bucket[series_id] = n
                        self._size += 1
                        if self._size > self.max_pending:
                            self._drop_oldest()  # may take this very second's bucket away
                            bucket = self._pending.setdefault(second, {})
                    else:
                        bucket[series_id] = count + n
                    if index == len(more):
                        break
                    series_id, n = more[index]
                    index += 1
            finally:
                lock.release()
            if self._thread is None:
                self._start()
        except Exception as exc:
            self._reject("add", 1 + len(more), exc)

    def _reject(self, name: object, n: object, exc: Exception) -> None:
        with self._lock:
            self._rejected += n if isinstance(n, int) and n > 0 else 1
        self._warnings.once(f"reject:{name!r}", "slicecount dropped an event: %s", exc)
        if self._thread is None:
            self._start()

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

    # -- the flusher ---------------------------------------------------------------------------

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
            # The loss counters travel outside the bounded buffer, so reporting a loss never
            # causes another one.
            losses = {DROPPED_METRIC: dropped, REJECTED_METRIC: rejected}
            batch = _with_losses(pending, int(self._clock()), losses)
            if not batch:
                return True
            try:
                refused = self.store.write_buffer(batch)
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

    # -- introspection and shutdown ------------------------------------------------------------

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

    def has_unwritten(self) -> bool:
        """True while counts (or loss counters) wait to be written."""
        return bool(self._size or self._dropped or self._rejected)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _with_losses(pending: Pending, second: int, losses: dict[str, int]) -> Pending:
    """``pending`` plus the non-zero loss counters at ``second`` (a copy when they are added,
    so a merge-back puts back only what was buffered)."""
    if not any(losses.values()):
        return pending
    batch = {s: dict(bucket) for s, bucket in pending.items()}
    bucket = batch.setdefault(second, {})
    for series_id, count in losses.items():
        if count:
            bucket[series_id] = bucket.get(series_id, 0) + count
    return batch


close_all = lifecycle.close_all
