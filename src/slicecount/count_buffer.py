"""The Recorder's buffer of counts: one dict update per event on the request path, bounded. Pure.

Counts wait per (epoch second, series id), summed. At most ``max_entries`` (second, series)
entries wait; past it (Redis away for long) entries are dropped, oldest second first, and their
events counted through ``dropped``. A flush takes the whole buffer (``take``).
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Sequence

from slicecount.batches import Clock
from slicecount.checks import time_error
from slicecount.losses import Pending


class Counts:
    """Counts per second and series, waiting for the next flush."""

    def __init__(
        self, max_entries: int, max_future: float, clock: Clock, dropped: Callable[[int], None]
    ) -> None:
        self.max_entries = max_entries
        self._max_future = max_future
        self._clock = clock
        self._dropped = dropped  # called with the lock held: must not take it
        self.reset(threading.Lock())

    def reset(self, lock: threading.Lock) -> None:
        """Empty, guarded by ``lock`` (the Recorder's: a drop is counted under it)."""
        self._lock = lock
        self._pending: Pending = {}
        self._seconds: list[int] = []  # heap of the buffered seconds
        self.size = 0

    def add(
        self,
        now: float | None,
        series_id: str,
        n: int,
        more: Sequence[tuple[str, int]] | None = None,
    ) -> Exception | None:
        """``n`` events of ``series_id``, then each pair of ``more`` after its first (which is
        that one), at one instant (default: the clock); the refusal of a bad time is returned,
        never raised. (The first pair travels apart so that ``Recorder.add()``, the common
        call, builds no tuple.)"""
        try:
            second = int(self._clock()) if now is None else int(now)
            # acquire/release is measurably cheaper than ``with`` on this path
            lock = self._lock
            lock.acquire()
            try:
                bucket = self._pending.get(second)
                if bucket is None:
                    error = time_error(second, self._clock(), self._max_future, now)
                    if error is not None:  # checked once per new second
                        return error
                    bucket = self._pending[second] = {}
                    heapq.heappush(self._seconds, second)
                index = 1
                while True:
                    count = bucket.get(series_id)
                    if count is None:
                        bucket[series_id] = n
                        self.size += 1
                        if self.size > self.max_entries:
                            self._drop_oldest()  # may take this very second's bucket away
                            bucket = self._pending.setdefault(second, {})
                    else:
                        bucket[series_id] = count + n
                    if more is None or index == len(more):
                        return None
                    series_id, n = more[index]
                    index += 1
            finally:
                lock.release()
        except Exception as exc:
            return exc

    def _drop_oldest(self) -> None:
        """Drop entries, oldest second first, until the bound holds (lock held). The seconds
        wait in a heap: during a long outage every new entry drops one, in O(log n)."""
        pending, seconds = self._pending, self._seconds
        while self.size > self.max_entries and seconds:
            oldest = seconds[0]
            bucket = pending.get(oldest)
            while bucket and self.size > self.max_entries:
                _, count = bucket.popitem()
                self.size -= 1
                self._dropped(count)
            if not bucket:
                pending.pop(oldest, None)
                heapq.heappop(seconds)

    def take(self) -> Pending:
        """Everything buffered, leaving the buffer empty (call with the lock held)."""
        taken, self._pending, self._seconds, self.size = self._pending, {}, [], 0
        return taken

    def events(self) -> int:
        """Events buffered (for a log line)."""
        return sum(sum(bucket.values()) for bucket in self._pending.values())
