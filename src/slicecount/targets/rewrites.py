"""The targets' tree rewrites and the questions put to a parsed target. Pure.

What makes a target's tree differ from the same PromQL's: a bare selector is the count of a
point's slices (``one_slice``), ``rate(x)`` without a window is each selector's rate over that
window (``per_second``), ``histogram_quantile`` keeps ``le`` through every aggregation
(``buckets``), and a lone unlabelled series applies to each series of the other side
(``conveniences``). The grammar that builds the tree is ``grammar``; the protocol and the
endpoints edit a parsed tree (``with_matchers``) and ask it things (``quantile_of``,
``reads_unique``) here.
"""

from __future__ import annotations

from dataclasses import replace

from slicecount.errors import QueryError
from slicecount.promql.ast import (
    NAME_LABEL,
    Aggregate,
    Binary,
    Call,
    Matcher,
    Matching,
    MatrixSelector,
    Node,
    NumberLiteral,
    Unary,
    VectorSelector,
    walk,
)

LE = "le"


def one_slice(node: Node) -> MatrixSelector | None:
    """The window of a bare selector (``increase(x[0])``) or of a unique one, else None."""
    if isinstance(node, VectorSelector):
        return MatrixSelector(node, 0.0)
    if isinstance(node, Call) and node.func == "increase" and _is_window(node.args[0]):
        return node.args[0]  # type: ignore[return-value]
    return None


def _is_window(node: Node) -> bool:
    return isinstance(node, MatrixSelector) and node.range == 0


def per_second(node: Node) -> Node:
    """``rate`` of an expression of bare selectors: each selector's rate over a point's
    window, through the aggregations and the numbers that commute with it."""
    window = one_slice(node)
    if window is not None:
        return Call("rate", (window,))
    if isinstance(node, Aggregate) and node.op in ("sum", "avg", "max", "min"):
        return replace(node, expr=per_second(node.expr))
    if isinstance(node, Binary) and node.op in ("*", "/") and node.rhs.type == "scalar":
        return replace(node, lhs=per_second(node.lhs))
    if isinstance(node, Binary) and node.op == "*" and node.lhs.type == "scalar":
        return replace(node, rhs=per_second(node.rhs))
    raise QueryError(
        "rate() without a window takes a metric or sum/avg/max/min of metrics, such as "
        "rate(http.requests) or sum(rate(http.requests)); give any other a window: rate(x[5m])"
    )


def buckets(node: Node) -> Node:
    """A histogram_quantile argument with ``le`` kept by every aggregation over the buckets
    (``sum by (route) (h)`` is ``sum by (route, le) (h)``)."""
    if isinstance(node, Aggregate) and not node.without and node.op not in ("topk", "bottomk"):
        grouping = node.grouping if LE in node.grouping else (*node.grouping, LE)
        return replace(node, grouping=grouping, expr=buckets(node.expr))
    if isinstance(node, Binary):
        return replace(node, lhs=buckets(node.lhs), rhs=buckets(node.rhs))
    return node


def lone(node: Node) -> bool:
    """Whether a vector node yields one series without labels (``sum(x)``, ``sum(x) * 2``)."""
    if isinstance(node, Aggregate):
        return not node.grouping and not node.without and node.op not in ("topk", "bottomk")
    if isinstance(node, Binary) and node.matching is None:  # a vector and a number
        return lone(node.lhs if node.lhs.type == "vector" else node.rhs)
    return isinstance(node, Call) and node.func in ("vector", "abs", "ceil", "floor", "round")


def conveniences(node: Node) -> Node:
    """The tree with ``le`` kept under every histogram_quantile, and every lone unlabelled
    series applied to each series of the other side."""
    if isinstance(node, Binary):
        return _broadcast(replace(node, lhs=conveniences(node.lhs), rhs=conveniences(node.rhs)))
    if isinstance(node, Call):
        args = [conveniences(arg) for arg in node.args]
        if node.func == "histogram_quantile":
            args[1] = buckets(args[1])
        return replace(node, args=tuple(args))
    if isinstance(node, Aggregate | Unary):
        return replace(node, expr=conveniences(node.expr))
    return node


def _broadcast(node: Binary) -> Node:
    """A lone unlabelled series against a labelled vector applies to each of its series."""
    if node.matching is None:
        return node
    m = node.matching
    if m.on or m.labels or m.card != "one-to-one" or node.op in ("and", "or", "unless"):
        return node
    left, right = lone(node.lhs), lone(node.rhs)
    if right and not left:
        return replace(node, matching=Matching("many-to-one", on=True))
    if left and not right:
        return replace(node, matching=Matching("one-to-many", on=True))
    return node


def quantile_of(node: Node) -> float | None:
    """q of a target that is ``histogram_quantile(q, ...)`` with a number (its legend's)."""
    if isinstance(node, Call) and node.func == "histogram_quantile":
        q = node.args[0]
        return q.value if isinstance(q, NumberLiteral) else None
    return None


def with_matchers(node: Node, extra: tuple[Matcher, ...]) -> Node:
    """The same tree with ``extra`` matchers added to every selector (the builder's label
    filters, ad-hoc filters)."""
    if not extra:
        return node
    if isinstance(node, VectorSelector):
        return replace(node, matchers=node.matchers + extra)
    if isinstance(node, MatrixSelector):
        return replace(node, vector=replace(node.vector, matchers=node.vector.matchers + extra))
    if isinstance(node, Binary):
        return replace(node, lhs=with_matchers(node.lhs, extra), rhs=with_matchers(node.rhs, extra))
    if isinstance(node, Call):
        return replace(node, args=tuple(with_matchers(arg, extra) for arg in node.args))
    if isinstance(node, Aggregate | Unary):
        return replace(node, expr=with_matchers(node.expr, extra))
    return node


def reads_unique(node: Node) -> bool:
    """Whether a target reads unique series (``unique(...)`` anywhere in it)."""
    return any(
        m.label == NAME_LABEL and m.value.startswith(("unique(", "unique\\("))
        for item in walk(node)
        if isinstance(item, VectorSelector)
        for m in item.matchers
    )
