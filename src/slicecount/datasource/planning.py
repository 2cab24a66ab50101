"""The first half of the one query loop: each query planned (its precision and grid), the
series its selectors match discovered, every stored metric asked once for the whole request,
and the request checked against the limits before anything is read. ``execute`` reads and
evaluates what is planned here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slicecount.core.memo import remembered
from slicecount.datasource.discovery import SeriesInfo
from slicecount.datasource.limits import LimitExceeded
from slicecount.datasource.prometheus import uniques
from slicecount.datasource.prometheus.names import Catalogue, Derived, derive
from slicecount.datasource.prometheus.plan import Choice, Need, choose, last_boundary
from slicecount.datasource.reader import Reader
from slicecount.promql.ast import Node, VectorSelector
from slicecount.promql.distinct import check, unions


@dataclass(frozen=True, eq=False)
class Query:
    """One tree to evaluate at ``times`` (``step`` apart for a range). ``label`` names it in a
    limit's message; ``partial`` and ``among`` are the simPod targets' (``Grid.partial``, a
    pinned precision)."""

    node: Node
    times: tuple[float, ...]
    step: float | None
    label: str = ""
    partial: bool = False
    among: tuple[int, ...] | None = None


@dataclass
class Plan:
    """A query with its precision, the series each selector reads, and where its reads end."""

    query: Query
    choice: Choice
    found: dict[VectorSelector, list[Derived]]
    distinct: dict[VectorSelector, list[Derived]]
    unions: uniques.Unions
    ids: list[str]
    last: int

    @property
    def slices(self) -> int:
        return (self.last - self.choice.grid.first) // self.choice.precision

    @property
    def points(self) -> int:
        """Points per series: the slices read, or for a simPod target its points (what
        the answer carries) when there are more."""
        if self.query.partial:
            return max(self.slices, len(self.query.times))
        return self.slices

    @property
    def read(self) -> int:
        return len(self.ids) * self.points + self.unions.keys

    def charged(self, per_field: int) -> int:
        """What the read costs in hash fields: ``per_field`` points of counters each."""
        return -(-len(self.ids) * self.points // per_field) + self.unions.keys


async def plan_queries(
    reader: Reader,
    queries: Sequence[Query],
    wanted: Sequence[list[Need]],
    catalogue: Catalogue,
    counters: Sequence[SeriesInfo],
    distinct: Sequence[SeriesInfo],
) -> list[Plan]:
    """Every query planned and its series found; LimitExceeded (or a QueryError of a sum of
    distinct counts) before anything is read."""
    choices = []
    for query, need in zip(queries, wanted, strict=True):
        kinds = uniques.kinds(catalogue, need, counters, distinct)
        check(query.node, kinds.distinct, kinds.mixed)  # a sum of distinct counts: nothing read
        need = uniques.with_steps(need, catalogue, kinds, query.step)
        choice = choose(
            reader.settings, need, query.times, query.step, reader.clock(),
            reader.limits.max_points, query.among, query.partial,
        )  # fmt: skip
        choices.append((query, kinds, need, choice))
    series = await _discover(reader, catalogue, [(k, n, c) for _, k, n, c in choices])
    plans = [
        _plan(reader, query, kinds, need, choice, catalogue, series)
        for query, kinds, need, choice in choices
    ]
    _check(reader, plans)
    return plans


POINTS_PER_FIELD = {"book": 1, "blocks": 8}
"""Points of a counter read for the cost of one hash field (the book's HMGET of a slice,
0.4 to 0.8 us): the blocks layout reads a span of a series' block (the GETRANGE of its
frames, decoded in bulk) at 0.07 to 0.18 us a point (1 211 series of 2 hours of traffic:
10 090 slices of 60 s in 0.83 s, 8.9 s as hash fields)."""

SeriesAt = dict[tuple[str, int, bool], list[SeriesInfo]]
"""The series of a stored metric at a precision (unique ones when the flag is set)."""


async def _discover(
    reader: Reader,
    catalogue: Catalogue,
    planned: Sequence[tuple[uniques.Kinds, list[Need], Choice]],
) -> SeriesAt:
    """The series of every stored metric any query reads, each (metric, precision) asked
    once for the whole request."""
    wanted: dict[tuple[str, int, bool], None] = {}
    for _, need, choice in planned:
        for n in need:
            for unique in (False, True) if n.distinct else (False,):
                for name in catalogue.matching(n.selector, unique=unique):
                    wanted[(catalogue.sources[name].stored, choice.read_precision, unique)] = None
    found = await reader.series_of_each(list(wanted))
    return dict(zip(wanted, found, strict=True))


def _matched(
    reader: Reader,
    catalogue: Catalogue,
    selector: VectorSelector,
    unique: bool,
    precision: int,
    series: SeriesAt,
) -> list[Derived]:
    """The series a selector matches at ``precision``, remembered while the catalogue and
    the series lists it was found in are the ones the Reader's cache holds."""
    names = catalogue.matching(selector, unique=unique)
    lists = [series[(catalogue.sources[name].stored, precision, unique)] for name in names]

    def find() -> list[Derived]:
        out: list[Derived] = []
        for name, listed in zip(names, lists, strict=True):
            pairs = [(s.id, s.labels) for s in listed]
            derived = derive(name, catalogue.sources[name], pairs)
            out += [d for d in derived if selector.matches(d.labels)]
        return out

    key = ("matched", selector.matchers, unique, precision)
    return reader.derived(key, (catalogue, *lists), find)


def _plan(
    reader: Reader,
    query: Query,
    kinds: uniques.Kinds,
    need: list[Need],
    choice: Choice,
    catalogue: Catalogue,
    series: SeriesAt,
) -> Plan:
    p = choice.read_precision
    found = {n.selector: _matched(reader, catalogue, n.selector, False, p, series) for n in need}
    distinct = {s: _matched(reader, catalogue, s, True, p, series) for s in kinds.distinct}
    planned = uniques.plan(choice.grid, query.step, distinct, unions(query.node, kinds.distinct))
    lists = list(found.values())  # the discovery cache's lists: the same at every request
    ids = remembered(
        "parts", lists, lambda: list(dict.fromkeys(i for ds in lists for d in ds for i in d.parts))
    )
    last = last_boundary(choice.grid, [n for n in need if not n.distinct])
    return Plan(query, choice, found, distinct, planned, ids, last)


def _check(reader: Reader, plans: Sequence[Plan]) -> None:
    """LimitExceeded when a query reads too many series, or the request too many points."""
    limits = reader.limits
    for plan in plans:
        stored = len(plan.ids) + plan.unions.series
        if stored > limits.max_series:
            raise LimitExceeded(
                f"the query matches {stored:,} stored series, more than {limits.max_series} "
                f"series (max_series, the limit of {limits.max_series}): narrow it with label "
                "matchers or aggregate with sum by (...)"
            )
    layout = reader.settings.layout
    per_field = POINTS_PER_FIELD.get(layout, 1)
    if sum(plan.charged(per_field) for plan in plans) > limits.max_request_points:
        total = sum(plan.read for plan in plans)
        biggest = max(plans, key=lambda plan: plan.read)
        series = len(biggest.ids) + biggest.unions.series
        label = biggest.query.label
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
            f"targets; target {label!r}: {series:,} series x {biggest.points:,} points at "
            f"precision {biggest.choice.precision} s{unique}), more than the work budget "
            f"max_request_points = {limits.max_request_points:,}{scaled}: shorten the range, "
            "pick a coarser precision or match fewer series"
        )
