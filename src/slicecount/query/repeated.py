"""A query asked again, answered from its last answer (``reads/repeats.py`` holds them).

A plan's answer is remembered under its expression and how it reads (its step, the precision
of its grid and of its reads, how many times it asks), in its place: its grid's times and
first boundary. It is given again whole when the plan asks the same times over the same
slices and read equal counts. When the plan's times moved on by whole steps and slices (the
next step of a live refresh), the times both ask are taken from it and only the new ones are
computed, provided the slices both read hold equal counts and every selector is a window's
(a bare selector's total counts from the grid's first boundary, which moved with the times).

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


class Shifted(NamedTuple):
    """A remembered answer whose times from column ``shift`` on are still asked, and the
    grid of the new times alone, to be computed."""

    answer: Result
    shift: int
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


def whole(last: Remembered | None, plan: Plan, inputs: Inputs) -> Remembered | None:
    """The remembered answer of the very same times and slices, from equal counts."""
    if last is None or last.place != place_of(plan) or not last.inputs.same(inputs):
        return None
    return last


def shifted(last: Remembered | None, plan: Plan, inputs: Inputs) -> Shifted | None:
    """What the remembered answer gives of times moved on (``Shifted``), or None."""
    step = plan.query.step
    if last is None or not step or not _windows_only(plan):
        return None
    grid = plan.choice.grid
    times, first, _ = cast(tuple[tuple[float, ...], int, int], last.place)
    p, asked = grid.precision, grid.times
    shift = round((asked[0] - times[0]) / step)
    if not 0 < shift < len(asked) or times[shift:] != asked[: len(asked) - shift]:
        return None
    if (grid.first - first) % p:
        return None
    if not last.inputs.same_from(inputs, (grid.first - first) // p):
        return None
    new = replace(grid, times=asked[len(asked) - shift :])
    return Shifted(cast(Result, last.answer), shift, new)


def spliced(kind: str, kept: Result, shift: int, new: Result, steps: int) -> Result:
    """The kept answer's times from column ``shift`` on, then the new times' answer
    (``kind``: the expression's type, scalar or vector)."""
    if kind == "scalar":
        return as_scalar(kept)[shift:] + as_scalar(new)
    old, added = as_block(kept, steps), as_block(new, shift)
    rows: dict[object, int] = {}
    labels: list[Labels] = []
    for one in (old.labels, added.labels):
        for labelled in one:
            if rows.setdefault(key(labelled), len(rows)) == len(labels):
                labels.append(labelled)
    values = np.zeros((len(labels), steps))
    present = np.zeros((len(labels), steps), dtype=bool)
    at = np.array([rows[key(x)] for x in old.labels], dtype=np.int64)
    values[at, : steps - shift] = old.values[:, shift:]
    present[at, : steps - shift] = old.present[:, shift:]
    at = np.array([rows[key(x)] for x in added.labels], dtype=np.int64)
    values[at, steps - shift :] = added.values
    present[at, steps - shift :] = added.present
    seen = present.any(axis=1)  # a series with no sample left is not answered either way
    kept_labels = [labels[i] for i in np.flatnonzero(seen).tolist()]
    return Block(kept_labels, values[seen], present[seen])


def _windows_only(plan: Plan) -> bool:
    """Whether every selector is a range function's window (a difference of totals)."""
    nodes = walk(plan.query.node)
    windowed = {id(n.vector) for n in nodes if isinstance(n, MatrixSelector)}
    return all(id(n) in windowed for n in nodes if isinstance(n, VectorSelector))
