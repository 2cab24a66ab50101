"""One function per POST endpoint: a checked JSON body in, a JSON-ready answer out.

Each composes the pure steps (targets, discovery, frames) around the Reader's I/O and the one
query loop (``execute``), and raises QueryError (or LimitExceeded) for the app to map to 4xx.
No HTTP framework here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from slicecount.core.slices import slice_starts
from slicecount.datasource import discovery, frames, rewrites, targets
from slicecount.datasource.concurrency import all_done
from slicecount.datasource.discovery import SeriesInfo
from slicecount.datasource.execute import Answer, run
from slicecount.datasource.limits import LimitExceeded
from slicecount.datasource.planning import Query
from slicecount.datasource.prometheus.names import Catalogue
from slicecount.datasource.prometheus.plan import panel_step
from slicecount.datasource.protocol import (
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
from slicecount.datasource.reader import Reader
from slicecount.datasource.render import Rendered, render
from slicecount.errors import QueryError
from slicecount.promql.ast import Call
from slicecount.promql.engine import Result
from slicecount.promql.values import EvaluationError, Series, without_name

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

    def finish(answers: list[Answer], warnings: tuple[str, ...]) -> bytes:
        found = iter(answers)
        out: list[dict[str, Any]] = []
        for (target, planned), noted in zip(order, notes, strict=True):
            if not isinstance(planned, Query):
                out.append(frames.annotation_table(target.ref_id, noted))
                continue
            answer = next(found)
            lines = _lines(planned, answer)
            if target.table:
                out.append(frames.table(target.ref_id, lines))
            else:
                starts = [int(t - planned.step) for t in planned.times]  # type: ignore[operator]
                out.extend(frames.timeseries(target.ref_id, lines, starts))
        return render(out)

    try:
        noted = annotations if len(queries) < len(order) else None
        return Rendered(await run(reader, queries, _names, finish, noted))
    except EvaluationError as exc:  # past max_computed_points, or series that collide
        raise LimitExceeded(str(exc)) from None


def _names(counters: Sequence[SeriesInfo], uniques: Sequence[SeriesInfo]) -> Catalogue:
    return targets.catalogue((s.name for s in counters), (s.name for s in uniques))


def _lines(query: Query, answer: Answer) -> list[frames.Line]:
    """The lines of a target: legends keep the metric read (``p95 `` before a quantile's)."""
    name = answer.stored[0] if answer.stored else ""
    q = rewrites.quantile_of(query.node)
    if q is not None:
        name = f"p{q * 100:g} {name}".rstrip()
    series = _series(answer.result, len(query.times))
    node = query.node
    if not (isinstance(node, Call) and node.func in ("sort", "sort_desc")):
        series = sorted(series, key=lambda s: sorted(s.labels.items()))
    lines = []
    for s in series:
        tags = without_name(s.labels)
        lines.append(frames.Line(frames.legend(name, tags), tags, s.values))
    return lines


def _series(result: Result, points: int) -> list[Series]:
    if isinstance(result, str):
        raise QueryError("a target must yield numbers or series, not a string")
    if (result and not isinstance(result[0], Series)) or (not result and points == 0):
        return [Series({}, list(result))]  # type: ignore[arg-type]  # a scalar: one line
    return result  # type: ignore[return-value]


async def search(reader: Reader, body: Body) -> list[str]:
    """Legacy /search: names containing the text, or a variable query."""
    target = body.get("target", "")
    names = await reader.names()
    if isinstance(target, str) and "(" in target:
        return discovery.variable(
            target, names, await reader.everything(), await reader.all_uniques()
        )
    return discovery.search(names + await _unique_entries(reader), target)


async def _unique_entries(reader: Reader) -> list[str]:
    """Every unique metric as Grafana lists it: ``unique(name)``."""
    names = {s.name for s in await reader.all_uniques()}
    return [discovery.unique_entry(n) for n in sorted(names)]


async def metrics(reader: Reader, body: Body) -> list[dict[str, Any]]:
    """simPod /metrics: every metric with its builder payloads (options for the one asked)."""
    names = await reader.names() + await _unique_entries(reader)
    histograms = await reader.histograms()
    metric = body.get("metric")
    asked = await _series_of_entry(reader, metric) if isinstance(metric, str) and metric else None
    return [
        discovery.metric_entry(
            name, name in histograms, reader.settings, asked if name == metric else None
        )
        for name in names
    ]


async def _series_of_entry(reader: Reader, entry: str) -> list[SeriesInfo]:
    """The series of a listed metric, a unique one's (``unique(name)``) among unique series."""
    name, unique = discovery.entry_metric(entry)
    everything = await (reader.all_uniques() if unique else reader.everything())
    return discovery.of_metric(everything, [name])


async def metric_payload_options(reader: Reader, body: Body) -> list[dict[str, str]]:
    metric, name = body.get("metric"), body.get("name")
    if not isinstance(metric, str) or not isinstance(name, str):
        raise QueryError("'metric' and 'name' must be strings")
    series = await _series_of_entry(reader, metric)
    histogram = metric in await reader.histograms()
    return discovery.payload_options(metric, name, histogram, reader.settings, series)


async def variable(reader: Reader, body: Body) -> list[dict[str, str]]:
    payload = require_object(body.get("payload", {}), "'payload'")
    text = payload.get("target", payload.get("query", ""))
    if not isinstance(text, str):
        raise QueryError(f"payload.target must be a string, got {text!r}")
    names = await reader.names()
    values = discovery.variable(text, names, await reader.everything(), await reader.all_uniques())
    return [{"__text": v, "__value": v} for v in values]


async def tag_keys(reader: Reader, body: Body) -> list[dict[str, str]]:
    keys = discovery.label_names([*await reader.everything(), *await reader.all_uniques()])
    return [{"type": "string", "text": k} for k in keys]


async def tag_values(reader: Reader, body: Body) -> list[dict[str, str]]:
    key = body.get("key")
    if not isinstance(key, str) or not key:
        raise QueryError("'key' must be a label name")
    series = [*await reader.everything(), *await reader.all_uniques()]
    return [{"text": v} for v in discovery.label_values(series, key)]


async def legacy_annotations(reader: Reader, body: Body) -> list[dict[str, Any]]:
    """Legacy /annotations."""
    start, end = parse_range(body, reader.limits)
    annotation = require_object(body.get("annotation", {}), "'annotation'")
    found = await reader.annotations(start, end, annotation_tags(annotation.get("query", "")))
    return frames.legacy_annotations(annotation, found)
