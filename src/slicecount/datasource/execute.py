"""The one query loop of both surfaces: PromQL trees planned, their series discovered and
checked against the limits (``planning``), then read in one batch, evaluated and encoded
(here).

The Prometheus API runs one expression; a simPod /query runs every target at once (compiled
by ``targets``), so that a panel's targets share their discovery and one read per precision
and range. Nothing is read before every query is planned and checked: a bad target or a
limit fails the request first. A heavy request (more than ``max_inline_points`` to read and
compute) waits its turn and is evaluated and encoded in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from slicecount.datasource.counts import Read, Rows, rows, tables
from slicecount.datasource.discovery import SeriesInfo
from slicecount.datasource.planning import Plan, Query, plan_queries
from slicecount.datasource.prometheus.names import Catalogue
from slicecount.datasource.prometheus.plan import needs
from slicecount.datasource.reader import Reader, all_done
from slicecount.errors import MissingExtra
from slicecount.promql.ast import NAME_LABEL, VectorSelector, walk
from slicecount.promql.engine import Evaluator, Result
from slicecount.promql.values import Grid

try:
    import anyio.to_thread
except ModuleNotFoundError as exc:
    raise MissingExtra("datasource", exc, "the datasource") from exc

Listing = Callable[[Sequence[SeriesInfo], Sequence[SeriesInfo]], Catalogue]
"""Builds the names a surface's selectors match from every counter and unique series."""


@dataclass(frozen=True)
class Answer:
    """A query's result on its grid, what the precision choice says, and the stored metrics
    each selector read (a legend's name)."""

    result: Result
    grid: Grid
    infos: tuple[str, ...]
    stored: tuple[str, ...]


Finish = Callable[[list[Answer], tuple[str, ...]], bytes]
"""Encodes the answers (with the catalogue's warnings) into the response body."""


async def run(
    reader: Reader,
    queries: Sequence[Query],
    names: Listing,
    finish: Finish,
    alongside: Callable[[], Awaitable[None]] | None = None,
) -> bytes:
    """Plan, discover, check, read, evaluate and encode ``queries``, in order; ``alongside``
    (a simPod request's annotations) runs with the reads, once the request is checked."""
    wanted = [needs(q.node, q.step or 0.0 if q.partial else 0.0) for q in queries]
    counters: Sequence[SeriesInfo] = ()
    distinct: Sequence[SeriesInfo] = ()
    if any(wanted):
        counters, distinct = await reader.listings()
    catalogue = (
        reader.derived(names, (counters, distinct), lambda: names(counters, distinct))
        if any(wanted)
        else Catalogue({}, ())
    )
    plans = await plan_queries(reader, queries, wanted, catalogue, counters, distinct)
    work = sum(
        len(p.ids) * (p.slices + len(p.query.times))
        + len(walk(p.query.node)) * len(p.query.times)
        + p.unions.keys
        for p in plans
    )

    def compute(counts: Mapping[tuple[int, int, int], Read], distinct_counts: list[list[int]]
                ) -> bytes:  # fmt: skip
        answers = []
        budget = reader.limits.max_computed_points
        converted: dict[object, Rows] = {}  # targets alike (a panel's quantiles) share theirs
        for plan, counted in zip(plans, distinct_counts, strict=True):
            grid = plan.choice.grid
            key = (_read_key(plan), tuple(plan.ids), plan.slices)
            read = converted.get(key)
            if read is None:
                read = converted[key] = rows(counts.get(key[0], {}), plan.ids, plan.slices)
            data = tables(plan.found, read)
            evaluator = Evaluator(grid, data, budget, plan.unions.ready(counted))
            result = evaluator.evaluate(plan.query.node)
            budget -= evaluator.computed
            answers.append(Answer(result, grid, plan.choice.infos, _stored(plan, catalogue)))
        return finish(answers, catalogue.warnings)

    if work <= reader.limits.max_inline_points:
        return compute(*await _read(reader, plans, alongside))
    async with reader.heavy():
        counts, distinct_counts = await _read(reader, plans, alongside)
        return await anyio.to_thread.run_sync(lambda: compute(counts, distinct_counts))


def _read_key(plan: Plan) -> tuple[int, int, int]:
    return plan.choice.precision, plan.choice.grid.first, plan.last


async def _read(
    reader: Reader, plans: Sequence[Plan], alongside: Callable[[], Awaitable[None]] | None
) -> tuple[dict[tuple[int, int, int], Read], list[list[int]]]:
    """The slices of every query, one read per (precision, first, last) for all of them, and
    the unions each counts, concurrently."""
    groups: dict[tuple[int, int, int], dict[str, None]] = {}
    for plan in plans:
        groups.setdefault(_read_key(plan), {}).update(dict.fromkeys(plan.ids))
    reads = {
        key: asyncio.ensure_future(reader.read_slices(list(ids), key[0], key[1], key[2] - key[0]))
        for key, ids in groups.items()
        if ids
    }
    counted = {
        i: asyncio.ensure_future(reader.count_unions(plan.choice.precision, plan.unions.groups))
        for i, plan in enumerate(plans)
        if plan.unions.groups
    }
    also = [asyncio.ensure_future(alongside())] if alongside is not None else []
    await all_done([*reads.values(), *counted.values(), *also])
    unions = [counted[i].result() if i in counted else [] for i in range(len(plans))]
    return {key: task.result() for key, task in reads.items()}, unions


def _stored(plan: Plan, catalogue: Catalogue) -> tuple[str, ...]:
    """The stored metrics the query read, in the order of its selectors."""
    names: dict[str, None] = {}
    for node in walk(plan.query.node):
        if isinstance(node, VectorSelector):
            for d in [*plan.found.get(node, ()), *plan.distinct.get(node, ())]:
                names[catalogue.sources[d.labels[NAME_LABEL]].stored] = None
    return tuple(names)
