"""The Recorder's exemplars waiting for the next flush: the last of each (bucket series,
minute), bounded. Pure.

An exemplar is a sample, not a count: a later one of the same series and minute replaces the
one waiting, and past the bound (Redis away for long) the oldest waiting one goes. Neither is a
loss to count: the counts beside them are whole, and Redis keeps only the last of a minute
anyway. A flush takes them all with the counts; each one's trace, noted as the request found
it, is read into labels then (``core.exemplars.labels_of``), and one that is no valid trace
is left out.
"""

from __future__ import annotations

import threading

from slicecount.core.exemplars import Exemplar, Trace, labels_of

Waiting = dict[tuple[str, float], tuple[Trace, float, float]]
"""(bucket series id, its minute: time // 60) -> its last (trace, value, time)."""


class Exemplars:
    """The exemplars waiting, at most ``bound`` of them."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.reset(threading.Lock())

    def reset(self, lock: threading.Lock) -> None:
        """Empty, guarded by ``lock`` (the Recorder's: taken with the counts)."""
        self._lock = lock
        self._waiting: Waiting = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, series_id: str, trace: Trace, value: float, time: float) -> None:
        """Keep ``value`` observed at ``time`` in ``series_id`` in ``trace``. On a traced
        request's path: a tuple, one lock, one dict update."""
        key = (series_id, time // 60.0)  # (PERIOD: a literal costs less than a global)
        lock = self._lock
        lock.acquire()
        try:
            waiting = self._waiting
            if len(waiting) >= self.bound and key not in waiting:
                del waiting[next(iter(waiting))]  # the oldest minute waiting (dicts keep order)
            waiting[key] = (trace, value, time)
        finally:
            lock.release()

    def take(self) -> list[tuple[str, Trace, float, float]]:
        """Everything waiting as (bucket series id, trace, value, time), leaving none (call
        with the lock held; ``exemplars()`` reads them after)."""
        waiting, self._waiting = self._waiting, {}
        return [(series_id, *kept) for (series_id, _), kept in waiting.items()]


def exemplars(taken: list[tuple[str, Trace, float, float]]) -> list[tuple[str, Exemplar]]:
    """What ``take()`` gave as (bucket series id, exemplar), those without a valid trace
    left out (outside the lock: reading a header costs a regex)."""
    out = []
    for series_id, trace, value, time in taken:
        labels = labels_of(trace)
        if labels is not None:
            out.append((series_id, Exemplar(labels, value, time)))
    return out
