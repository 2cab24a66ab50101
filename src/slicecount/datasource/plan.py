"""What one /query reads, decided before any Redis call. Pure.

Every target is compiled and given its precision and slices first (so a bad target or a limit
fails the request before any work); the reader then discovers the series of every target at
once, ``choose_series`` keeps those each selector matches (within the series limit), and
``group_reads`` merges them so one read per (precision, slices) serves every target.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slicecount.config import Settings
from slicecount.datasource import uniques
from slicecount.datasource.discovery import SeriesInfo
from slicecount.datasource.evaluate import Fetch, Series, Timeline, fetches
from slicecount.datasource.limits import LimitExceeded, Limits
from slicecount.datasource.nodes import Node, uses_unique
from slicecount.datasource.precision import choose_precision
from slicecount.datasource.protocol import (
    Target,
    adhoc_matchers,
    annotation_tags,
    compile_target,
    is_annotation_query,
    parse_range,
    positive_number,
    visible_targets,
)
from slicecount.histogram import BUCKET_SUFFIX
from slicecount.slices import oldest_kept, slice_starts

MetricAt = tuple[str, int]
"""A stored metric name (a histogram's ``.bucket`` part for quantiles) at a precision."""
Chosen = dict[Fetch, list[SeriesInfo]]
"""The series each selector of a target reads."""


# eq=False: a plan's queries are compared and hashed by identity; they key what was read.
@dataclass(frozen=True, eq=False)
class SeriesQuery:
    """A target that reads counters: its query tree, its slices and the selectors it reads;
    or one that reads unique series (``unique``; no fetches then)."""

    target: Target
    node: Node
    timeline: Timeline
    fetches: tuple[Fetch, ...]
    unique: uniques.UniqueRead | None = None


@dataclass(frozen=True, eq=False)
class AnnotationQuery:
    """A target asking for annotations (simPod sends them to /query with refId ``Anno``)."""

    target: Target
    tags: tuple[str, ...]


Planned = SeriesQuery | AnnotationQuery


@dataclass(frozen=True)
class QueryPlan:
    """Every visible target of a /query, planned, in the order of the answer."""

    start: float
    end: float
    targets: tuple[Planned, ...]

    @property
    def series_queries(self) -> list[SeriesQuery]:
        return [t for t in self.targets if isinstance(t, SeriesQuery)]

    @property
    def annotation_queries(self) -> list[AnnotationQuery]:
        return [t for t in self.targets if isinstance(t, AnnotationQuery)]


def plan_query(
    body: Mapping[str, Any], settings: Settings, limits: Limits, now: float
) -> QueryPlan:
    """Check a /query body and plan each target; QueryError (or LimitExceeded) on the first
    problem, in target order."""
    start, end = parse_range(body, limits)
    targets = visible_targets(body, limits)
    adhoc = adhoc_matchers(body)
    interval_ms = positive_number(body, "intervalMs")
    max_points = positive_number(body, "maxDataPoints")
    planned: list[Planned] = []
    for target in targets:
        if is_annotation_query(body, target):
            planned.append(AnnotationQuery(target, tuple(annotation_tags(target.text))))
            continue
        node, pinned = compile_target(target, adhoc)
        if uses_unique(node):
            uniques.check(node)
            read_at, step = uniques.choose(
                settings, start, end, now, interval_ms, int(max_points or 0) or None, pinned
            )
            read = uniques.UniqueRead(read_at, uniques.leaves(node))
            points = uniques.timeline(settings, limits, read, step, start, end, now)
            planned.append(SeriesQuery(target, node, points, (), read))
            continue
        if pinned is None:
            precision = choose_precision(
                settings, start, end, now, interval_ms, int(max_points or 0) or None
            )
        else:
            precision = settings.check_precision(pinned)
        slices = timeline(settings, limits, precision, start, end, now)
        planned.append(SeriesQuery(target, node, slices, tuple(fetches(node))))
    return QueryPlan(start, end, tuple(planned))


def timeline(
    settings: Settings, limits: Limits, precision: int, start: float, end: float, now: float
) -> Timeline:
    """The slices of a panel at ``precision``, within the points limit."""
    starts = slice_starts(precision, start, end)
    if len(starts) > limits.max_points:
        raise LimitExceeded(
            f"{len(starts)} points per series at precision {precision} s, more than the "
            f"limit of {limits.max_points}: shorten the range or pick a coarser precision"
        )
    oldest = oldest_kept(precision, settings.retention_for(precision), now)
    return Timeline(precision, starts, now, oldest)


def stored_name(name: str, histogram: bool) -> str:
    """The metric whose series a selector name reads: a histogram's bucket part for quantiles."""
    return name + BUCKET_SUFFIX if histogram else name


def metrics_to_discover(queries: Iterable[SeriesQuery]) -> list[MetricAt]:
    """Every (metric, precision) whose series the queries need, each once."""
    wanted: dict[MetricAt, None] = {}
    for query in queries:
        for fetch in query.fetches:
            for name in fetch.selector.names:
                wanted[(stored_name(name, fetch.histogram), query.timeline.precision)] = None
    return list(wanted)


def choose_series(
    query: SeriesQuery, discovered: Mapping[MetricAt, Sequence[SeriesInfo]], limits: Limits
) -> Chosen:
    """The series each selector of ``query`` matches; LimitExceeded past the series limit."""
    precision = query.timeline.precision
    chosen: Chosen = {}
    total = 0
    for fetch in query.fetches:
        selector = fetch.selector
        found: list[SeriesInfo] = []
        for name in selector.names:
            found += [
                s
                for s in discovered[(stored_name(name, fetch.histogram), precision)]
                if selector.matches(s.labels)
            ]
        chosen[fetch] = found
        total += len(found)
        if total > limits.max_series:
            raise LimitExceeded(
                f"the query matches more than {limits.max_series} series: "
                "narrow it with label matchers or aggregate with sum by (...)"
            )
    return chosen


def group_reads(chosen: Iterable[tuple[SeriesQuery, Chosen]]) -> dict[Timeline, list[str]]:
    """The series ids to read per timeline (targets of one request share their timeline when
    they share a precision), each id once; timelines with nothing to read are left out."""
    groups: dict[Timeline, dict[str, None]] = {}
    for query, selected in chosen:
        ids = groups.setdefault(query.timeline, {})
        for found in selected.values():
            ids.update((s.id, None) for s in found)
    return {slices: list(ids) for slices, ids in groups.items() if ids}


def filled(
    selected: Chosen, slices: Timeline, counts: Mapping[str, Sequence[int | None]]
) -> dict[Fetch, list[Series]]:
    """Each selector's series with their counts on the timeline, ready to evaluate."""
    return {
        fetch: [Series(s.name, s.labels, slices.fill(counts[s.id])) for s in found]
        for fetch, found in selected.items()
    }
