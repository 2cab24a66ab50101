"""``sum avg count min max group`` with ``by``/``without`` on arrays: every group and time at
once (the other aggregations run ``aggregation``'s loop on the block's series). Pure.

Sums are exact: integer values (counts) add exactly in float64 below 2**53, and other floats
are summed with the error of every addition kept (``arrays.pairwise_sums``), which is what
``math.fsum`` gives. A group or time whose result is not finite (an overflow, infinities) is
computed again by ``aggregation``'s loop, whose answer for it Prometheus' tests pin down.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from slicecount.core.memo import remembered
from slicecount.errors import extra_imports
from slicecount.promql import aggregation
from slicecount.promql.arrays import Block, Floats, Ints, Mask, Sums, exact_sums, pairwise_sums
from slicecount.promql.ast import Aggregate
from slicecount.promql.values import Labels, key

with extra_imports("datasource", "the PromQL engine of the datasource"):
    import numpy as np

A = TypeVar("A", Floats, Mask)
VECTORISED = frozenset({"sum", "avg", "count", "min", "max", "group"})
HUGE = 2.0**1022
"""Sums whose terms add up to this or more are the loop's (fsum overflows before them)."""
EXACT_INTEGERS = 2.0**52
"""Below this, a sum of integer floats is exact in any order (with room for the column
totals that bound it)."""


class Groups:
    """Which group each series of a block falls in (first-seen order, as the loop's)."""

    def __init__(self, node: Aggregate, labels: Sequence[Labels]) -> None:
        index: dict[object, int] = {}
        self.labels: list[Labels] = []
        of: list[int] = []
        by = node.grouping if not node.without else None
        for member in labels:
            # ``by``: the grouping labels' values name the group (a missing label as ""),
            # cheaper than the group's labels, made once per group
            name = tuple([member.get(k, "") for k in by]) if by is not None else None
            found = index.get(name, -1) if name is not None else -1
            if found < 0:
                grouped = aggregation.grouped(member, node.grouping, node.without)
                found = index.setdefault(name if name is not None else key(grouped), len(index))
                if found == len(self.labels):
                    self.labels.append(grouped)
            of.append(found)
        self.of: Ints = np.array(of, dtype=np.int64)
        self.order: Ints = np.argsort(self.of, kind="stable")
        self.sizes: Ints = np.bincount(self.of, minlength=len(self.labels))
        self.starts: Ints = np.concatenate(([0], np.cumsum(self.sizes)[:-1])).astype(np.int64)

    def reduce(self, ufunc: np.ufunc, values: A) -> A:
        """``ufunc`` over the members of each group, rows sorted by group."""
        if not len(self.labels):
            return np.zeros((0, values.shape[1]), dtype=values.dtype)
        rows = np.take(values, self.order, axis=0)  # (twice as fast as values[self.order])
        result: A = ufunc.reduceat(rows, self.starts, axis=0)
        return result

    def padded(self, values: Floats) -> Floats | None:
        """groups x largest group x times: each group's members, then zeros; None when the
        groups are so uneven that the zeros would outweigh the values."""
        largest = int(self.sizes.max(initial=0))
        if len(self.labels) * largest > 2 * len(self.of) + 16:
            return None
        out = np.zeros((len(self.labels), largest, values.shape[1]))
        rank = np.arange(len(self.of)) - np.repeat(self.starts, self.sizes)
        out[self.of[self.order], rank] = values[self.order]
        return out

    def ranks(self) -> Iterator[tuple[Ints, Ints]]:
        """(members, their groups): each group's first members, then its second ..."""
        rank = np.empty_like(self.of)
        rank[self.order] = np.arange(len(self.of)) - np.repeat(self.starts, self.sizes)
        for r in range(int(rank.max(initial=-1)) + 1):
            members = np.flatnonzero(rank == r)
            yield members, self.of[members]


def aggregate(node: Aggregate, block: Block) -> Block:
    """``node`` (an op of VECTORISED) over ``block``."""
    groups = remembered(
        ("groups", node.grouping, node.without), block.labels, lambda: Groups(node, block.labels)
    )
    present = block.present
    if node.op in ("count", "avg"):
        counts = groups.reduce(np.add, present.astype(np.float64))
        found = counts > 0
    else:  # only whether a group has a sample: a byte a cell, not a float
        found = groups.reduce(np.logical_or, present)
    shape = (len(groups.labels), block.steps)
    op = node.op
    doubt = np.zeros(shape, dtype=bool)
    with np.errstate(invalid="ignore", over="ignore"):
        if op in ("count", "group"):
            values = counts if op == "count" else np.ones(shape)
        elif op in ("max", "min"):
            gaps = np.where(present, block.values, np.nan)
            values = groups.reduce(np.fmax if op == "max" else np.fmin, gaps)
            # which zero wins is the loop's (the first seen): only where a -0 takes part
            negative_zero = groups.reduce(np.logical_or, (gaps == 0) & np.signbit(gaps))
            doubt = (values == 0) & negative_zero
        else:
            values, doubt = _sums(groups, block, shape)
            if op == "avg":
                values = values / np.where(found, counts, 1.0)
    if op in ("sum", "avg"):
        doubt |= ~np.isfinite(values)
    values = _again(node, block, groups, values, found & doubt)
    return Block(list(groups.labels), np.where(found, values, 0.0), found)


def _sums(groups: Groups, block: Block, shape: tuple[int, int]) -> Sums:
    values = np.where(block.present, block.values, 0.0)
    busy = np.flatnonzero(np.any(values != 0, axis=0))  # NaN counts as busy
    if 2 * len(busy) >= shape[1]:
        return _busy_sums(groups, values, shape)
    # the times where every value is 0 sum to 0 (fsum's too): the rest are summed alone (a
    # 24 h panel of a service 2 h old: 1 time in 12)
    sums, doubt = np.zeros(shape), np.zeros(shape, dtype=bool)
    if len(busy):
        sums[:, busy], doubt[:, busy] = _busy_sums(groups, values[:, busy], (shape[0], len(busy)))
    return sums, doubt


def _busy_sums(groups: Groups, values: Floats, shape: tuple[int, int]) -> Sums:
    magnitude = np.abs(values).sum(axis=0)
    if np.all(magnitude < EXACT_INTEGERS) and np.array_equal(values, np.trunc(values)):
        exact = groups.reduce(np.add, values) + 0.0  # in any order; -0 is 0, as fsum's
        return exact, np.zeros(shape, dtype=bool)
    padded = groups.padded(values)
    if padded is not None:
        sums, doubt = pairwise_sums(padded)
    else:
        ranks = ((of, values[members]) for members, of in groups.ranks())
        sums, doubt = exact_sums(ranks, shape)
    if magnitude.max(initial=0.0) < HUGE:  # no group's terms can add up to it
        return sums, doubt
    with np.errstate(over="ignore"):  # near the largest float, fsum's partials overflow
        return sums, doubt | (groups.reduce(np.add, np.abs(values)) >= HUGE)


Combine = Callable[[Sequence[float]], float]


def _again(node: Aggregate, block: Block, groups: Groups, values: Floats, cells: Mask) -> Floats:
    """``cells`` computed by the loop: results that are not finite (overflows, infinities),
    or sums the compensation may have rounded the other way."""
    odd = np.argwhere(cells)
    if not len(odd):
        return values
    values = values.copy()
    combine: Combine = aggregation.COMBINE[node.op]
    members = [np.flatnonzero(groups.of == g) for g in range(len(groups.labels))]
    for g, t in odd.tolist():
        rows = members[g][block.present[members[g], t]]
        values[g, t] = combine(block.values[rows, t].tolist())
    return values
