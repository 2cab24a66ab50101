"""What a request is charged against the limits (``config/request_limits.py``): the points it
reads, checked before anything is read; the points it computes, charged as it is evaluated;
the points its answer carries, checked before anything is encoded. Each breach is a
``LimitExceeded`` (or the engine's ``EvaluationError``) whose message names the figures. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from slicecount.config.request_limits import Limits
from slicecount.errors import LimitExceeded
from slicecount.promql.values import EvaluationError
from slicecount.query.planning import Plan

POINT_BYTES = 20
"""Bytes of JSON a point of an answer takes (``[12,1800000000000],``): what a series' labels
are charged as, in points."""

POINTS_PER_FIELD = {"book": 1, "blocks": 8}
"""Points of a counter read for the cost of one hash field (the book's HMGET of a slice,
0.4 to 0.8 us): the blocks layout reads a span of a series' block (the GETRANGE of its
frames, decoded in bulk) at 0.07 to 0.18 us a point (1 211 series of 2 hours of traffic:
10 090 slices of 60 s in 0.83 s, 8.9 s as hash fields)."""


def check_reads(plans: Sequence[Plan], limits: Limits, layout: str) -> None:
    """LimitExceeded when a query reads too many series, or the request too many points."""
    for plan in plans:
        if plan.series > limits.max_series:
            raise LimitExceeded(
                f"the query matches {plan.series:,} stored series, more than "
                f"{limits.max_series} series (max_series, the limit of {limits.max_series}): "
                "narrow it with label matchers or aggregate with sum by (...)"
            )
    per_field = POINTS_PER_FIELD.get(layout, 1)
    if sum(plan.charged(per_field) for plan in plans) <= limits.max_request_points:
        return
    total = sum(plan.read for plan in plans)
    biggest = max(plans, key=lambda plan: plan.read)
    keys = biggest.unions.keys
    unique = f", {keys:,} slices of unique series" if keys else ""
    scaled = (
        f" ({limits.max_request_points * per_field:,} points in the {layout} layout, "
        f"which reads {per_field} for the cost of a hash field)"
        if per_field > 1
        else ""
    )
    raise LimitExceeded(
        f"the query reads {total:,} points (series x points per series, summed over its "
        f"targets; target {biggest.query.label!r}: {biggest.series:,} series x {biggest.points:,} "
        f"points at precision {biggest.choice.precision} s{unique}), more than the work budget "
        f"max_request_points = {limits.max_request_points:,}{scaled}: shorten the range, "
        "pick a coarser precision or match fewer series"
    )


def check_answered(series: int, times: int, budget: int, limits: Limits) -> int:
    """The points of an answer of ``series`` at every one of ``times``: EvaluationError past
    what is left of the compute budget."""
    points = series * times
    if points > budget:
        raise EvaluationError(
            f"the query answers {points:,} points (its series x its times), more than "
            f"{limits.max_computed_points:,} with what it computed (max_computed_points): match "
            "fewer series, aggregate with sum by (...) or shorten the range"
        )
    return points


def answer_points(labels: Sequence[Mapping[str, str]], times: int) -> int:
    """What encoding an answer of series with these ``labels`` at ``times`` times costs, in
    points: every series' points, and its labels' text as the points of as many bytes."""
    text = sum(len(name) + len(value) + 6 for one in labels for name, value in one.items())
    return len(labels) * times + -(-text // POINT_BYTES)


def check_encoded(
    label: str, labels: Sequence[Mapping[str, str]], times: int, before: int, limits: Limits
) -> int:
    """What encoding an answer of series with ``labels`` at ``times`` times costs
    (``answer_points``): LimitExceeded when it and the answers ``before`` it pass
    ``max_answer_points``."""
    points = answer_points(labels, times)
    if before + points > limits.max_answer_points:
        raise LimitExceeded(
            f"the answer holds {before + points:,} points (target {label!r}: "
            f"{len(labels):,} series x {times:,} times, with their labels' text at "
            f"{POINT_BYTES} bytes a point), more than max_answer_points = "
            f"{limits.max_answer_points:,} (encoding an answer costs about 0.3 us and "
            f"{POINT_BYTES} bytes of JSON a point): aggregate with sum by (...), match fewer "
            "series, shorten the range or ask for fewer points"
        )
    return points
