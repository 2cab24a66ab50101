"""What a cleaner pass does: which precisions are due and how each is trimmed. Pure.

The book's schedule: a pass every ``interval`` seconds; precision p is due every
``max(1, p // interval)`` passes. Passes are numbered by the clock (``now // interval``), so
every sidecar agrees on the number without sharing a counter, and the lease is per number.
"""

from __future__ import annotations

from slicecount.config import Settings
from slicecount.slices import oldest_kept, slice_start
from slicecount.trimming import MAX_NAMED, Trim

__all__ = ["SWEEP_EVERY", "Trim", "annotation_cutoff", "due_precisions", "pass_index", "plan_trim"]

SWEEP_EVERY = 60
"""A full trim of every due precision every this many passes (hourly at the default 60 s
interval): it lists every hash, so it catches what the cheaper passes do not look for (see
``plan_trim``)."""


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
    Writers and cleaners must share ``max_future``.

    A sweep lists every hash ("full"). Otherwise the slices expired since the last cutoff are
    deleted by name ("incremental"); with no usable last cutoff (the first pass, the clock
    went back, a gap longer than retention) a "cold" trim deletes by name the run of slices
    right before the cutoff, as far back as it runs. Both list a hash still longer than
    retention. What they leave to the sweep, in hashes of retention length or less: slices
    older than what they named (a late write or backfill, a sparse series' old slices on a
    cold pass) and slices past the horizon."""
    retention = settings.retention_for(precision)
    cutoff = oldest_kept(precision, retention, now)
    ahead_of = now if writers_now is None else writers_now
    horizon = slice_start(ahead_of + settings.max_future, precision)
    if sweep:
        return Trim(precision, "full", cutoff, cutoff, horizon)
    if previous is None or previous > cutoff:
        return Trim(precision, "cold", cutoff, cutoff, horizon)
    if previous == cutoff:
        return None
    if (cutoff - previous) // precision > min(retention, MAX_NAMED):  # long gap: cold
        return Trim(precision, "cold", cutoff, cutoff, horizon)
    return Trim(precision, "incremental", cutoff, previous, horizon)


def annotation_cutoff(settings: Settings, now: float) -> float:
    """Annotations older than the longest retention window are of no panel's use."""
    return now - max(settings.retention_for(p) * p for p in settings.precisions)
