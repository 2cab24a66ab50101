"""What a cleaner pass does: which precisions are due and how each is trimmed. Pure.

The book's schedule: a pass every ``interval`` seconds; precision p is due every
``max(1, p // interval)`` passes. Passes are numbered by the clock (``now // interval``), so
every sidecar agrees on the number without sharing a counter, and the lease is per number.
"""

from __future__ import annotations

from dataclasses import dataclass

from slicecount.config import Settings
from slicecount.slices import oldest_kept, slice_start

SWEEP_EVERY = 60
"""A full trim of every due precision every this many passes (hourly at the default 60 s
interval): it catches late writes older than the last cutoff, which the incremental trim
does not look for."""


MAX_NAMED = 4000
"""Most expired slices an incremental trim deletes by name (one HDEL; Lua's unpack limit)."""


@dataclass(frozen=True)
class Trim:
    """How to trim one precision this pass."""

    precision: int
    mode: str  # "full": list every hash's fields; "incremental": delete expired ones by name
    cutoff: int  # slices older than this go
    first: int  # incremental: the first slice that expired since the last pass
    horizon: int  # slices after this go: further ahead than a writer may write (max_future)


def pass_index(now: float, interval: float) -> int:
    return int(now // interval)


def due_precisions(
    settings: Settings, index: int, interval: float, every: bool = False
) -> list[int]:
    """The precisions to trim in pass ``index`` (all of them with ``every``, as --once does)."""
    return [p for p in settings.precisions if every or index % max(1, int(p // interval)) == 0]


def plan_trim(
    settings: Settings,
    precision: int,
    now: float,
    previous: int | None,
    sweep: bool,
    writers_now: float | None = None,
) -> Trim | None:
    """How to trim ``precision`` at ``now``, given the cutoff the last complete pass reached;
    None when nothing expired since then and no sweep is due. Slices further than
    ``max_future`` ahead of ``writers_now`` (default ``now``) go too: no writer makes them.
    Writers and cleaners must share ``max_future``."""
    retention = settings.retention_for(precision)
    cutoff = oldest_kept(precision, retention, now)
    ahead_of = now if writers_now is None else writers_now
    horizon = slice_start(ahead_of + settings.max_future, precision)
    if sweep or previous is None or previous > cutoff:
        return Trim(precision, "full", cutoff, cutoff, horizon)
    if previous == cutoff:
        return None
    if (cutoff - previous) // precision > min(retention, MAX_NAMED):  # long gap: list instead
        return Trim(precision, "full", cutoff, cutoff, horizon)
    return Trim(precision, "incremental", cutoff, previous, horizon)


def annotation_cutoff(settings: Settings, now: float) -> float:
    """Annotations older than the longest retention window are of no panel's use."""
    return now - max(settings.retention_for(p) * p for p in settings.precisions)
