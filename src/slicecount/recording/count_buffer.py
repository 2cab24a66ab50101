"""The Recorder's buffer of counts: one dict update per event on the request path, bounded. Pure.

Counts wait per (epoch second, series id), summed. At most ``max_entries`` (second, series)
entries wait; past it (Redis away for long) entries are dropped, oldest second first, and their
events counted through ``dropped`` (``seconds_buffer``). A flush takes the whole buffer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from slicecount.core.histogram import SUM_SUFFIX
from slicecount.operations.batches import Clock
from slicecount.operations.checks import time_error
from slicecount.recording.losses import Pending
from slicecount.recording.seconds_buffer import SecondsBuffer


class Counts(SecondsBuffer[dict[str, int]]):
    """Counts per second and series, waiting for the next flush."""

    def __init__(
        self, max_entries: int, max_future: float, clock: Clock, dropped: Callable[[int], None]
    ) -> None:
        super().__init__(max_entries, clock, dropped)
        self._max_future = max_future

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
                    bucket = self._open(second)
                index = 1
                while True:
                    count = bucket.get(series_id)
                    if count is None:
                        bucket[series_id] = n
                        self.size += 1
                        if self.size > self.bound:
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

    def _shed(self, bucket: dict[str, int], excess: int) -> tuple[int, int]:
        _, count = bucket.popitem()  # one (second, series) entry: its count is lost
        return 1, count

    def take(self) -> Pending:
        """Everything buffered, leaving the buffer empty (call with the lock held)."""
        return self._swap()

    def describe(self) -> tuple[int, int, int]:
        """(events, series, seconds) waiting, for a log line (a histogram's sum, in
        micro-units, is no count of events and is left out)."""
        counts, series = 0, set()
        for bucket in self._pending.values():
            for series_id, n in bucket.items():
                series.add(series_id)
                if not series_id.partition("{")[0].endswith(SUM_SUFFIX):
                    counts += n
        return counts, len(series), len(self._pending)
