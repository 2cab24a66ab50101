"""Unique series (distinct values per slice) in a PromQL tree: which uses make sense, and which
slices each point reads. Pure.

A distinct count does not add up: two series (or two slices) may hold the same value, and a
sum of their counts counts it twice. So a selector's point is the distinct count of the
slices its step covers (their union), ``sum`` directly over a selector is the union of the
series it groups (computed by the store, handed to the engine ready), and whatever would add
distinct counts (``rate``, ``increase``, ``*_over_time`` across slices, ``sum`` of an
expression of them) is refused. Numbers made from them (``count``, ``max``, ``topk``,
arithmetic) are ordinary numbers.
"""

from __future__ import annotations

from collections.abc import Collection

from slicecount.errors import QueryError
from slicecount.promql.ast import (
    NAME_LABEL,
    Aggregate,
    Binary,
    Call,
    MatrixSelector,
    Node,
    Unary,
    VectorSelector,
    walk,
)
from slicecount.promql.typecheck import COMPARISONS
from slicecount.promql.values import Grid

KEEP_VALUES = frozenset(
    {"abs", "ceil", "floor", "round", "clamp", "clamp_min", "clamp_max", "label_replace"}
    | {"label_join", "sort", "sort_desc"}
)
"""Functions whose values are still their argument's distinct counts (so summing them is
as wrong as summing the counts)."""
KEEP_AGGREGATES = frozenset({"sum", "avg", "max", "min", "topk", "bottomk", "quantile"})
"""Aggregations whose values are still distinct counts (a union, or one member's count)."""

Window = tuple[int, ...]
"""The starts of the slices one point unions."""


def name_of(selector: VectorSelector) -> str:
    """The selector as an error names it: its metric name, or its matchers."""
    for m in selector.matchers:
        if m.label == NAME_LABEL and m.op == "=":
            return m.value
    return str(selector)


def check(
    node: Node, distinct: Collection[VectorSelector], mixed: Collection[VectorSelector] = ()
) -> None:
    """QueryError at the first use of unique series that would add distinct counts.
    ``distinct``: the selectors matching unique series; ``mixed``: those matching counters
    too."""
    for item in walk(node):
        if isinstance(item, MatrixSelector) and item.vector in distinct:
            raise QueryError(_over_time(item, _caller(node, item)))
        if not isinstance(item, Aggregate) or item.op != "sum":
            continue
        if isinstance(item.expr, VectorSelector) and item.expr in mixed:
            raise QueryError(
                f"sum over {name_of(item.expr)}, which matches unique series and counters: the "
                "unique ones sum as a union, the counters as a sum; select one kind"
            )
        if item.expr not in distinct and carries_counts(item.expr, distinct):
            names = ", ".join(sorted({name_of(s) for s in _selectors(item.expr, distinct)}))
            raise QueryError(
                f"sum over an expression of unique series ({names}): a sum of distinct counts "
                "counts a value seen in two series twice. Sum the selector itself (sum by "
                "(label) (name{...})): that is the union of the series"
            )


def _caller(root: Node, matrix: MatrixSelector) -> str:
    for item in walk(root):
        if isinstance(item, Call) and item.args and item.args[0] is matrix:
            return item.func
    return "a range"


def _over_time(matrix: MatrixSelector, func: str) -> str:
    name = name_of(matrix.vector)
    return (
        f"{func}() over unique series {name}: distinct counts do not add up across slices (a "
        "value seen in two slices would count twice), and a range selector reads them one "
        f"slice at a time. Query {name} itself: each point is the distinct count of the "
        "slices its step covers (their union)"
    )


def carries_counts(node: Node, distinct: Collection[VectorSelector]) -> bool:
    """Whether a node's values are (still) distinct counts of unique series."""
    if isinstance(node, VectorSelector):
        return node in distinct
    if isinstance(node, Unary):
        return carries_counts(node.expr, distinct)
    if isinstance(node, Call):
        return node.func in KEEP_VALUES and carries_counts(node.args[0], distinct)
    if isinstance(node, Aggregate):
        return node.op in KEEP_AGGREGATES and carries_counts(node.expr, distinct)
    if isinstance(node, Binary):
        if node.op in COMPARISONS and node.bool:
            return False  # 0 or 1
        if node.op in ("and", "unless"):
            return carries_counts(node.lhs, distinct)
        return carries_counts(node.lhs, distinct) or carries_counts(node.rhs, distinct)
    return False


def _selectors(node: Node, distinct: Collection[VectorSelector]) -> list[VectorSelector]:
    return [s for s in walk(node) if isinstance(s, VectorSelector) and s in distinct]


def unions(node: Node, distinct: Collection[VectorSelector]) -> list[Aggregate]:
    """The ``sum`` nodes directly over a unique selector: each is a union, read ready."""
    return [
        item
        for item in walk(node)
        if isinstance(item, Aggregate) and item.op == "sum" and item.expr in distinct
    ]


def windows(grid: Grid, offset: float, step: float | None) -> list[Window | None]:
    """For each evaluation time, the slices its point unions: those of the step (rounded to
    whole slices, at least one) ending with the slice holding ``t - offset``; None where they
    reach outside what is kept or ``t`` lies after now (as a counter's window)."""
    p = grid.precision
    span = grid.window(step) if step else p
    out: list[Window | None] = []
    for t in grid.times:
        a = grid.read_at(t, offset)
        if a is None or a - span < grid.oldest:
            out.append(None)
            continue
        end = a
        if a > grid.newest:
            if not (grid.partial and a - span < grid.newest):
                out.append(None)
                continue
            end = grid.newest  # the window holding now (Grid.partial): its slices so far
        out.append(tuple(range(a - span, end, p)))
    return out
