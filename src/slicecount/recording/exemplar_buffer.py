"""The Recorder's exemplars waiting for the next flush: the last of each (bucket series,
minute), bounded. Pure.

An exemplar is a sample, not a count: a later one of the same series and minute replaces the
one waiting, and past the bound (Redis away for long) the oldest waiting one goes. Neither is a
loss to count: the counts beside them are whole, and Redis keeps only the last of a minute
anyway. A flush takes them all with the counts.
"""

from __future__ import annotations

import threading

from slicecount.core.exemplars import Exemplar, ExemplarLabels, slot_of

Waiting = dict[tuple[str, int], Exemplar]
"""(bucket series id, slot) -> its last exemplar."""


class Exemplars:
    """The exemplars waiting, at most ``bound`` of them."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.reset(threading.Lock())

    def reset(self, lock: threading.Lock) -> None:
        """Empty, guarded by ``lock`` (the Recorder's: taken with the counts)."""
        self._lock = lock
        self._waiting: Waiting = {}
        self.replaced = 0
        """Exemplars a later one of the same series and minute replaced before a flush."""

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, series_id: str, labels: ExemplarLabels, value: float, time: float) -> None:
        """Keep ``value`` observed at ``time`` in ``series_id`` with ``labels`` (the trace)."""
        key = (series_id, slot_of(time))
        exemplar = Exemplar(labels, value, time)
        with self._lock:
            waiting = self._waiting
            if waiting.pop(key, None) is not None:  # re-inserted: the newest goes last
                self.replaced += 1
            elif len(waiting) >= self.bound:
                del waiting[next(iter(waiting))]  # the oldest waiting (dicts keep their order)
            waiting[key] = exemplar

    def take(self) -> Waiting:
        """Everything waiting, leaving none (call with the lock held)."""
        waiting, self._waiting = self._waiting, {}
        return waiting
