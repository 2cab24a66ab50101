"""The first half of the one query loop, pure: each query's precision and grid (``drafts``),
the stored metrics whose series it needs, each asked once for the whole request
(``series_wanted``), then the series each selector reads (``plans``). ``execute`` asks the
source for the series in between, checks the plans against the budget, and reads and
evaluates them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slicecount.config import Settings
from slicecount.core.memo import remembered
from slicecount.promql.ast import Node, VectorSelector
from slicecount.promql.distinct import check, unions
from slicecount.query import uniques
from slicecount.query.catalogue import Catalogue, Derived, derive
from slicecount.query.precision import Choice, Need, choose, last_boundary
from slicecount.reads.listing import SeriesInfo


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
    def series(self) -> int:
        """The stored series it reads: counters and unique ones."""
        return len(self.ids) + self.unions.series

    @property
    def read(self) -> int:
        return len(self.ids) * self.points + self.unions.keys

    def charged(self, per_field: int) -> int:
        """What the read costs in hash fields: ``per_field`` points of counters each."""
        return -(-len(self.ids) * self.points // per_field) + self.unions.keys


@dataclass(frozen=True)
class Draft:
    """A query with its precision chosen, before its series are found."""

    query: Query
    kinds: uniques.Kinds
    need: list[Need]
    choice: Choice


def drafts(
    queries: Sequence[Query],
    wanted: Sequence[list[Need]],
    catalogue: Catalogue,
    counters: Sequence[SeriesInfo],
    distinct: Sequence[SeriesInfo],
    settings: Settings,
    now: float,
    max_points: int,
) -> list[Draft]:
    """Each query's precision and grid (``precision.choose``); a QueryError of a sum of
    distinct counts, or of a range no precision keeps, before any series is looked up."""
    out = []
    for query, need in zip(queries, wanted, strict=True):
        kinds = uniques.kinds(catalogue, need, counters, distinct)
        check(query.node, kinds.distinct, kinds.mixed)  # a sum of distinct counts: nothing read
        need = uniques.with_steps(need, catalogue, kinds, query.step)
        choice = choose(
            settings, need, query.times, query.step, now, max_points, query.among, query.partial
        )
        out.append(Draft(query, kinds, need, choice))
    return out


SeriesKey = tuple[str, int, bool]
"""A stored metric at a precision (its unique series when the flag is set)."""
SeriesAt = dict[SeriesKey, list[SeriesInfo]]
"""The series of each stored metric at a precision."""


def series_wanted(drafts: Sequence[Draft], catalogue: Catalogue) -> list[SeriesKey]:
    """Every stored metric any query reads at its precision, each once for the whole
    request."""
    wanted: dict[SeriesKey, None] = {}
    for draft in drafts:
        for n in draft.need:
            for unique in (False, True) if n.distinct else (False,):
                for name in catalogue.matching(n.selector, unique=unique):
                    stored = catalogue.sources[name].stored
                    wanted[(stored, draft.choice.read_precision, unique)] = None
    return list(wanted)


def plans(drafts: Sequence[Draft], catalogue: Catalogue, series: SeriesAt) -> list[Plan]:
    """Each query with the series its selectors read (``series``: what discovery found of
    ``series_wanted``)."""
    return [_plan(d.query, d.kinds, d.need, d.choice, catalogue, series) for d in drafts]


def _matched(
    catalogue: Catalogue, selector: VectorSelector, unique: bool, precision: int, series: SeriesAt
) -> list[Derived]:
    """The series a selector matches at ``precision``, remembered while the catalogue and
    the series lists it was found in are the ones the source's discovery cache holds."""
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
    return remembered(key, [catalogue, *lists], find)


def _plan(
    query: Query,
    kinds: uniques.Kinds,
    need: list[Need],
    choice: Choice,
    catalogue: Catalogue,
    series: SeriesAt,
) -> Plan:
    p = choice.read_precision
    found = {n.selector: _matched(catalogue, n.selector, False, p, series) for n in need}
    distinct = {s: _matched(catalogue, s, True, p, series) for s in kinds.distinct}
    planned = uniques.plan(choice.grid, query.step, distinct, unions(query.node, kinds.distinct))
    lists = list(found.values())  # the discovery cache's lists: the same at every request
    ids = remembered(
        "parts", lists, lambda: list(dict.fromkeys(i for ds in lists for d in ds for i in d.parts))
    )
    last = last_boundary(choice.grid, [n for n in need if not n.distinct])
    return Plan(query, choice, found, distinct, planned, ids, last)
