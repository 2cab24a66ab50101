"""The endpoints of the Prometheus HTTP API, each ``(reader, params) -> JSON-ready answer``.

Each expression goes through the loop both surfaces share (``execute``): planned, its
series discovered and checked against the limits before any slice is read, then read once
per stored series and evaluated. No HTTP framework here: ``app`` routes the requests and
maps errors to Prometheus' envelopes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from slicecount.core.memo import by_identity
from slicecount.datasource.prometheus import results
from slicecount.datasource.prometheus.params import BadData, Params
from slicecount.datasource.render import Rendered, pieces
from slicecount.operations.batches import ping
from slicecount.promql.ast import Node, VectorSelector, walk
from slicecount.promql.engine import Result
from slicecount.query.catalogue import Catalogue, parse_promql
from slicecount.query.execute import Answer, run
from slicecount.query.planning import Query
from slicecount.query.precision import evaluation_times
from slicecount.reads.listing import SeriesInfo
from slicecount.reads.reader import Reader

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

    return await evaluate(reader, node, [t], None, answer, text[:40])


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

    return await evaluate(reader, node, times, step, answer, text[:40])


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
    label: str = "",
) -> Rendered:
    """One expression through the shared loop (``execute``): planned, discovered, checked,
    read, evaluated and encoded."""

    def finish(answers: list[Answer], warnings: tuple[str, ...]) -> list[bytes]:
        (one,) = answers
        key = (step, tuple(times), one.infos, warnings)  # all that the body is made of
        return reader.repeats.encoded(
            one.result, key, lambda: pieces(answer(one.result, one.infos, warnings))
        )

    query = Query(node, tuple(times), step, label)
    return Rendered(await run(reader, [query], prometheus_names, finish))


@by_identity  # a dashboard's requests ask with the discovery cache's same lists
def prometheus_names(counters: Sequence[SeriesInfo], uniques: Sequence[SeriesInfo]) -> Catalogue:
    """The names PromQL selectors match: every stored metric as Prometheus exposes it."""
    return Catalogue.of({s.name for s in counters}, {s.name for s in uniques})
