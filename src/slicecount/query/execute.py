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
from typing import TypeVar, cast

from slicecount.core.memo import remembered
from slicecount.errors import extra_imports
from slicecount.promql.arrays import Block
from slicecount.promql.ast import NAME_LABEL, Node, VectorSelector, walk
from slicecount.promql.engine import Evaluator, Result, as_vector
from slicecount.promql.values import CLOCK_SKEW, Grid, Series
from slicecount.query import planning, repeated, subtrees
from slicecount.query.budget import check_answered, check_encoded, check_reads
from slicecount.query.catalogue import Catalogue
from slicecount.query.distinct_times import collapse, expand
from slicecount.query.planning import Plan, Query
from slicecount.query.precision import needs
from slicecount.query.queryable import Queryable
from slicecount.query.repeated import Taken
from slicecount.query.tables import Rows, Tables, rows
from slicecount.reads.chunks import Read, SliceRange
from slicecount.reads.listing import SeriesInfo
from slicecount.reads.repeats import Remembered
from slicecount.reads.sharing import all_done

with extra_imports("datasource", "the datasource"):
    import anyio.to_thread

Listing = Callable[[Sequence[SeriesInfo], Sequence[SeriesInfo]], Catalogue]
"""Builds the names a surface's selectors match from every counter and unique series (each
surface remembers its catalogue of the discovery cache's lists: ``memo.by_identity``)."""


@dataclass(frozen=True)
class Answer:
    """A query's result on its grid, what the precision choice says, and the stored metrics
    each selector read (a legend's name)."""

    result: Result
    grid: Grid
    infos: tuple[str, ...]
    stored: tuple[str, ...]


def reading_now(clock: float, queries: Sequence[Query]) -> float:
    """The now a request is planned at: the clock's, or its queries' last time when that is
    at most ``CLOCK_SKEW`` ahead of it, so that its slices are read (empty after the clock's
    now): the windows ending then count what is counted so far. The simPod targets' grids
    read past now already, and divide a point's unfinished slice by the seconds it has
    lasted (``windows.elapsed_rate``): the clock's now is theirs."""
    latest = max((q.times[-1] for q in queries if q.times and not q.partial), default=clock)
    return latest if clock < latest <= clock + CLOCK_SKEW else clock


Body = TypeVar("Body")
Finish = Callable[[list[Answer], tuple[str, ...]], Body]
"""Encodes the answers (with the catalogue's warnings) into the response body (the surface
says in what: simPod and the Prometheus API give pieces of bytes)."""


async def run(
    queryable: Queryable,
    queries: Sequence[Query],
    names: Listing,
    finish: Finish[Body],
    alongside: Callable[[], Awaitable[None]] | None = None,
) -> Body:
    """Plan, discover, check, read, evaluate and encode ``queries``, in order; ``alongside``
    (a simPod request's annotations) runs with the reads, once the request is checked."""
    with queryable.request() as arrived:
        return await _run(queryable, queries, names, finish, alongside, arrived)


async def _run(
    queryable: Queryable,
    queries: Sequence[Query],
    names: Listing,
    finish: Finish[Body],
    alongside: Callable[[], Awaitable[None]] | None,
    arrived: float,
) -> Body:
    wanted = [needs(q.node, q.step or 0.0 if q.partial else 0.0) for q in queries]
    counters: Sequence[SeriesInfo] = ()
    distinct: Sequence[SeriesInfo] = ()
    if any(wanted):
        counters, distinct = await queryable.listings()
    catalogue = names(counters, distinct) if any(wanted) else Catalogue({}, ())
    settings, limits = queryable.settings, queryable.limits
    drafts = planning.drafts(
        queries,
        wanted,
        catalogue,
        counters,
        distinct,
        settings,
        reading_now(queryable.clock(), queries),
        limits.max_points,
    )
    keys = planning.series_wanted(drafts, catalogue)
    found = dict(zip(keys, await queryable.series_of_each(keys), strict=True))
    plans = planning.plans(drafts, catalogue, found)
    check_reads(plans, limits, settings.layout)  # nothing is read past the budget
    work = sum(
        len(p.ids) * (p.slices + len(p.query.times))
        + len(walk(p.query.node)) * len(p.query.times)
        + p.unions.keys
        for p in plans
    )

    def compute(counts: Mapping[SliceRange, Read], distinct_counts: list[list[int]]) -> Body:
        answers = []
        budget = limits.max_computed_points
        answered = 0  # points the answers carry, charged before any is encoded
        converted: dict[object, Rows] = {}  # targets alike (a panel's quantiles) share theirs
        for plan, counted in zip(plans, distinct_counts, strict=True):
            read = counts.get(_read_key(plan), {})
            key = (_read_key(plan), tuple(plan.ids), plan.slices)
            if key not in converted:
                converted[key] = rows(read, plan.ids, plan.slices)
            result, cost = answer(plan, read, converted[key], counted, budget)
            budget -= cost
            answered += check_encoded(
                plan.query.label, _labels(result), len(plan.query.times), answered, limits
            )
            answers.append(
                Answer(result, plan.choice.grid, plan.choice.infos, _stored(plan, catalogue))
            )
        return finish(answers, catalogue.warnings)

    def answer(
        plan: Plan, read: Read, counts: Rows, counted: list[int], budget: int
    ) -> tuple[Result, int]:
        """A plan's answer and the points it cost: remembered (``query/repeated.py``),
        whole or for the times still asked, or computed."""
        asked = repeated.key_of(plan)
        if asked is None:
            return evaluate(plan, plan.choice.grid, read, counts, counted, budget)
        repeats = queryable.repeats
        inputs = repeated.inputs_of(plan, counts.counts, counts.sizes)
        reused = repeated.reused(repeats.last(asked), plan, inputs)
        if isinstance(reused, Remembered) and reused.cost <= budget:  # charged what it cost
            repeats.hits += 1
            repeats.times_taken += len(plan.query.times)
            return cast(Result, reused.answer), reused.cost
        if isinstance(reused, Taken):
            repeats.hits += 1
            repeats.times_taken += reused.kept
            new, cost = evaluate(plan, reused.grid, read, counts, counted, budget)
            steps = len(plan.query.times)
            result = repeated.spliced(plan.query.node.type, reused, new, steps)
        else:
            result, cost = evaluate(plan, plan.choice.grid, read, counts, counted, budget)
        repeats.put(asked, repeated.place_of(plan), inputs, result, cost)
        return result, cost

    def evaluate(
        plan: Plan, grid: Grid, read: Read, counts: Rows, counted: list[int], budget: int
    ) -> tuple[Result, int]:
        """A plan's answer on ``grid`` and the points computing it cost (EvaluationError
        past ``budget``)."""
        data = Tables(plan.found, counts)
        left = budget
        collapsed = None if plan.unions.lines else collapse(grid, plan.query.node)
        on = collapsed[0] if collapsed else grid
        ready: dict[Node, Sequence[Series]] = dict(plan.unions.ready(counted))
        shared = None if plan.unions.lines else queryable.shared_results(read)
        if shared is not None:  # aggregations other requests of the read compute too
            given, computed = subtrees.ready(plan.query.node, on, data, left, shared, plan.found)
            ready.update(given)
            left -= computed
        evaluator = Evaluator(on, data, left, ready)
        result = evaluator.evaluate(plan.query.node)
        left -= evaluator.computed
        if collapsed:  # what was computed per reading is answered at every time
            series = len(result) if result and isinstance(result[0], Series) else 1
            left -= check_answered(series, len(grid.times), left, limits)
            result = expand(result, collapsed[1])
        return result, budget - left

    if work <= limits.max_inline_points:
        return compute(*await _read(queryable, plans, alongside, arrived))
    async with queryable.heavy():
        counts, distinct_counts = await _read(queryable, plans, alongside, arrived)
        return await anyio.to_thread.run_sync(lambda: compute(counts, distinct_counts))


def _labels(result: Result) -> Sequence[Mapping[str, str]]:
    """The labels of each line of an answer: a scalar or a string is one line."""
    if isinstance(result, Block):
        return result.labels
    if result and isinstance(result[0], Series):
        return [s.labels for s in as_vector(result)]
    return [{}]


def _read_key(plan: Plan) -> SliceRange:
    """The slices a plan reads: its grid's, summed from the precision read."""
    choice = plan.choice
    precision = choice.precision
    return SliceRange(precision, choice.grid.first, plan.last - precision, choice.read_precision)


async def _read(
    queryable: Queryable,
    plans: Sequence[Plan],
    alongside: Callable[[], Awaitable[None]] | None,
    arrived: float,
) -> tuple[dict[SliceRange, Read], list[list[int]]]:
    """The slices of every query, one read per ``SliceRange`` for all of them
    (shared with the requests that arrived before it started), and the unions each counts,
    concurrently."""
    groups: dict[SliceRange, dict[str, None]] = {}
    for plan in plans:
        groups.setdefault(_read_key(plan), {}).update(dict.fromkeys(plan.ids))
    reads = {
        span: asyncio.ensure_future(queryable.read_slices(list(ids), span, arrived))
        for span, ids in groups.items()
        if ids
    }
    counted = {
        i: asyncio.ensure_future(queryable.count_unions(plan.choice.precision, plan.unions.groups))
        for i, plan in enumerate(plans)
        if plan.unions.groups
    }
    also = [asyncio.ensure_future(alongside())] if alongside is not None else []
    await all_done([*reads.values(), *counted.values(), *also])
    unions = [counted[i].result() if i in counted else [] for i in range(len(plans))]
    return {span: task.result() for span, task in reads.items()}, unions


def _stored(plan: Plan, catalogue: Catalogue) -> tuple[str, ...]:
    """The stored metrics the query read, in the order of its selectors."""
    lists = [
        found
        for node in walk(plan.query.node)
        if isinstance(node, VectorSelector)
        for found in (plan.found.get(node, ()), plan.distinct.get(node, ()))
    ]

    def names() -> tuple[str, ...]:
        out = {catalogue.sources[d.labels[NAME_LABEL]].stored: None for ds in lists for d in ds}
        return tuple(out)

    return remembered("stored", [catalogue, *lists], names)
