"""The work of a /query, known once its series are discovered and before any slice is read.
Pure.

Each limit in ``Limits`` bounds one size (targets, series, points per series); the work budget
bounds their product over the whole request. Two figures, each with its own limit:

- points read: series x points per series, summed over the selectors of every target (what
  Redis sends and the answer may show);
- points computed: for each function and operator, the series it goes through x points per
  series (``x * 1 * 1 * ...`` reads little but computes much).

The counts are upper bounds (an operator is charged for the larger side it may match), so a
request that passes the check can never do more.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from slicecount.datasource.evaluate import Fetch
from slicecount.datasource.limits import LimitExceeded, Limits
from slicecount.datasource.nodes import Binary, Node, Quantile, Scalar, Selector
from slicecount.datasource.plan import Chosen, SeriesQuery


@dataclass(frozen=True)
class Work:
    """What a request (or one target) reads and computes, in points."""

    read: int = 0
    computed: int = 0

    @property
    def points(self) -> int:
        return self.read + self.computed

    def __add__(self, other: Work) -> Work:
        return Work(self.read + other.read, self.computed + other.computed)


def work_of(query: SeriesQuery, chosen: Chosen) -> Work:
    """The work of one target, given the series each of its selectors matched."""
    points = len(query.timeline.starts)
    matched = {fetch: len(found) for fetch, found in chosen.items()}
    read = sum(matched.get(fetch, 0) for fetch in query.fetches)
    _, computed = _series(query.node, matched, False)
    return Work(read * points, computed * points)


def _series(node: Node, matched: Mapping[Fetch, int], histogram: bool) -> tuple[int, int]:
    """(series the node yields at most, series its operators go through) — the histogram
    flag travels down as in ``evaluate``. Recursion is bounded by ``query.MAX_DEPTH``."""
    if isinstance(node, Selector):
        return matched.get(Fetch(node, histogram), 0), 0
    if isinstance(node, Scalar):
        return 1, 1
    if isinstance(node, Binary):
        left, left_work = _series(node.left, matched, histogram)
        right, right_work = _series(node.right, matched, histogram)
        out = max(left, right)
        return out, left_work + right_work + out
    arg, arg_work = _series(node.arg, matched, histogram or isinstance(node, Quantile))
    return arg, arg_work + arg  # rate, aggregations and quantiles go through every input


def check_work(work: Mapping[SeriesQuery, Work], limits: Limits) -> Work:
    """The request's total work; LimitExceeded naming the figure, its biggest target and the
    limit when it is over budget."""
    total = sum(work.values(), Work())
    if total.read > limits.max_request_points:
        query = max(work, key=lambda q: work[q].read)
        raise LimitExceeded(
            f"the query reads {total.read:,} points (series x points per series, summed over "
            f"its targets; target {query.target.ref_id or query.target.text[:40]!r}: "
            f"{_shape(query, work[query].read)}), more than the work budget "
            f"max_request_points = {limits.max_request_points:,}: shorten the range, pick a "
            "coarser precision or match fewer series"
        )
    if total.computed > limits.max_computed_points:
        raise LimitExceeded(
            f"the query computes {total.computed:,} points in its functions and operators, "
            f"more than the limit max_computed_points = {limits.max_computed_points:,}: "
            "use fewer operators or match fewer series"
        )
    return total


def _shape(query: SeriesQuery, read: int) -> str:
    points = len(query.timeline.starts)
    series = read // points if points else 0
    return f"{series:,} series x {points:,} points at precision {query.timeline.precision} s"
