"""What the Recorder's two buffers (counts, unique values) share. Pure.

Entries wait per epoch second; the seconds wait in a heap, so that past the bound the oldest
second is shed first in O(log n) (during a long outage every new entry sheds one). The lock is
the Recorder's, so that a drop is counted (``dropped``) under the same lock as the losses.
"""

from __future__ import annotations

import heapq
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

from slicecount.operations.batches import Clock

B = TypeVar("B", bound=dict[Any, Any])


class SecondsBuffer(ABC, Generic[B]):
    """Buckets of type B per epoch second, at most ``bound`` units (``size``) in all."""

    def __init__(self, bound: int, clock: Clock, dropped: Callable[[int], None]) -> None:
        self.bound = bound
        self._clock = clock
        self._dropped = dropped  # called with the lock held: must not take it
        self.reset(threading.Lock())

    def reset(self, lock: threading.Lock) -> None:
        """Empty, guarded by ``lock`` (the Recorder's: a drop is counted under it)."""
        self._lock = lock
        self._pending: dict[int, B] = {}
        self._seconds: list[int] = []  # heap of the buffered seconds
        self.size = 0

    def _open(self, second: int) -> B:
        """A new, empty bucket for ``second`` (lock held)."""
        bucket = self._pending[second] = cast(B, {})
        heapq.heappush(self._seconds, second)
        return bucket

    @abstractmethod
    def _shed(self, bucket: B, excess: int) -> tuple[int, int]:
        """Take up to ``excess`` units out of ``bucket``: (units taken, events lost)."""

    def _drop_oldest(self) -> None:
        """Shed units, oldest second first, until the bound holds (lock held)."""
        pending, seconds = self._pending, self._seconds
        while self.size > self.bound and seconds:
            oldest = seconds[0]
            bucket = pending.get(oldest)
            while bucket and self.size > self.bound:
                units, events = self._shed(bucket, self.size - self.bound)
                self.size -= units
                self._dropped(events)
            if not bucket:
                pending.pop(oldest, None)
                heapq.heappop(seconds)

    def oldest(self) -> int | None:
        """The oldest second buffered, None when empty."""
        with self._lock:
            return self._seconds[0] if self._seconds else None

    def _swap(self) -> dict[int, B]:
        """Everything buffered, leaving the buffer empty (lock held)."""
        taken, self._pending, self._seconds, self.size = self._pending, {}, [], 0
        return taken
