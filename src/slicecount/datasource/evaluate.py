"""Evaluating a query tree over counts already read from Redis. Pure.

The plan asks ``fetches()`` which (selector, histogram?) pairs a tree needs, the Reader reads
them, and ``evaluate()`` gets the filled series. Values are per slice: a count (0 for a missing
field inside retention), or None before retention and after now (Grafana draws a gap). Counts
stay ints until arithmetic makes them floats; a result may overflow to inf or NaN (the frames
show it as null), but evaluation never raises on one.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, cast

from slicecount.datasource.nodes import (
    Aggregate,
    Binary,
    Node,
    Quantile,
    Rate,
    Scalar,
    Selector,
    Unique,
    is_union,
)
from slicecount.histogram import LE_LABEL, parse_bound

Value = int | float | None


class Fetch(NamedTuple):
    """A selector a tree reads, and whether it reads a histogram's bucket series instead."""

    selector: Selector
    histogram: bool


@dataclass(frozen=True)
class Timeline:
    """The slices of one panel: starts from ``floor(from/p)*p`` up to the slice holding ``to``."""

    precision: int
    starts: range
    now: float
    oldest: int  # start of the oldest slice inside retention

    def fill(self, raw: Sequence[int | None]) -> list[Value]:
        """Counts as read (None = no field) -> 0 inside retention, None outside. With nothing to
        fill, ``raw`` itself (values are never changed in place)."""
        if len(raw) != len(self.starts):
            raise ValueError(f"{len(raw)} counts for {len(self.starts)} slices")
        # The slices from `oldest` to `now` are a run of the timeline: fill only that run.
        first = bisect_left(self.starts, self.oldest)
        last = bisect_right(self.starts, self.now)
        whole = first == 0 and last == len(raw)
        inside = raw if whole else raw[first:last]
        if None not in inside:  # the usual case: no copy of what was read
            return cast("list[Value]", raw) if isinstance(raw, list) else list(raw)
        filled: list[Value] = [0 if v is None else v for v in inside]
        return filled if whole else [*raw[:first], *filled, *raw[last:]]


@dataclass
class Series:
    """One result line: a metric name ("" once names are aggregated away), labels, values."""

    name: str
    labels: dict[str, str]
    values: list[Value]

    def legend(self) -> str:
        body = ",".join(f'{k}="{v}"' for k, v in sorted(self.labels.items()))
        if not body:
            return self.name or "{}"
        return f"{self.name}{{{body}}}"


def fetches(node: Node, histogram: bool = False) -> list[Fetch]:
    """The selectors a tree reads, each with whether it reads histogram buckets."""
    if isinstance(node, Selector):
        return [Fetch(node, histogram)]
    if isinstance(node, Scalar | Unique):  # unique series are read as unions (uniques.py)
        return []
    if isinstance(node, Binary):
        return fetches(node.left, histogram) + fetches(node.right, histogram)
    if isinstance(node, Quantile):
        return fetches(node.arg, True)
    return fetches(node.arg, histogram)


def evaluate(
    node: Node,
    data: Mapping[Fetch, list[Series]],
    timeline: Timeline,
    histogram: bool = False,
    unions: Mapping[Node, list[Series]] | None = None,
) -> list[Series]:
    """The series a tree yields, given every fetch's filled series (and, for a unique target,
    the series of each union node)."""
    if unions is not None and is_union(node):
        return [Series(s.name, dict(s.labels), list(s.values)) for s in unions[node]]
    if isinstance(node, Selector):
        return [
            Series(s.name, dict(s.labels), list(s.values)) for s in data[Fetch(node, histogram)]
        ]
    if isinstance(node, Scalar):
        return [Series("", {}, [node.value] * len(timeline.starts))]
    if isinstance(node, Binary):
        left = evaluate(node.left, data, timeline, histogram, unions)
        right = evaluate(node.right, data, timeline, histogram, unions)
        return _binary(node.op, left, right)
    if isinstance(node, Rate):
        return [_rate(s, timeline) for s in evaluate(node.arg, data, timeline, histogram, unions)]
    if isinstance(node, Aggregate):
        keep = (*node.by, LE_LABEL) if histogram else node.by
        return _aggregate(node.op, keep, evaluate(node.arg, data, timeline, histogram, unions))
    if isinstance(node, Unique):
        raise ValueError("a unique(...) node is read as a union: pass its series in unions")
    return _quantiles(node.q, evaluate(node.arg, data, timeline, True, unions))


def _binary(op: str, left: list[Series], right: list[Series]) -> list[Series]:
    def apply(a: Value, b: Value) -> Value:
        if a is None or b is None:
            return None
        if op == "*":
            return float(a) * b  # a float overflows to inf; an int product would grow unbounded
        return a / b if b != 0 else None  # x/0 has no value: a gap

    def combine(a: Series, b: Series) -> Series:
        values = [apply(x, y) for x, y in zip(a.values, b.values, strict=True)]
        return Series(a.name or b.name, a.labels or b.labels, values)

    if len(right) == 1 and not right[0].labels:
        return [combine(a, right[0]) for a in left]
    if len(left) == 1 and not left[0].labels:
        return [combine(left[0], b) for b in right]
    by_labels = {tuple(sorted(b.labels.items())): b for b in right}
    out = []
    for a in left:
        match = by_labels.get(tuple(sorted(a.labels.items())))
        if match is not None:
            out.append(combine(a, match))
    return out


def _rate(series: Series, timeline: Timeline) -> Series:
    precision, now = timeline.precision, timeline.now
    out: list[Value] = []
    for start, value in zip(timeline.starts, series.values, strict=True):
        if value is None:
            out.append(None)
        elif start <= now < start + precision:  # the unfinished slice: only its elapsed part
            out.append(value / max(now - start, 1.0))
        else:
            out.append(value / precision)
    return Series(series.name, series.labels, out)


def fsum(values: Iterable[float]) -> float:
    """``math.fsum``, or the plain sum when it refuses (overflow, or inf and -inf together):
    then the result is inf or NaN, which the frames show as null."""
    values = list(values)
    try:
        return math.fsum(values)
    except (OverflowError, ValueError):
        return sum(map(float, values))


def _combine(op: str, column: list[float]) -> Value:
    if not column:
        return None
    if op == "sum":
        return fsum(column)
    if op == "avg":
        return fsum(column) / len(column)
    if op == "max":
        return max(column)
    if op == "min":
        return min(column)
    return float(len(column))  # count: series with a value in this slice


def _aggregate(op: str, keep: tuple[str, ...], series: list[Series]) -> list[Series]:
    groups: dict[tuple[str, ...], list[Series]] = {}
    for s in series:
        groups.setdefault(tuple(s.labels.get(k, "") for k in keep), []).append(s)
    out = []
    for key, members in sorted(groups.items()):
        names = {m.name for m in members}
        labels = {k: v for k, v in zip(keep, key, strict=True) if v}
        values = [
            _combine(op, [v for v in column if v is not None])
            for column in zip(*(m.values for m in members), strict=True)
        ]
        out.append(Series(names.pop() if len(names) == 1 else "", labels, values))
    return out


def _quantiles(q: float, buckets: list[Series]) -> list[Series]:
    groups: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, Series]]] = {}
    for s in buckets:
        try:
            bound = parse_bound(s.labels.get(LE_LABEL, ""))
        except ValueError:
            continue  # not a bucket series (no or bad le label): nothing to interpolate
        rest = tuple(sorted((k, v) for k, v in s.labels.items() if k != LE_LABEL))
        groups.setdefault((s.name, rest), []).append((bound, s))
    out = []
    for (name, rest), members in sorted(groups.items()):
        members.sort(key=lambda member: member[0])
        bounds = [bound for bound, _ in members]
        values = [
            quantile(q, bounds, column)
            for column in zip(*(s.values for _, s in members), strict=True)
        ]
        out.append(Series(f"p{q * 100:g} {name}".rstrip(), dict(rest), values))
    return out


def quantile(q: float, bounds: Sequence[float], counts: Sequence[Value]) -> Value:
    """Prometheus' estimate from non-cumulative bucket counts: linear inside the bucket that
    holds rank q, lower bound 0 for the first bucket, the highest finite bound for +Inf."""
    present = [c for c in counts if c is not None]
    if not present:
        return None
    total = fsum(present)
    if not total > 0:  # NaN too
        return None
    rank = q * total
    cumulative, lower = 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=True):
        count = count or 0.0
        if count > 0 and cumulative + count >= rank:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * (rank - cumulative) / count
        cumulative += count
        if not math.isinf(bound):
            lower = bound
    return lower
