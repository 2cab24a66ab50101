"""``unique(...)`` targets: what is allowed, which precision and step, which unions to count.
Pure.

A unique series holds, per slice, the set of values seen (an HLL, or an exact SET). Its
values can be counted but never added: a user seen in two slices or two series is one user.
So ``sum [by (...)] (unique(...))`` is a union (``Store.count_unions`` over the group's
series), a point wider than the slices read unions the slices it covers, and any other
combination that would add distinct counts is refused (max, min, avg and count of per-series
counts are fine: statistics of the counts, as in the Prometheus API). A target reading unique
series reads nothing else (its timeline is its own).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from slicecount.config import Settings
from slicecount.datasource.discovery import SeriesInfo
from slicecount.datasource.evaluate import Series, Timeline, fetches
from slicecount.datasource.limits import LimitExceeded, Limits
from slicecount.datasource.nodes import (
    Aggregate,
    Binary,
    Node,
    Quantile,
    Rate,
    Scalar,
    Selector,
    Unique,
    depth,
    is_union,
    uses_unique,
)
from slicecount.errors import QueryError
from slicecount.slices import oldest_kept, slice_starts
from slicecount.unique_reading import Group, kept_precisions

ADDING = (
    "distinct counts do not add up (a value seen in two series or slices is one value): use "
    "sum by (...) (unique(...)) for the union of the values, or max/min/avg/count of the counts"
)


class UniqueRead(NamedTuple):
    """What a unique target reads: the unique precision, and its union nodes (left to right)."""

    precision: int
    leaves: tuple[Node, ...]


class Output(NamedTuple):
    """One series a union node yields: its name and labels, and the unique series it unions."""

    name: str
    labels: dict[str, str]
    ids: list[str]


def check(node: Node) -> None:
    """QueryError unless ``node`` combines unique series only in ways that stay right."""
    if fetches(node):
        raise QueryError(
            "a target with unique(...) reads unique series only: put the counters in a target "
            "of their own"
        )
    _check(node)


def _check(node: Node) -> None:
    if isinstance(node, Selector | Scalar | Unique) or is_union(node):
        return
    if isinstance(node, Binary):
        _check(node.left)
        _check(node.right)
    elif isinstance(node, Rate | Quantile) and uses_unique(node.arg):
        what = "rate()" if isinstance(node, Rate) else "histogram_quantile()"
        raise QueryError(f"{what} of unique(...) has no meaning: a distinct count is not a rate")
    elif isinstance(node, Aggregate) and uses_unique(node.arg):
        if node.op == "sum":
            raise QueryError(f"{node.op}() over unique(...) is refused: {ADDING}")
        _check(node.arg)


def choose(
    settings: Settings,
    start: float,
    end: float,
    now: float,
    interval_ms: float | None,
    max_points: int | None,
    pinned: int | None,
) -> tuple[int, int]:
    """(the unique precision read, the step between points, a multiple of it). The step is
    Grafana's interval (at least range / maxDataPoints); the precision is the coarsest that
    fits in a step and still covers ``start``: each point unions the fewest slices."""
    kept = kept_precisions(settings)
    if pinned is not None:
        if pinned not in kept:
            raise QueryError(
                f"unique counts are kept at precisions {kept}, not {pinned} s: pin one of them "
                "or let the precision be chosen"
            )
        return pinned, pinned
    wanted = (interval_ms or 0) / 1000
    if max_points:
        wanted = max(wanted, (end - start) / max_points)
    covering = [p for p in kept if oldest_kept(p, settings.retention_for(p), now) <= start]
    fitting = [p for p in covering if p <= wanted]
    precision = fitting[-1] if fitting else covering[0] if covering else kept[-1]
    return precision, max(1, math.ceil(wanted / precision)) * precision


def timeline(
    settings: Settings, limits: Limits, read: UniqueRead, step: int, start: float, end: float,
    now: float,
) -> Timeline:  # fmt: skip
    """Points every ``step`` seconds; one before the read precision's retention is null."""
    starts = slice_starts(step, start, end)
    if len(starts) > limits.max_points:
        raise LimitExceeded(
            f"{len(starts)} points per series at a step of {step} s, more than the limit of "
            f"{limits.max_points}: shorten the range or widen the interval"
        )
    p = read.precision
    oldest = oldest_kept(p, settings.retention_for(p), now)
    return Timeline(step, starts, now, -(-oldest // step) * step)


def leaves(node: Node) -> tuple[Node, ...]:
    """The union nodes of a tree, left to right, each once."""
    if is_union(node):
        return (node,)
    if isinstance(node, Selector | Scalar | Unique):
        return ()
    if isinstance(node, Binary):
        return tuple(dict.fromkeys(leaves(node.left) + leaves(node.right)))
    return leaves(node.arg)


def selector_of(leaf: Node) -> Selector:
    """The selector a union node reads."""
    inner = leaf.arg if isinstance(leaf, Aggregate) else leaf
    assert isinstance(inner, Unique)  # a union node, by construction
    return inner.arg


def outputs(leaf: Node, found: Sequence[SeriesInfo]) -> list[Output]:
    """The series a union node yields from the unique series its selector matched: each
    series, or each ``by`` group (labels and naming as ``sum by`` over counters)."""
    if not isinstance(leaf, Aggregate):
        return [Output(s.name, dict(s.labels), [s.id]) for s in found]
    groups: dict[tuple[str, ...], list[SeriesInfo]] = {}
    for s in found:
        groups.setdefault(tuple(s.labels.get(k, "") for k in leaf.by), []).append(s)
    out = []
    for key, members in sorted(groups.items()):
        names = {m.name for m in members}
        labels = {k: v for k, v in zip(leaf.by, key, strict=True) if v}
        out.append(Output(names.pop() if len(names) == 1 else "", labels, [m.id for m in members]))
    return out


def point_slices(slices: Timeline, precision: int) -> list[range | None]:
    """The slices at ``precision`` each point covers; None for a point before retention or
    after now (drawn as a gap)."""
    return [
        range(s, s + slices.precision, precision) if slices.oldest <= s <= slices.now else None
        for s in slices.starts
    ]


def groups(found: Sequence[Output], points: Sequence[range | None]) -> Iterator[Group]:
    """The union to count for each output at each point that has one, output by output."""
    for output in found:
        for covered in points:
            if covered is not None:
                yield [(series_id, covered) for series_id in output.ids]


def build(
    found: Sequence[Output], points: Sequence[range | None], counts: Iterator[int]
) -> list[Series]:
    """The series of a union node, taking the counts in the order ``groups`` gave them."""
    return [
        Series(o.name, o.labels, [None if c is None else next(counts) for c in points])
        for o in found
    ]


def work(node: Node, found: Sequence[Sequence[Output]], points: Sequence[range | None]) -> tuple[
    int, int
]:  # fmt: skip
    """(slices read, points computed) of a unique target: every slice of every series of
    each union, and the outputs' points through each level of the tree."""
    inside = [p for p in points if p is not None]
    slices = sum(len(p) for p in inside)
    read = sum(len(o.ids) for outs in found for o in outs) * slices
    computed = sum(len(outs) for outs in found) * len(points) * depth(node)
    return read, computed
