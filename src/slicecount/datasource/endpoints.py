"""One function per POST endpoint: a checked JSON body in, a JSON-ready answer out.

Each composes the pure steps (plan, discovery, budget, evaluate, frames) around the Reader's I/O
and raises QueryError (or LimitExceeded) for the app to map to 4xx. No HTTP framework here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slicecount.datasource import discovery, frames, unique_reader
from slicecount.datasource.budget import check_work, work_of
from slicecount.datasource.discovery import SeriesInfo
from slicecount.datasource.evaluate import Series, evaluate
from slicecount.datasource.nodes import Node
from slicecount.datasource.plan import (
    AnnotationQuery,
    Chosen,
    QueryPlan,
    SeriesQuery,
    filled,
    plan_query,
)
from slicecount.datasource.protocol import annotation_tags, parse_range, require_object
from slicecount.datasource.reader import Loaded, Reader
from slicecount.datasource.render import Rendered, render
from slicecount.errors import MissingExtra, QueryError

try:
    import anyio.to_thread
except ModuleNotFoundError as exc:
    raise MissingExtra("datasource", exc, "the datasource") from exc

Body = Mapping[str, Any]


async def query(reader: Reader, body: Body) -> Rendered:
    """/query: every target planned, its series discovered and its work checked, then read
    together and evaluated; frames in target order.

    A heavy request (more than ``max_inline_points``) waits for its turn, then is evaluated
    and encoded in a worker thread: the event loop stays free for light requests."""
    plan = plan_query(body, reader.settings, reader.limits, reader.clock())
    chosen = await reader.discover(plan)
    picked = await unique_reader.discover(reader, plan)
    work = check_work(
        {
            q: work_of(q, chosen[q]) + unique_reader.work(q, picked.get(q))
            for q in plan.series_queries
        },
        reader.limits,
    )
    if work.points <= reader.limits.max_inline_points:
        loaded = await reader.read(plan, chosen)
        unions = await unique_reader.read(reader, plan, picked)
        return Rendered(render(answer(plan, chosen, loaded, unions)))
    async with reader.heavy():
        loaded = await reader.read(plan, chosen)
        unions = await unique_reader.read(reader, plan, picked)
        body_bytes = await anyio.to_thread.run_sync(
            lambda: render(answer(plan, chosen, loaded, unions))
        )
        return Rendered(body_bytes)


def answer(
    plan: QueryPlan,
    chosen: Mapping[SeriesQuery, Chosen],
    loaded: Loaded,
    unions: Mapping[SeriesQuery, Mapping[Node, list[Series]]] | None = None,
) -> list[dict[str, Any]]:
    """The frames of every target from what was read. Pure."""
    out: list[dict[str, Any]] = []
    for planned in plan.targets:
        ref_id = planned.target.ref_id
        if isinstance(planned, AnnotationQuery):
            out.append(frames.annotation_table(ref_id, loaded.annotations[planned]))
            continue
        timeline = planned.timeline
        data = filled(chosen[planned], timeline, loaded.counts.get(timeline, {}))
        counted = (unions or {}).get(planned)
        series = evaluate(planned.node, data, timeline, unions=counted)
        if planned.target.table:
            out.append(frames.table(ref_id, series))
        else:
            out.extend(frames.timeseries(ref_id, series, timeline))
    return out


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
