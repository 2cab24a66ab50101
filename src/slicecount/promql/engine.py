"""Evaluating a PromQL tree on a grid of times over exact running totals. Pure.

Selectors read the totals the datasource prepared (``data``, by selector); a unique series'
distinct counts, and the unions ``sum`` makes of them, come ready (``ready``, by selector or
sum node: see ``distinct``). Everything else follows Prometheus' semantics, except that
nothing is extrapolated: ``increase(c[d])`` at t is the sum of the counts of the d/p slices
that end with the one holding t (the range functions' kernels: ``windows``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from slicecount.promql import aggregation, binary, functions
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
)
from slicecount.promql.values import (
    EvaluationError,
    Grid,
    Raw,
    Series,
    Value,
    check_unique,
    without_name,
)
from slicecount.promql.windows import (
    WINDOW_FUNCTIONS,
    StridedWindows,
    dedupe,
    elapsed_rate,
    spread,
)

Result = list[float] | list[Series] | str
"""A scalar (a float per time), a vector (series), or a string."""


def as_scalar(result: Result) -> list[float]:
    """A result known (from the tree's type) to be a scalar."""
    if isinstance(result, str) or any(isinstance(v, Series) for v in result[:1]):
        raise TypeError("not a scalar")
    return cast("list[float]", result)


def as_vector(result: Result) -> list[Series]:
    """A result known (from the tree's type) to be a vector."""
    if isinstance(result, str) or any(not isinstance(v, Series) for v in result[:1]):
        raise TypeError("not a vector")
    return cast("list[Series]", result)


class Evaluator:
    """Evaluates trees on one grid; counts the points it computes against ``max_points``."""

    def __init__(
        self,
        grid: Grid,
        data: Mapping[VectorSelector, Sequence[Raw]],
        max_points: int,
        ready: Mapping[Node, Sequence[Series]] | None = None,
    ) -> None:
        self.grid = grid
        self.data = data
        self.max_points = max_points
        self.ready = ready or {}
        self.computed = 0

    def charge(self, result: Result) -> Result:
        """Count what a node computed: every series (a scalar counts as one) x every time."""
        if not isinstance(result, str):
            lines = len(result) if result and isinstance(result[0], Series) else 1
            self.computed += lines * len(self.grid.times)
            if self.computed > self.max_points:
                raise EvaluationError(
                    f"the query computes more than {self.max_points:,} points in its functions "
                    "and operators (max_computed_points): match fewer series, use fewer "
                    "operators or shorten the range"
                )
        return result

    def scalar(self, node: Node) -> list[float]:
        return as_scalar(self.evaluate(node))

    def vector(self, node: Node) -> list[Series]:
        return as_vector(self.evaluate(node))

    def evaluate(self, node: Node) -> Result:
        return self.charge(self._evaluate(node))

    def _evaluate(self, node: Node) -> Result:
        if isinstance(node, NumberLiteral):
            return [node.value] * len(self.grid.times)
        if isinstance(node, StringLiteral):
            return node.value
        if isinstance(node, VectorSelector):
            return self.instant(node) + self.given(node)
        if isinstance(node, MatrixSelector):
            raise EvaluationError("a range vector can only be the argument of a function")
        if isinstance(node, Unary):
            return self.negate(node)
        if isinstance(node, Call):
            return self.call(node)
        if isinstance(node, Aggregate) and node in self.ready:
            return self.given(node)  # a sum of unique series: their union, read by the store
        if isinstance(node, Aggregate):
            param = self.scalar(node.param) if node.param is not None else None
            return aggregation.aggregate(node, param, self.vector(node.expr))
        return self.binary(node)

    def negate(self, node: Unary) -> Result:
        if node.expr.type == "scalar":
            return [-v for v in self.scalar(node.expr)]
        return check_unique(
            [
                Series(without_name(s.labels), [None if v is None else -v for v in s.values])
                for s in self.vector(node.expr)
            ]
        )

    def binary(self, node: Binary) -> Result:
        lhs, rhs = self.evaluate(node.lhs), self.evaluate(node.rhs)
        if node.lhs.type == "scalar" and node.rhs.type == "scalar":
            return binary.scalars(node.op, lhs, rhs)  # type: ignore[arg-type]
        if node.matching is None:
            swap = node.lhs.type == "scalar"
            vector, number = (rhs, lhs) if swap else (lhs, rhs)
            return binary.with_scalar(node.op, vector, number, swap, node.bool)  # type: ignore[arg-type]
        return binary.vectors(node, lhs, rhs)  # type: ignore[arg-type]

    def call(self, node: Call) -> Result:
        name, args = node.func, node.args
        if isinstance(args[0] if args else None, MatrixSelector):
            return self.over_window(name, args[0])  # type: ignore[arg-type]
        if name == "time":
            return [float(t) for t in self.grid.times]
        if name == "vector":
            return [Series({}, list[Value](self.scalar(args[0])))]
        if name == "scalar":
            return functions.scalar(self.vector(args[0]), len(self.grid.times))
        if name == "histogram_quantile":
            return functions.histogram_quantile(self.scalar(args[0]), self.vector(args[1]))
        if name == "absent":
            return functions.absent(args[0], self.vector(args[0]), len(self.grid.times))
        if name == "timestamp":
            # a selector's sample is its total at t - offset; anything else is dated t
            shift = args[0].offset if isinstance(args[0], VectorSelector) else 0.0
            times = [t - shift for t in self.grid.times]
            return functions.timestamp(self.vector(args[0]), times)
        rest = [self.evaluate(arg) for arg in args[1:]]
        return functions.call(name, self.vector(args[0]), rest)

    # -- selectors --------------------------------------------------------------------------

    def given(self, node: Node) -> list[Series]:
        """The ready series of a node, copied: operators may change a series in place."""
        return [Series(s.labels, list(s.values)) for s in self.ready.get(node, ())]

    def instant(self, node: VectorSelector) -> list[Series]:
        """Each series' running total at every time (the slice holding t included)."""
        grid = self.grid
        p, first, oldest, newest = grid.precision, grid.first, grid.oldest, grid.newest
        reads = [
            (a - first) // p if a is not None and oldest < a <= newest else None
            for a in grid.reads(node.offset)
        ]
        distinct, where = dedupe(reads)
        out = []
        for raw in self.data[node]:
            totals, scale = raw.totals, raw.scale
            found = [totals[i] * scale if i < len(totals) else None for i in distinct]
            out.append(Series(raw.labels, spread(found, where)))
        return out

    def over_window(self, name: str, node: MatrixSelector) -> list[Series]:
        """A range function over each series' window ``(t - d, t]``, d rounded to slices.
        Times that read the same slices (a step finer than the precision) share one value."""
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
        distinct, where = dedupe(windows)
        compute = WINDOW_FUNCTIONS[name]
        if name == "rate" and grid.partial and not node.range:
            compute = elapsed_rate(grid)  # one slice (x[0]): no dip at the right edge
        keep_name = name == "last_over_time"
        out = []
        inside_of: dict[int, StridedWindows] = {}  # series read alike share their windows
        direct = where == list(range(len(distinct)))  # a value per time, in order: no spreading
        for raw in self.data[node.vector]:
            scale = 1.0 if name == "count_over_time" else raw.scale
            size = len(raw.counts) + 1 if raw.counts is not None else len(raw.totals)
            inside = inside_of.get(size)
            if inside is None:
                inside = inside_of[size] = StridedWindows([w for w in distinct if w[1] < size])
            found: list[Value]
            if name == "increase" and scale == 1.0 and inside.each_slice and raw.counts:
                found = list(raw.counts[inside.bounds[0]])  # type: ignore[index]  # each_slice
            else:
                found = compute(raw.totals, inside, span, p, scale)  # type: ignore[assignment]
            found += [None] * (len(distinct) - len(inside))  # windows past what was read
            values = found if direct else spread(found, where)
            out.append(Series(raw.labels if keep_name else without_name(raw.labels), values))
        return check_unique(out)


def evaluate(
    node: Node,
    grid: Grid,
    data: Mapping[VectorSelector, Sequence[Raw]],
    max_points: int = 2_000_000,
    ready: Mapping[Node, Sequence[Series]] | None = None,
) -> Result:
    """The value of ``node`` at every time of ``grid``."""
    return Evaluator(grid, data, max_points, ready).evaluate(node)
