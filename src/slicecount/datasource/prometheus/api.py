"""The endpoints of the Prometheus HTTP API, each ``(reader, params) -> JSON-ready answer``.

Queries are planned (precision, slices), their series discovered and checked against the
limits before any slice is read; then read once per stored series and evaluated. No HTTP
framework here: ``app`` routes the requests and maps errors to Prometheus' envelopes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Any

from slicecount.batches import ping
from slicecount.datasource.limits import LimitExceeded
from slicecount.datasource.prometheus import results, uniques
from slicecount.datasource.prometheus.names import Catalogue, Derived, derive, parse_promql
from slicecount.datasource.prometheus.params import BadData, Params
from slicecount.datasource.prometheus.plan import (
    Need,
    choose,
    evaluation_times,
    last_boundary,
    needs,
)
from slicecount.datasource.reader import Reader, all_done
from slicecount.datasource.render import Rendered, render
from slicecount.errors import MissingExtra
from slicecount.promql.ast import Node, VectorSelector, walk
from slicecount.promql.distinct import check, unions
from slicecount.promql.engine import Evaluator, Result
from slicecount.promql.values import Raw

try:
    import anyio.to_thread
except ModuleNotFoundError as exc:
    raise MissingExtra("datasource", exc, "the datasource") from exc

MAX_STEPS = 11_000
"""Evaluation times one range query may ask (Prometheus' own limit)."""


async def query(reader: Reader, params: Params) -> Rendered:
    """/api/v1/query: the value of an expression at one time (now by default)."""
    text = params.required("query")
    t = params.time("time", default=reader.clock())
    node = _parse(text)
    if not any(isinstance(item, VectorSelector) for item in walk(node)):
        # Grafana's "Save & test" asks ``1+1``: green only when a query of data would work
        await reader.store.run(ping(reader.store.context))

    def answer(result: Result, infos: tuple[str, ...], warnings: tuple[str, ...]) -> Any:
        return results.success(results.instant(result, node.type, t), warnings, infos)

    return await evaluate(reader, node, [t], None, answer)


async def query_range(reader: Reader, params: Params) -> Rendered:
    """/api/v1/query_range: the expression at ``start + k * step`` up to ``end``."""
    text = params.required("query")
    start, end = params.time("start"), params.time("end")
    step = params.duration("step")
    if end < start:
        raise BadData("invalid parameter 'end': end timestamp must not be before start time")
    if step <= 0:
        raise BadData(
            "invalid parameter 'step': zero or negative query resolution step widths are not "
            "accepted. Try a positive integer"
        )
    if len(evaluation_times(start, end, step, limit=MAX_STEPS + 2)) > MAX_STEPS + 1:
        raise BadData(
            f"exceeded maximum resolution of {MAX_STEPS:,} points per timeseries. Try "
            "decreasing the query resolution (?step=XX)"
        )
    node = _parse(text)
    if node.type not in ("scalar", "vector"):
        raise BadData(
            f"invalid expression type {_type_name(node)} for range query, must be Scalar or "
            "instant Vector"
        )
    times = evaluation_times(start, end, step)

    def answer(result: Result, infos: tuple[str, ...], warnings: tuple[str, ...]) -> Any:
        return results.success(results.matrix(result, node.type, times), warnings, infos)

    return await evaluate(reader, node, times, step, answer)


def _parse(text: str) -> Node:
    node = parse_promql(text)
    if node.type == "matrix":
        raise BadData(
            "a range vector alone (x[5m]) is not supported: wrap it in a function such as "
            "rate(), increase() or max_over_time()"
        )
    return node


def _type_name(node: Node) -> str:
    return {"matrix": '"range vector"', "string": '"string"'}.get(node.type, node.type)


async def evaluate(
    reader: Reader,
    node: Node,
    times: Sequence[float],
    step: float | None,
    answer: Callable[[Result, tuple[str, ...], tuple[str, ...]], Any],
) -> Rendered:
    """Plan, discover, check, read, evaluate and encode one expression. A heavy one (more
    than ``max_inline_points`` to read and compute) waits its turn and is evaluated and
    encoded in a worker thread, leaving the event loop to light requests."""
    limits = reader.limits
    catalogue, kinds = await uniques.survey(reader, needs(node))
    check(node, kinds.distinct, kinds.mixed)  # a sum of distinct counts: 400, nothing read
    wanted = uniques.with_steps(needs(node), catalogue, kinds, step)
    choice = choose(reader.settings, wanted, times, step, reader.clock(), limits.max_points)
    grid = choice.grid
    found = await _discover(reader, catalogue, wanted, grid.precision)
    distinct = await uniques.discover(reader, catalogue, kinds, grid.precision)
    planned = uniques.plan(grid, step, distinct, unions(node, kinds.distinct))
    ids = list(dict.fromkeys(p for derived in found.values() for d in derived for p in d.parts))
    last = last_boundary(grid, [n for n in wanted if not n.distinct])
    slices = (last - grid.first) // grid.precision
    if len(ids) + planned.series > limits.max_series:
        raise LimitExceeded(
            f"the query reads {len(ids) + planned.series:,} stored series, more than the "
            f"limit of {limits.max_series:,}: narrow it with label matchers"
        )
    if len(ids) * slices + planned.keys > limits.max_request_points:
        raise LimitExceeded(
            f"the query reads {len(ids) * slices + planned.keys:,} points ({len(ids):,} series "
            f"x {slices:,} slices of {grid.precision} s, {planned.keys:,} slices of unique "
            f"series), more than the work budget max_request_points = "
            f"{limits.max_request_points:,}: shorten the range or match fewer series"
        )

    def compute(counts: dict[str, list[int | None]], distinct_counts: list[int]) -> bytes:
        sums = Sums({i: _totals(counts.get(i, []), slices) for i in ids}, slices)
        data = {
            selector: [Raw(d.labels, sums.of(d.parts), d.scale) for d in derived]
            for selector, derived in found.items()
        }
        ready = planned.ready(distinct_counts)
        result = Evaluator(grid, data, limits.max_computed_points, ready).evaluate(node)
        return render(answer(result, choice.infos, catalogue.warnings))

    async def read() -> tuple[dict[str, list[int | None]], list[int]]:
        counted = asyncio.ensure_future(reader.count_unions(grid.precision, planned.groups))
        counts = asyncio.ensure_future(
            reader.read_slices(ids, grid.precision, grid.first, last - grid.precision)
        )
        await all_done([counted, counts])
        return counts.result(), counted.result()

    work = len(ids) * (slices + len(times)) + len(walk(node)) * len(times) + planned.keys
    if work <= limits.max_inline_points:
        return Rendered(compute(*await read()))
    async with reader.heavy():
        counts, distinct_counts = await read()
        return Rendered(await anyio.to_thread.run_sync(lambda: compute(counts, distinct_counts)))


async def _discover(
    reader: Reader, catalogue: Catalogue, wanted: Sequence[Need], precision: int
) -> dict[VectorSelector, list[Derived]]:
    """The counters and histograms each selector matches (its unique series: ``uniques``)."""
    per_need = [(need, catalogue.matching(need.selector, unique=False)) for need in wanted]
    stored = list(
        dict.fromkeys(catalogue.sources[n].stored for _, names in per_need for n in names)
    )
    tasks = [asyncio.ensure_future(reader.series_of(name, precision)) for name in stored]
    await all_done(tasks)
    series = {name: task.result() for name, task in zip(stored, tasks, strict=True)}
    out: dict[VectorSelector, list[Derived]] = {}
    for need, names in per_need:
        matched: list[Derived] = []
        for name in names:
            source = catalogue.sources[name]
            pairs = [(s.id, s.labels) for s in series[source.stored]]
            matched += [d for d in derive(name, source, pairs) if need.selector.matches(d.labels)]
        out[need.selector] = matched
    return out


def _totals(counts: Sequence[int | None], slices: int) -> list[int]:
    """Running totals at each boundary: 0 at the first, then after each slice."""
    if not counts:
        return [0] * (slices + 1)
    return [0, *accumulate(c or 0 for c in counts)]


class Sums:
    """The running totals of sums of stored series. A histogram's cumulative buckets are the
    prefixes of one list of parts, so each is the one below plus one series: remembered, the
    buckets of a label set cost one addition each, not one per bucket below."""

    def __init__(self, totals: dict[str, list[int]], slices: int) -> None:
        self.totals = totals
        self.known: dict[tuple[str, ...], list[int]] = {(): [0] * (slices + 1)}

    def of(self, parts: tuple[str, ...]) -> list[int]:
        found = self.known.get(parts)
        if found is None:
            if len(parts) == 1:
                found = self.totals[parts[0]]
            else:
                below, last = self.of(parts[:-1]), self.totals[parts[-1]]
                found = [a + b for a, b in zip(below, last, strict=True)]
            self.known[parts] = found
        return found
