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

from slicecount.core.memo import remembered
from slicecount.datasource import subtrees
from slicecount.datasource.concurrency import all_done
from slicecount.datasource.counts import Read, Rows, Tables, rows
from slicecount.datasource.discovery import SeriesInfo
from slicecount.datasource.distinct_times import collapse, expand
from slicecount.datasource.limits import POINT_BYTES, LimitExceeded, Limits, answer_points
from slicecount.datasource.planning import Plan, Query, plan_queries
from slicecount.datasource.prometheus.names import Catalogue
from slicecount.datasource.prometheus.plan import needs
from slicecount.datasource.reader import Reader
from slicecount.errors import MissingExtra
from slicecount.promql.arrays import Block
from slicecount.promql.ast import NAME_LABEL, Node, VectorSelector, walk
from slicecount.promql.engine import Evaluator, Result, as_vector
from slicecount.promql.values import EvaluationError, Grid, Series

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
    with reader.request() as arrived:
        return await _run(reader, queries, names, finish, alongside, arrived)


async def _run(
    reader: Reader,
    queries: Sequence[Query],
    names: Listing,
    finish: Finish,
    alongside: Callable[[], Awaitable[None]] | None,
    arrived: float,
) -> bytes:
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

    def compute(counts: Mapping[tuple[int, int, int, int], Read], distinct_counts: list[list[int]]
                ) -> bytes:  # fmt: skip
        answers = []
        budget = reader.limits.max_computed_points
        answered = 0  # points the answers carry, charged before any is encoded
        converted: dict[object, Rows] = {}  # targets alike (a panel's quantiles) share theirs
        for plan, counted in zip(plans, distinct_counts, strict=True):
            grid = plan.choice.grid
            read = counts.get(_read_key(plan), {})
            key = (_read_key(plan), tuple(plan.ids), plan.slices)
            if key not in converted:
                converted[key] = rows(read, plan.ids, plan.slices)
            data = Tables(plan.found, converted[key])
            collapsed = None if plan.unions.lines else collapse(grid, plan.query.node)
            on = collapsed[0] if collapsed else grid
            ready: dict[Node, Sequence[Series]] = dict(plan.unions.ready(counted))
            shared = None if plan.unions.lines else reader.shared_results(read)
            if shared is not None:  # aggregations other requests of the read compute too
                given, computed = subtrees.ready(
                    plan.query.node, on, data, budget, shared, plan.found
                )
                ready.update(given)
                budget -= computed
            evaluator = Evaluator(on, data, budget, ready)
            result = evaluator.evaluate(plan.query.node)
            budget -= evaluator.computed
            if collapsed:  # what was computed per reading is answered at every time
                budget -= _answered(result, len(grid.times), budget, reader.limits)
                result = expand(result, collapsed[1])
            answered += _encoded(plan.query, result, answered, reader.limits)
            answers.append(Answer(result, grid, plan.choice.infos, _stored(plan, catalogue)))
        return finish(answers, catalogue.warnings)

    if work <= reader.limits.max_inline_points:
        return compute(*await _read(reader, plans, alongside, arrived))
    async with reader.heavy():
        counts, distinct_counts = await _read(reader, plans, alongside, arrived)
        return await anyio.to_thread.run_sync(lambda: compute(counts, distinct_counts))


def _answered(result: Result, times: int, budget: int, limits: Limits) -> int:
    """The points of an answer at every time: EvaluationError past what is left of the
    budget."""
    points = (len(result) if result and isinstance(result[0], Series) else 1) * times
    if points > budget:
        raise EvaluationError(
            f"the query answers {points:,} points (its series x its times), more than "
            f"{limits.max_computed_points:,} with what it computed (max_computed_points): match "
            "fewer series, aggregate with sum by (...) or shorten the range"
        )
    return points


def _encoded(query: Query, result: Result, before: int, limits: Limits) -> int:
    """What encoding ``result`` at every time of ``query`` costs (``answer_points``):
    LimitExceeded when it and the answers ``before`` it pass ``max_answer_points``."""
    if isinstance(result, Block):
        labels: Sequence[Mapping[str, str]] = result.labels
    elif result and isinstance(result[0], Series):
        labels = [s.labels for s in as_vector(result)]
    else:
        labels = [{}]  # a scalar or a string: one line
    points = answer_points(labels, len(query.times))
    if before + points > limits.max_answer_points:
        raise LimitExceeded(
            f"the answer holds {before + points:,} points (target {query.label!r}: "
            f"{len(labels):,} series x {len(query.times):,} times, with their labels' text at "
            f"{POINT_BYTES} bytes a point), more than max_answer_points = "
            f"{limits.max_answer_points:,} (encoding an answer costs about 0.3 us and "
            f"{POINT_BYTES} bytes of JSON a point): aggregate with sum by (...), match fewer "
            "series, shorten the range or ask for fewer points"
        )
    return points


def _read_key(plan: Plan) -> tuple[int, int, int, int]:
    """(the grid's precision, its first and last boundary, the precision read)."""
    choice = plan.choice
    return choice.precision, choice.grid.first, plan.last, choice.read_precision


async def _read(
    reader: Reader,
    plans: Sequence[Plan],
    alongside: Callable[[], Awaitable[None]] | None,
    arrived: float,
) -> tuple[dict[tuple[int, int, int, int], Read], list[list[int]]]:
    """The slices of every query, one read per (precision, first, last) for all of them
    (shared with the requests that arrived before it started), and the unions each counts,
    concurrently."""
    groups: dict[tuple[int, int, int, int], dict[str, None]] = {}
    for plan in plans:
        groups.setdefault(_read_key(plan), {}).update(dict.fromkeys(plan.ids))
    reads = {
        key: asyncio.ensure_future(
            reader.read_slices(list(ids), key[0], key[1], key[2] - key[0], arrived, key[3])
        )
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
