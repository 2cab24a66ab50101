"""What a cleaner pass does: which precisions are due, which are swept, how each is trimmed.
Pure.

The book's schedule: a pass every ``interval`` seconds; precision p is due every
``max(1, p // interval)`` passes. Passes are numbered by the clock (``now // interval``), so
every sidecar agrees on the number without sharing a counter, and the lease is per number.
Sweeps follow a period instead, from the start of the pass whose sweep last completed (kept in
Redis), so a daemon just started, a ``--once`` from cron at any minute and several racing
cleaners all sweep, and none sweeps twice in a period.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from slicecount.config import Settings
from slicecount.core.slices import oldest_kept, slice_start
from slicecount.operations.compacting import SEAL_GRACE, WRITER_LIVE
from slicecount.operations.trimming import MAX_NAMED, Trim

__all__ = [
    "Due",
    "Trim",
    "annotation_cutoff",
    "due_precisions",
    "pass_index",
    "pass_start",
    "plan_pass",
    "plan_trim",
    "sealed_point",
    "sweep_due",
    "sweep_every",
]


class Due(NamedTuple):
    """A precision a pass trims: by the schedule (or ``--once``), and/or to sweep it."""

    precision: int
    scheduled: bool
    sweep: bool


def pass_index(now: float, interval: float) -> int:
    return int(now // interval)


def pass_start(index: int, interval: float) -> int:
    """The second pass ``index`` starts at: what its sweeps are recorded as (a cron job a few
    seconds late still finds its previous run a whole period before)."""
    return int(index * interval)


def due_precisions(
    settings: Settings, index: int, interval: float, every: bool = False
) -> list[int]:
    """The precisions to trim in pass ``index`` (all of them with ``every``, as --once does)."""
    return [p for p in settings.precisions if every or index % max(1, int(p // interval)) == 0]


def sweep_every(precision: int, period: float) -> float:
    """Seconds between two sweeps of ``precision``: the period, or one slice when slices are
    longer (slices of p seconds expire only at multiples of p: a sweep in between finds only
    late writes)."""
    return max(period, precision)


def sweep_due(precision: int, last: int | None, started: int, period: float) -> bool:
    """Whether the pass that started at ``started`` sweeps ``precision``, given the start of
    the pass whose sweep of it last completed (None: none on record). A record further ahead
    than a period (the clock went back, a ``--now`` in the future) counts as none."""
    if last is None:
        return True
    every = sweep_every(precision, period)
    return started - last >= every or last - started > every


def plan_pass(
    settings: Settings,
    index: int,
    interval: float,
    every: bool,
    swept: Mapping[int, int],
    period: float,
) -> list[Due]:
    """The precisions pass ``index`` trims: those the schedule makes due (all with ``every``)
    and those whose sweep is due (``swept``: precision -> the start of the pass whose sweep
    last completed), whatever the schedule says: a precision trimmed once a day is swept on
    a daemon's first pass too."""
    scheduled = set(due_precisions(settings, index, interval, every))
    started = pass_start(index, interval)
    planned = [
        Due(p, p in scheduled, sweep_due(p, swept.get(p), started, period))
        for p in settings.precisions
    ]
    return [due for due in planned if due.scheduled or due.sweep]


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


def sealed_point(
    now: float, finest: int, marks: Mapping[str, float], last_writes: Mapping[str, float]
) -> int:
    """Blocks layout: the second before which a shard's open slices are sealed, floored to the
    finest precision: ``SEAL_GRACE`` before ``now``, or the oldest mark (``marks``: writer ->
    the oldest second it may still send) of a writer that wrote in the last ``WRITER_LIVE``
    seconds (``last_writes``: writer -> time of its last write). A writer quiet longer holds
    nothing back: should it come back, its late writes land in the open hash, where readers
    count them, and the next pass moves them."""
    bound = now - SEAL_GRACE
    for writer, mark in marks.items():
        last = last_writes.get(writer)
        if last is not None and last >= now - WRITER_LIVE:
            bound = min(bound, mark)
    return slice_start(bound, finest)
