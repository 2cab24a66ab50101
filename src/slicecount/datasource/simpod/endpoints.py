"""One function per POST endpoint: a checked JSON body in, a JSON-ready answer out.

Each composes the pure steps (targets, discovery, frames) around the Reader's I/O and the one
query loop (``execute``), and raises QueryError (or LimitExceeded) for the app to map to 4xx.
No HTTP framework here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from slicecount.core.memo import by_identity
from slicecount.core.slices import slice_starts
from slicecount.datasource.render import Rendered, pieces
from slicecount.datasource.simpod import pickers, shapes
from slicecount.datasource.simpod.protocol import (
    Target,
    adhoc_matchers,
    annotation_tags,
    compile_target,
    is_annotation_query,
    parse_range,
    positive_number,
    require_object,
    visible_targets,
)
from slicecount.errors import LimitExceeded, QueryError
from slicecount.promql.arrays import Block
from slicecount.promql.ast import Call
from slicecount.promql.engine import Result
from slicecount.promql.values import EvaluationError, Series, without_name
from slicecount.query.catalogue import Catalogue
from slicecount.query.execute import Answer, run
from slicecount.query.planning import Query
from slicecount.query.precision import panel_step
from slicecount.reads.listing import SeriesInfo
from slicecount.reads.reader import Reader
from slicecount.reads.sharing import all_done
from slicecount.targets import grammar, rewrites

Body = Mapping[str, Any]


async def query(reader: Reader, body: Body) -> Rendered:
    """/query: every target compiled to PromQL (``targets``) and planned, then all of them run
    by the one loop (``execute``): discovered, checked, read together and evaluated; frames
    in target order, each point dated by the start of its slices."""
    start, end = parse_range(body, reader.limits)
    adhoc = adhoc_matchers(body)
    interval_ms = positive_number(body, "intervalMs") or 0.0
    max_points = positive_number(body, "maxDataPoints")
    wanted = max(interval_ms / 1000, (end - start) / max_points if max_points else 0.0)
    now = reader.clock()
    order: list[tuple[Target, Query | tuple[str, ...]]] = []
    for target in visible_targets(body, reader.limits):
        if is_annotation_query(body, target):
            order.append((target, tuple(annotation_tags(target.text))))
            continue
        node, pinned = compile_target(target, adhoc)
        unique = rewrites.reads_unique(node)
        step, among = panel_step(reader.settings, start, now, wanted, unique, pinned)
        starts = slice_starts(step, start, end)
        if len(starts) > reader.limits.max_points:
            raise LimitExceeded(
                f"{len(starts)} points per series at precision {step} s, more than the limit "
                f"of {reader.limits.max_points}: shorten the range or pick a coarser precision"
            )
        times = tuple([float(s + step) for s in starts])  # a point's slices end at its time
        label = target.ref_id or target.text[:40]
        order.append((target, Query(node, times, step, label, partial=True, among=among)))
    notes: list[list[dict[str, Any]]] = [[] for _ in order]

    async def annotations() -> None:
        asked = [(i, tags) for i, (_, tags) in enumerate(order) if isinstance(tags, tuple)]
        tasks = [asyncio.ensure_future(reader.annotations(start, end, t)) for _, t in asked]
        await all_done(tasks)
        for (i, _), task in zip(asked, tasks, strict=True):
            notes[i] = task.result()

    queries = [q for _, q in order if isinstance(q, Query)]

    def finish(answers: list[Answer], warnings: tuple[str, ...]) -> list[bytes]:
        found = iter(answers)
        out: list[dict[str, Any]] = []
        for (target, planned), noted in zip(order, notes, strict=True):
            if not isinstance(planned, Query):
                out.append(shapes.annotation_table(target.ref_id, noted))
                continue
            answer = next(found)
            lines = _lines(planned, answer, target.table)
            if target.table:
                out.append(shapes.table(target.ref_id, lines))
            else:
                starts = [int(t - planned.step) for t in planned.times]  # type: ignore[operator]
                out.extend(shapes.timeseries(target.ref_id, lines, starts))
        return pieces(out)

    try:
        noted = annotations if len(queries) < len(order) else None
        return Rendered(await run(reader, queries, _names, finish, noted))
    except EvaluationError as exc:  # past max_computed_points, or series that collide
        raise LimitExceeded(str(exc)) from None


@by_identity  # a dashboard's requests ask with the discovery cache's same lists
def _names(counters: Sequence[SeriesInfo], uniques: Sequence[SeriesInfo]) -> Catalogue:
    return grammar.catalogue((s.name for s in counters), (s.name for s in uniques))


def _lines(query: Query, answer: Answer, table: bool) -> list[shapes.Line]:
    """The lines of a target: legends keep the metric read (``p95 `` before a quantile's).
    A time series' values stay an array (NaN: no sample, drawn as a gap like any value
    that is not finite); a table's are lists, whose total skips the points with no sample."""
    name = answer.stored[0] if answer.stored else ""
    q = rewrites.quantile_of(query.node)
    if q is not None:
        name = f"p{q * 100:g} {name}".rstrip()
    block = _block(answer.result, len(query.times))
    order = list(range(len(block)))
    node = query.node
    if not (isinstance(node, Call) and node.func in ("sort", "sort_desc")):
        order.sort(key=lambda i: sorted(block.labels[i].items()))
    points = None if table else block.gaps()
    lines = []
    for i in order:
        tags = without_name(block.labels[i])
        values = block.row(i) if points is None else points[i]
        lines.append(shapes.Line(shapes.legend(name, tags), tags, values))
    return lines


def _block(result: Result, points: int) -> Block:
    if isinstance(result, str):
        raise QueryError("a target must yield numbers or series, not a string")
    if isinstance(result, Block):
        return result
    if (result and not isinstance(result[0], Series)) or (not result and points == 0):
        return Block.of([Series({}, list(result))], points)  # type: ignore[arg-type]  # a scalar: one line
    return Block.of(result, points)  # type: ignore[arg-type]  # series


async def search(reader: Reader, body: Body) -> list[str]:
    """Legacy /search: names containing the text, or a variable query."""
    target = body.get("target", "")
    names = await reader.names()
    if isinstance(target, str) and "(" in target:
        return pickers.variable(
            target, names, await reader.everything(), await reader.all_uniques()
        )
    return pickers.search(names + await _unique_entries(reader), target)


async def _unique_entries(reader: Reader) -> list[str]:
    """Every unique metric as Grafana lists it: ``unique(name)``."""
    names = {s.name for s in await reader.all_uniques()}
    return [pickers.unique_entry(n) for n in sorted(names)]


async def metrics(reader: Reader, body: Body) -> list[dict[str, Any]]:
    """simPod /metrics: every metric with its builder payloads (options for the one asked)."""
    names = await reader.names() + await _unique_entries(reader)
    histograms = await reader.histograms()
    metric = body.get("metric")
    asked = await _series_of_entry(reader, metric) if isinstance(metric, str) and metric else None
    return [
        pickers.metric_entry(
            name, name in histograms, reader.settings, asked if name == metric else None
        )
        for name in names
    ]


async def _series_of_entry(reader: Reader, entry: str) -> list[SeriesInfo]:
    """The series of a listed metric, a unique one's (``unique(name)``) among unique series."""
    name, unique = pickers.entry_metric(entry)
    everything = await (reader.all_uniques() if unique else reader.everything())
    return pickers.of_metric(everything, [name])


async def metric_payload_options(reader: Reader, body: Body) -> list[dict[str, str]]:
    metric, name = body.get("metric"), body.get("name")
    if not isinstance(metric, str) or not isinstance(name, str):
        raise QueryError("'metric' and 'name' must be strings")
    series = await _series_of_entry(reader, metric)
    histogram = metric in await reader.histograms()
    return pickers.payload_options(metric, name, histogram, reader.settings, series)


async def variable(reader: Reader, body: Body) -> list[dict[str, str]]:
    payload = require_object(body.get("payload", {}), "'payload'")
    text = payload.get("target", payload.get("query", ""))
    if not isinstance(text, str):
        raise QueryError(f"payload.target must be a string, got {text!r}")
    names = await reader.names()
    values = pickers.variable(text, names, await reader.everything(), await reader.all_uniques())
    return [{"__text": v, "__value": v} for v in values]


async def tag_keys(reader: Reader, body: Body) -> list[dict[str, str]]:
    keys = pickers.label_names([*await reader.everything(), *await reader.all_uniques()])
    return [{"type": "string", "text": k} for k in keys]


async def tag_values(reader: Reader, body: Body) -> list[dict[str, str]]:
    key = body.get("key")
    if not isinstance(key, str) or not key:
        raise QueryError("'key' must be a label name")
    series = [*await reader.everything(), *await reader.all_uniques()]
    return [{"text": v} for v in pickers.label_values(series, key)]


async def legacy_annotations(reader: Reader, body: Body) -> list[dict[str, Any]]:
    """Legacy /annotations."""
    start, end = parse_range(body, reader.limits)
    annotation = require_object(body.get("annotation", {}), "'annotation'")
    found = await reader.annotations(start, end, annotation_tags(annotation.get("query", "")))
    return shapes.legacy_annotations(annotation, found)
