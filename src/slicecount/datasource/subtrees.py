"""Aggregations computed once for the queries that read the same slices. Pure.

The p50, p95 and p99 panels of a histogram differ only in the quantile: each aggregates
the same buckets with ``sum by (le, route) (rate(...[w]))``, the costly part. The lowest
aggregations of a query (those over selectors, with no aggregation below them) are
computed from a shared read once, remembered with it (``Reader.shared_results``) by their
text and grid, and handed to the engine ready for every query that has them, which only
copies them.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, MutableMapping, Sequence
from typing import Any

from slicecount.promql.ast import Aggregate, Node, VectorSelector, walk
from slicecount.promql.engine import Evaluator, as_vector
from slicecount.promql.values import Grid, Raw, Series


def lowest_aggregations(node: Node) -> list[Aggregate]:
    """The aggregations over selectors with no aggregation below them, in tree order."""
    out = []
    for item in walk(node):
        if isinstance(item, Aggregate):
            below = walk(item.expr)
            if not any(isinstance(b, Aggregate) for b in below) and any(
                isinstance(b, VectorSelector) for b in below
            ):
                out.append(item)
    return out


def ready(
    node: Node,
    grid: Grid,
    data: Mapping[VectorSelector, Sequence[Raw]],
    budget: int,
    shared: MutableMapping[Hashable, Any],
) -> tuple[dict[Node, list[Series]], int]:
    """The lowest aggregations of ``node`` on ``grid``, each from ``shared`` or computed
    (and put there), and the points computed (EvaluationError past ``budget``)."""
    out: dict[Node, list[Series]] = {}
    computed = 0
    for aggregate in lowest_aggregations(node):
        key = ("aggregation", repr(aggregate), grid)
        found = shared.get(key)
        if found is None:
            evaluator = Evaluator(grid, data, budget - computed)
            found = shared[key] = as_vector(evaluator.evaluate(aggregate))
            computed += evaluator.computed
        out[aggregate] = found
    return out, computed
