"""A query asked again, answered from its last answer (``reads/repeats.py`` holds them).

A plan's answer is remembered under its expression and how it reads (its step, the precision
of its grid and of its reads, how many times it asks), in its place: its grid's times and
first boundary. It is given again whole when the plan asks the same times over the same
slices and read equal counts. Otherwise the times both ask (moved on by whole steps and
slices, the next step of a live refresh, or not) are taken from it as far as they read only
slices holding equal counts in both reads, and the times after them are computed: a live
refresh's last second arrives late, and changes only the last time's window. When the times
moved on, every selector must be a window's (a bare selector's total counts from the grid's
first boundary, which moved with the times).

Only a grid that leaves its now out (``engine.settled``) is remembered, and no plan of unique
series (their unions and windows are counted by the store, not from the counts read).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace
from typing import NamedTuple, cast

from slicecount.errors import extra_imports
from slicecount.promql.arrays import Block, Ints
from slicecount.promql.ast import MatrixSelector, VectorSelector, walk
from slicecount.promql.engine import Result, as_block, as_scalar, settled
from slicecount.promql.values import Grid, Labels, key
from slicecount.query.planning import Plan
from slicecount.reads.repeats import Inputs, Remembered

with extra_imports("datasource", "the datasource"):
    import numpy as np


class Taken(NamedTuple):
    """What a remembered answer gives of a plan's times: its columns ``shift`` to ``shift +
    kept`` are the plan's first ``kept`` times; ``grid`` holds the times after them, to be
    computed."""

    answer: Result
    shift: int
    kept: int
    grid: Grid


def key_of(plan: Plan) -> Hashable | None:
    """What a plan's answer is remembered under; None when it is not remembered."""
    node, grid = plan.query.node, plan.choice.grid
    if plan.unions.groups or plan.unions.lines or any(plan.distinct.values()):
        return None
    if not settled(node, grid):
        return None
    step = plan.query.step
    return (repr(node), step, len(grid.times), grid.precision, plan.choice.read_precision)


def place_of(plan: Plan) -> Hashable:
    grid = plan.choice.grid
    return (grid.times, grid.first, plan.last)


def inputs_of(plan: Plan, counts: Ints, sizes: Ints) -> Inputs:
    return Inputs(tuple(plan.found.values()), plan.ids, counts, sizes)


def reused(last: Remembered | None, plan: Plan, inputs: Inputs) -> Remembered | Taken | None:
    """What the remembered answer gives of ``plan``: itself (``Remembered``) for the very
    same times and counts, its first times (``Taken``) when only those read slices holding
    equal counts in both reads, or None."""
    if last is None:
        return None
    if last.place == place_of(plan) and last.inputs.same(inputs):
        return last
    return _taken(last, plan, inputs)


def _taken(last: Remembered, plan: Plan, inputs: Inputs) -> Taken | None:
    """The times both ask, moved on by whole steps (or not), that read only slices holding
    equal counts in both reads. A time reads the slices before the boundary it reads (a
    window only those after its start), so those times are a first run of the plan's."""
    step = plan.query.step
    if not step:
        return None
    grid = plan.choice.grid
    times, first, _ = cast(tuple[tuple[float, ...], int, int], last.place)
    p, asked = grid.precision, grid.times
    shift = round((asked[0] - times[0]) / step)
    if not 0 <= shift < len(asked) or times[shift:] != asked[: len(asked) - shift]:
        return None
    moved = grid.first - first
    if moved < 0 or moved % p or (moved and not _windows_only(plan)):
        return None
    equal = last.inputs.equal_from(inputs, moved // p)
    if equal is None:
        return None
    kept = min(len(asked) - shift, _reading_before(plan, grid, grid.first + equal * p))
    # (every time would mean counts differing past every window: a read holds none there)
    if not 0 < kept < len(asked):
        return None
    new = replace(grid, times=asked[kept:])
    return Taken(cast(Result, last.answer), shift, kept, new)


def _reading_before(plan: Plan, grid: Grid, boundary: int) -> int:
    """How many of ``grid``'s first times read no boundary past ``boundary`` (every
    selector's)."""
    offsets = {n.offset for n in walk(plan.query.node) if isinstance(n, VectorSelector)}
    counted = len(grid.times)
    for offset in offsets:
        reads = grid.reads(offset)
        past = (i for i, b in enumerate(reads) if b is None or b > boundary)
        counted = min(counted, next(past, len(reads)))
    return counted


def spliced(kind: str, taken: Taken, new: Result, steps: int) -> Result:
    """The times ``taken`` from the remembered answer, then the new times' answer
    (``kind``: the expression's type, scalar or vector)."""
    shift, kept = taken.shift, taken.kept
    if kind == "scalar":
        return as_scalar(taken.answer)[shift : shift + kept] + as_scalar(new)
    old, added = as_block(taken.answer, steps), as_block(new, steps - kept)
    rows: dict[object, int] = {}
    labels: list[Labels] = []
    for one in (old.labels, added.labels):
        for labelled in one:
            if rows.setdefault(key(labelled), len(rows)) == len(labels):
                labels.append(labelled)
    values = np.zeros((len(labels), steps))
    present = np.zeros((len(labels), steps), dtype=bool)
    at = np.array([rows[key(x)] for x in old.labels], dtype=np.int64)
    values[at, :kept] = old.values[:, shift : shift + kept]
    present[at, :kept] = old.present[:, shift : shift + kept]
    at = np.array([rows[key(x)] for x in added.labels], dtype=np.int64)
    values[at, kept:] = added.values
    present[at, kept:] = added.present
    seen = present.any(axis=1)  # a series with no sample left is not answered either way
    kept_labels = [labels[i] for i in np.flatnonzero(seen).tolist()]
    return Block(kept_labels, values[seen], present[seen])


def _windows_only(plan: Plan) -> bool:
    """Whether every selector is a range function's window (a difference of totals)."""
    nodes = walk(plan.query.node)
    windowed = {id(n.vector) for n in nodes if isinstance(n, MatrixSelector)}
    return all(id(n) in windowed for n in nodes if isinstance(n, VectorSelector))
