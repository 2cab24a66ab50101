"""Unique series in PromQL queries: which selectors read them, the unions each point asks of
the store, and the series handed ready to the engine. Pure.

A selector reads unique series when it matches one in the listing of every unique series
(cached, as the counters' listing): decided before the precision is chosen, since only the
unique precisions hold them. Each point (and each ``sum`` group's point) is one group of
``count_unions``: the store unions the slices' sketches (exact sets where exact), never the
engine, which stays pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from slicecount.promql.aggregation import grouped
from slicecount.promql.ast import Aggregate, Node, VectorSelector
from slicecount.promql.distinct import Window, windows
from slicecount.promql.values import Grid, Labels, Series, key
from slicecount.query.catalogue import Catalogue, Derived, derive
from slicecount.query.precision import Need
from slicecount.reads.listing import SeriesInfo


@dataclass(frozen=True)
class Kinds:
    """The selectors matching unique series, and those of them matching counters too."""

    distinct: frozenset[VectorSelector] = frozenset()
    mixed: frozenset[VectorSelector] = frozenset()


def kinds(
    catalogue: Catalogue,
    wanted: Sequence[Need],
    counters: Sequence[SeriesInfo],
    uniques: Sequence[SeriesInfo],
) -> Kinds:
    """Which selectors read unique series (and which of them counters too), given every
    series listed."""
    if not wanted:
        return Kinds()
    selectors = list(dict.fromkeys(need.selector for need in wanted))
    distinct = [s for s in selectors if _matches(catalogue, s, uniques, unique=True)]
    mixed = [s for s in distinct if _matches(catalogue, s, counters, unique=False)]
    return Kinds(frozenset(distinct), frozenset(mixed))


def _matches(
    catalogue: Catalogue, selector: VectorSelector, listing: Sequence[SeriesInfo], unique: bool
) -> bool:
    names = catalogue.matching(selector, unique)
    if not names:  # the common case: a counter's name, no listing to go through
        return False
    stored = {catalogue.sources[n].stored for n in names}
    pairs: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for s in listing:
        if s.name in stored:
            pairs.setdefault(s.name, []).append((s.id, s.labels))
    return any(
        selector.matches(d.labels)
        for name in names
        for d in derive(
            name, catalogue.sources[name], pairs.get(catalogue.sources[name].stored, [])
        )
    )


def with_steps(
    wanted: Sequence[Need], catalogue: Catalogue, kinds: Kinds, step: float | None
) -> list[Need]:
    """The needs of a query once its unique selectors are known: each reads the slices of a
    step (one slice for an instant query), and its counters (if it matches some) as before."""
    out = []
    for need in wanted:
        if need.selector not in kinds.distinct:
            out.append(need)
            continue
        out.append(Need(need.selector, step or 0.0, absolute=False, distinct=True))
        if catalogue.matching(need.selector, unique=False):
            out.append(need)
    return out


@dataclass(frozen=True)
class Line:
    """One ready series: its labels, the group counted for each distinct window, and the
    window of each evaluation time (-1: no sample)."""

    labels: Labels
    groups: list[int]
    where: list[int]


@dataclass
class Unions:
    """What a query asks of ``count_unions`` and how the counts become series."""

    groups: list[list[tuple[str, Window]]] = field(default_factory=list)
    lines: dict[Node, list[Line]] = field(default_factory=dict)
    keys: int = 0  # (series, slice) pairs the store reads: the work

    @property
    def series(self) -> int:
        return len({i for group in self.groups for i, _ in group})

    def ready(self, counts: Sequence[int]) -> dict[Node, list[Series]]:
        out: dict[Node, list[Series]] = {}
        for node, lines in self.lines.items():
            out[node] = []
            for line in lines:
                found = [float(counts[g]) for g in line.groups]
                values = [None if w < 0 else found[w] for w in line.where]
                out[node].append(Series(line.labels, list(values)))
        return out


def plan(
    grid: Grid,
    step: float | None,
    found: dict[VectorSelector, list[Derived]],
    sums: Sequence[Aggregate],
) -> Unions:
    """The groups to count: per series and distinct window, or, for a ``sum`` directly over
    the selector, per ``by``/``without`` group and window (the union of its series)."""
    unions = Unions()
    for selector, derived in found.items():
        points = windows(grid, selector.offset, step)
        distinct = list(dict.fromkeys(w for w in points if w is not None))
        index = {w: i for i, w in enumerate(distinct)}
        where = [-1 if w is None else index[w] for w in points]
        node: Node = selector
        members = [(d.labels, list(d.parts)) for d in derived]
        for aggregate in sums:
            if aggregate.expr is selector:
                node, members = aggregate, _by_group(aggregate, derived)
        unions.lines[node] = []
        for labels, ids in members:
            first = len(unions.groups)
            unions.groups += [[(i, w) for i in ids] for w in distinct]
            unions.keys += len(ids) * sum(len(w) for w in distinct)
            groups = list(range(first, first + len(distinct)))
            unions.lines[node].append(Line(labels, groups, where))
    return unions


def _by_group(aggregate: Aggregate, derived: Sequence[Derived]) -> list[tuple[Labels, list[str]]]:
    groups: dict[tuple[tuple[str, str], ...], tuple[Labels, list[str]]] = {}
    for d in derived:
        labels = grouped(d.labels, aggregate.grouping, aggregate.without)
        groups.setdefault(key(labels), (labels, []))[1].extend(d.parts)
    return list(groups.values())
