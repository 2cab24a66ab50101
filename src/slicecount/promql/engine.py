"""Evaluating a PromQL tree on a grid of times over exact running totals. Pure.

Selectors read the totals the datasource prepared (``data``, by selector: a ``Table`` of
arrays, or ``Raw`` series one by one); a unique series' distinct counts, and the unions ``sum``
makes of them, come ready (``ready``, by selector or sum node: see ``distinct``). Everything
else follows Prometheus' semantics, except that nothing is extrapolated: ``increase(c[d])``
at t is the sum of the counts of the d/p slices that end with the one holding t (the range
functions' kernels: ``windows``).

A vector is a ``Block`` (series x times arrays): selectors, range functions, the common
aggregations, ``histogram_quantile`` and arithmetic are computed on arrays (``windows``,
``groups``, ``buckets``, ``pointwise``); the rest runs its loop on the block's series.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from slicecount.errors import extra_imports
from slicecount.promql import aggregation, binary, buckets, functions, groups, pointwise
from slicecount.promql.arrays import Block, Table, check_unique, concat
from slicecount.promql.ast import (
    Aggregate,
    Binary,
    Call,
    MatrixSelector,
    Node,
    NumberLiteral,
    StringLiteral,
    Unary,
    VectorSelector,
    walk,
)
from slicecount.promql.values import EvaluationError, Grid, Raw, Series, Value, nameless
from slicecount.promql.windows import KERNELS, elapsed_rate, instant, over_windows

with extra_imports("datasource", "the PromQL engine of the datasource"):
    import numpy as np

Result = list[float] | Block | list[Series] | str
"""A scalar (a float per time), a vector (a block, or series), or a string."""
Data = Mapping[VectorSelector, Sequence[Raw] | Table]
"""The stored series each selector reads."""


def as_scalar(result: Result) -> list[float]:
    """A result known (from the tree's type) to be a scalar."""
    if isinstance(result, (str, Block)) or any(isinstance(v, Series) for v in result[:1]):
        raise TypeError("not a scalar")
    return cast("list[float]", result)


def as_block(result: Result, steps: int) -> Block:
    """A result known (from the tree's type) to be a vector, as arrays."""
    if isinstance(result, Block):
        return result
    if isinstance(result, str) or any(not isinstance(v, Series) for v in result[:1]):
        raise TypeError("not a vector")
    return Block.of(cast("list[Series]", result), steps)


def as_vector(result: Result) -> list[Series]:
    """A result known (from the tree's type) to be a vector, as series."""
    if isinstance(result, Block):
        return result.series()
    if isinstance(result, str) or any(not isinstance(v, Series) for v in result[:1]):
        raise TypeError("not a vector")
    return cast("list[Series]", result)


class Evaluator:
    """Evaluates trees on one grid; counts the points it computes against ``max_points``."""

    def __init__(
        self,
        grid: Grid,
        data: Data,
        max_points: int,
        ready: Mapping[Node, Sequence[Series]] | None = None,
    ) -> None:
        self.grid = grid
        self.data = data
        self.max_points = max_points
        self.ready = ready or {}
        self.computed = 0
        self.steps = len(grid.times)
        self._tables: dict[VectorSelector, Table] = {}

    def charge(self, result: Result) -> Result:
        """Count what a node computed: every series (a scalar counts as one) x every time."""
        if not isinstance(result, str):
            vector = isinstance(result, Block) or (result and isinstance(result[0], Series))
            lines = len(result) if vector and len(result) else 1
            self.computed += lines * self.steps
            if self.computed > self.max_points:
                raise EvaluationError(
                    f"the query computes more than {self.max_points:,} points in its functions "
                    "and operators (max_computed_points): match fewer series, use fewer "
                    "operators or shorten the range"
                )
        return result

    def scalar(self, node: Node) -> list[float]:
        return as_scalar(self.evaluate(node))

    def vector(self, node: Node) -> Block:
        return as_block(self.evaluate(node), self.steps)

    def series(self, node: Node) -> list[Series]:
        """A vector's series as lists, for the operations that loop over them."""
        return self.vector(node).series()

    def evaluate(self, node: Node) -> Result:
        return self.charge(self._evaluate(node))

    def _evaluate(self, node: Node) -> Result:
        if isinstance(node, NumberLiteral):
            return [node.value] * self.steps
        if isinstance(node, StringLiteral):
            return node.value
        if isinstance(node, VectorSelector):
            return concat([self.instant(node), self.given(node)], self.steps)
        if isinstance(node, MatrixSelector):
            raise EvaluationError("a range vector can only be the argument of a function")
        if isinstance(node, Unary):
            if node.expr.type == "scalar":
                return [-v for v in self.scalar(node.expr)]
            return pointwise.negate(self.vector(node.expr))
        if isinstance(node, Call):
            return self.call(node)
        if isinstance(node, Aggregate) and node in self.ready:
            return self.given(node)  # a sum of unique series: their union, read by the store
        if isinstance(node, Aggregate):
            return self.aggregate(node)
        return self.binary(node)

    def aggregate(self, node: Aggregate) -> Block:
        param = self.scalar(node.param) if node.param is not None else None
        vector = self.vector(node.expr)
        if node.op in groups.VECTORISED:
            return groups.aggregate(node, vector)
        return Block.of(aggregation.aggregate(node, param, vector.series()), self.steps)

    def binary(self, node: Binary) -> Result:
        lhs, rhs = self.evaluate(node.lhs), self.evaluate(node.rhs)
        if node.lhs.type == "scalar" and node.rhs.type == "scalar":
            return binary.scalars(node.op, as_scalar(lhs), as_scalar(rhs))
        if node.matching is None:
            swap = node.lhs.type == "scalar"
            vector, number = (rhs, lhs) if swap else (lhs, rhs)
            block = as_block(vector, self.steps)
            return pointwise.with_scalar(node.op, block, as_scalar(number), swap, node.bool)
        left, right = as_block(lhs, self.steps), as_block(rhs, self.steps)
        found = pointwise.vectors(node, left, right)
        if found is not None:
            return found
        return Block.of(binary.vectors(node, left.series(), right.series()), self.steps)

    def call(self, node: Call) -> Result:
        name, args = node.func, node.args
        if isinstance(args[0] if args else None, MatrixSelector):
            return self.over_window(name, args[0])  # type: ignore[arg-type]
        if name == "time":
            return [float(t) for t in self.grid.times]
        if name == "vector":
            return [Series({}, list[Value](self.scalar(args[0])))]
        if name == "scalar":
            return functions.scalar(self.series(args[0]), self.steps)
        if name == "histogram_quantile":
            return buckets.histogram_quantile(self.scalar(args[0]), self.vector(args[1]))
        if name == "absent":
            return functions.absent(args[0], self.series(args[0]), self.steps)
        if name == "timestamp":
            # a selector's sample is its total at t - offset; anything else is dated t
            shift = args[0].offset if isinstance(args[0], VectorSelector) else 0.0
            times = [t - shift for t in self.grid.times]
            return functions.timestamp(self.series(args[0]), times)
        rest = [self.evaluate(arg) for arg in args[1:]]
        return functions.call(name, self.series(args[0]), rest)

    # -- selectors --------------------------------------------------------------------------

    def table(self, node: VectorSelector) -> Table:
        found = self.data[node]
        if isinstance(found, Table):
            return found
        table = self._tables.get(node)
        if table is None:
            table = self._tables[node] = Table.of_raws(found)
        return table

    def given(self, node: Node) -> Block:
        """The ready series of a node (copied into arrays: operators never change them)."""
        return Block.of(self.ready.get(node, ()), self.steps)

    def instant(self, node: VectorSelector) -> Block:
        """Each series' running total at every time (the slice holding t included)."""
        grid = self.grid
        p, first, oldest, newest = grid.precision, grid.first, grid.oldest, grid.newest
        reads = [
            (a - first) // p if a is not None and oldest < a <= newest else -1
            for a in grid.reads(node.offset)
        ]
        table = self.table(node)
        index = np.array(reads, dtype=np.int64)
        return instant(table, index, index >= 0, table.labels)

    def over_window(self, name: str, node: MatrixSelector) -> Block:
        """A range function over each series' window ``(t - d, t]``, d rounded to slices."""
        grid = self.grid
        p, first, oldest, newest = grid.precision, grid.first, grid.oldest, grid.newest
        span = grid.window(node.range)
        partial = grid.partial
        windows = [
            None
            if a is None or a - span < oldest
            else ((a - span - first) // p, (a - first) // p)
            if a <= newest
            else ((a - span - first) // p, (newest - first) // p)  # holding now: so far
            if partial and a - span < newest
            else None
            for a in grid.reads(node.vector.offset)
        ]
        valid = np.array([w is not None for w in windows], dtype=bool)
        starts = np.array([w[0] if w else 0 for w in windows], dtype=np.int64)
        ends = np.array([w[1] if w else 0 for w in windows], dtype=np.int64)
        kernel = KERNELS[name]
        if name == "rate" and partial and not node.range:
            kernel = elapsed_rate(grid)  # one slice (x[0]): no dip at the right edge
        table = self.table(node.vector)
        if name == "count_over_time":  # counts samples: no scale
            table = Table(table.labels, table.totals, table.sizes, np.ones(len(table.labels)))
        values, present = over_windows(table, kernel, starts, ends, valid, span, p)
        keep_name = name == "last_over_time"
        labels = table.labels if keep_name else nameless(table.labels)
        return check_unique(Block(labels, values, present))


def settled(node: Node, grid: Grid) -> bool:
    """Whether the value of ``node`` on ``grid`` leaves its now out: every time reads a
    boundary no later than now's (``Grid.newest``, no time past now) and every window lies
    inside retention (``Grid.oldest``), as ``instant`` and ``over_window`` decide. Then any
    grid of the same times and first boundary that settles it too gives the same value from
    the same counts (``query/repeated.py``): a range query Grafana aligned to its step, until
    retention reaches its start. A partial grid (the simPod targets) counts the slice holding
    now as it stands: never."""
    if grid.partial:
        return False
    reach: list[tuple[float, int]] = []  # (offset, window) of every selector
    for item in walk(node):
        if isinstance(item, MatrixSelector):
            reach.append((item.vector.offset, grid.window(item.range)))
        elif isinstance(item, VectorSelector):
            reach.append((item.offset, 0))
    for offset, span in reach:
        reads = grid.reads(offset)
        if None in reads:
            return False
        boundaries = cast("list[int]", reads)
        if max(boundaries) > grid.newest or min(boundaries) - span < grid.oldest:
            return False
        if not span and min(boundaries) <= grid.oldest:
            return False
    return True


def evaluate(
    node: Node,
    grid: Grid,
    data: Data,
    max_points: int = 2_000_000,
    ready: Mapping[Node, Sequence[Series]] | None = None,
) -> Result:
    """The value of ``node`` at every time of ``grid``."""
    return Evaluator(grid, data, max_points, ready).evaluate(node)
