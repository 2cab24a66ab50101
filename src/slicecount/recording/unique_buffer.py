"""The Recorder's buffer of unique values: O(1) per value on the request path, bounded. Pure.

Values wait per (epoch second, series and mode) in a set, so a value seen a thousand times in a
second is sent once. At most ``max_values`` distinct values wait in all: past half of them the
flusher is woken to write them at once; past all of them (Redis away, or slower than the app)
the excess is dropped, oldest second first, and counted, as the counts' buffer does. A
flush takes the whole buffer; if Redis did not answer for it, it is put back (unique writes are
idempotent: what was applied already costs nothing the second time).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from slicecount.config import Settings
from slicecount.core.series import shown
from slicecount.errors import ConfigurationError, StoreError
from slicecount.operations.batches import Clock
from slicecount.operations.checks import time_error, value_error
from slicecount.operations.unique_writing import UniqueKey
from slicecount.recording.admission import Warnings
from slicecount.recording.losses import refused_by_redis
from slicecount.recording.seconds_buffer import SecondsBuffer

if TYPE_CHECKING:
    from slicecount.store import Store

Taken = dict[int, dict[UniqueKey, set[str]]]


class UniqueValues(SecondsBuffer[dict[UniqueKey, set[str]]]):
    """Distinct values per second and series, waiting for the next flush."""

    def __init__(
        self, max_values: int, settings: Settings, clock: Clock, dropped: Callable[[int], None]
    ) -> None:
        super().__init__(max_values, clock, dropped)
        self._max_future = settings.max_future
        self._kept = [(p, p * settings.unique_retention_for(p)) for p in settings.unique_precisions]
        self.early = max_values // 2
        """Values past which the flusher is woken (``wake``) to write them at once."""
        self.wake = threading.Event()
        self.waking = True
        """False while flushes fail: a wake would only take the values out of the bound's
        sight mid-burst, and Redis is away anyway (the flusher backs off)."""

    def add(self, key: UniqueKey, value: str, now: float | None) -> Exception | None:
        """Buffer ``value`` for ``key`` at ``now`` (default: the clock); the refusal of a bad
        value or time is returned, never raised (the Recorder counts it)."""
        # a cheap filter (the literal is MAX_VALUE_LENGTH); value_error() decides
        if value.__class__ is not str or len(value) > 1024 or not value.isascii():
            refused = value_error(value)
            if refused is not None:
                return refused
        second = int(self._clock()) if now is None else int(now)
        lock = self._lock
        lock.acquire()
        try:
            bucket = self._pending.get(second)
            if bucket is None:
                error = self._time_error(second, now)
                if error is not None:  # checked once per new second
                    return error
                bucket = self._open(second)
            values = bucket.get(key)
            if values is None:
                bucket[key] = {value}
            elif value in values:  # seen this second already: the common case
                return None
            else:
                values.add(value)
            self.size += 1
            if self.size > self.early:
                if self.waking:  # flush now: with Redis up, a burst is written, not dropped
                    self.wake.set()
                if self.size > self.bound:
                    self._drop_oldest()
        finally:
            lock.release()
        return None

    def _time_error(self, second: int, now: float | None) -> Exception | None:
        """``time_error``'s refusal, or one of a time whose slices are all past retention
        already (they would expire as they land: refused and counted, not lost silently)."""
        clock = self._clock()
        error = time_error(second, clock, self._max_future, now)
        if error is None and all(second - second % p + kept <= clock for p, kept in self._kept):
            return ConfigurationError(
                f"time {shown(now)} is past the retention of every unique precision", "time_range"
            )
        return error

    def _shed(self, bucket: dict[UniqueKey, set[str]], excess: int) -> tuple[int, int]:
        key = next(iter(bucket))
        values = bucket[key]
        if len(values) > excess:  # part of this set: only the excess, the rest stays buffered
            for _ in range(excess):
                values.pop()
            return excess, excess
        del bucket[key]
        return len(values), len(values)

    def take(self) -> Taken:
        """Everything buffered, leaving the buffer empty."""
        with self._lock:
            return self._swap()

    def put_back(self, taken: Taken) -> None:
        """Merge values a flush could not write into the buffer (still bounded)."""
        with self._lock:
            for second, bucket in taken.items():
                mine = self._pending.get(second)
                if mine is None:
                    mine = self._open(second)
                for key, values in bucket.items():
                    held = mine.get(key)
                    if held is None:
                        mine[key] = values
                        self.size += len(values)
                    else:
                        before = len(held)
                        held |= values
                        self.size += len(held) - before
            if self.size > self.bound:
                self._drop_oldest()

    def flush(
        self, store: Store, refuse: Callable[[Exception, int], None], warnings: Warnings
    ) -> bool:
        """Write what is buffered; False, with it put back, while Redis does not answer.
        What Redis refuses for good is counted through ``refuse``; an exact list that passed
        its cap is logged once."""
        taken = self.take()
        if not taken:
            return True
        try:
            over_cap = store.write_uniques(taken).over_cap
        except StoreError as exc:
            if not exc.permanent:
                self.put_back(taken)
                return False
            try:  # one key refused for good (another type under our name): the rest one by one
                over_cap = _write_each(store, taken, refuse)
            except StoreError:
                self.put_back(taken)  # all of it: what was written costs nothing again
                return False
        except (TypeError, ValueError) as exc:  # cannot even be packed: never sent
            refuse(refused_by_redis(f"unique values could not be sent: {exc}"), _values(taken))
            return True
        for member in over_cap:
            warnings.once(
                f"cap:{member}",
                "slicecount: the exact list %s passed %d values in a slice; that slice now "
                "lists some of them and counts by its HyperLogLog",
                member,
                store.settings.unique_exact_cap,
            )
        return True


def _values(taken: Taken) -> int:
    return sum(len(values) for bucket in taken.values() for values in bucket.values())


def _write_each(store: Store, taken: Taken, refuse: Callable[[Exception, int], None]) -> list[str]:
    """Write ``taken`` one (second, series) at a time, counting only the values of the ones
    Redis refuses for good; a passing failure is raised."""
    over_cap: list[str] = []
    for second, bucket in taken.items():
        for key, values in bucket.items():
            try:
                over_cap += store.write_uniques({second: {key: values}}).over_cap
            except StoreError as error:
                if not error.permanent:
                    raise
                refuse(refused_by_redis(f"redis refused unique values: {error}"), len(values))
    return over_cap
