"""One function per POST endpoint: a checked JSON body in, a JSON-ready answer out.

Each composes the pure steps (plan, discovery, evaluate, frames) around the Reader's I/O and
raises QueryError (or LimitExceeded) for the app to map to 4xx. No HTTP framework here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slicecount.datasource import discovery, frames
from slicecount.datasource.evaluate import evaluate
from slicecount.datasource.plan import AnnotationQuery, plan_query
from slicecount.datasource.protocol import annotation_tags, parse_range, require_object
from slicecount.datasource.reader import Reader
from slicecount.errors import QueryError

Body = Mapping[str, Any]


async def query(reader: Reader, body: Body) -> list[dict[str, Any]]:
    """/query: every target planned, read together, then evaluated; frames in target order."""
    plan = plan_query(body, reader.settings, reader.limits, reader.clock())
    loaded = await reader.load(plan)
    answer: list[dict[str, Any]] = []
    for planned in plan.targets:
        ref_id = planned.target.ref_id
        if isinstance(planned, AnnotationQuery):
            answer.append(frames.annotation_table(ref_id, loaded.annotations[planned]))
            continue
        series = evaluate(planned.node, loaded.series[planned], planned.timeline)
        if planned.target.table:
            answer.append(frames.table(ref_id, series))
        else:
            answer.extend(frames.timeseries(ref_id, series, planned.timeline))
    return answer


async def search(reader: Reader, body: Body) -> list[str]:
    """Legacy /search: names containing the text, or a variable query."""
    target = body.get("target", "")
    names = await reader.names()
    if isinstance(target, str) and "(" in target:
        return discovery.variable(target, names, await reader.everything())
    return discovery.search(names, target)


async def metrics(reader: Reader, body: Body) -> list[dict[str, Any]]:
    """simPod /metrics: every metric with its builder payloads (options for the one asked)."""
    names = await reader.names()
    histograms = await reader.histograms()
    metric = body.get("metric")
    everything = await reader.everything() if isinstance(metric, str) and metric else None
    return [
        discovery.metric_entry(
            name,
            name in histograms,
            reader.settings,
            discovery.of_metric(everything, [name]) if everything and name == metric else None,
        )
        for name in names
    ]


async def metric_payload_options(reader: Reader, body: Body) -> list[dict[str, str]]:
    metric, name = body.get("metric"), body.get("name")
    if not isinstance(metric, str) or not isinstance(name, str):
        raise QueryError("'metric' and 'name' must be strings")
    series = discovery.of_metric(await reader.everything(), [metric])
    histogram = metric in await reader.histograms()
    return discovery.payload_options(metric, name, histogram, reader.settings, series)


async def variable(reader: Reader, body: Body) -> list[dict[str, str]]:
    payload = require_object(body.get("payload", {}), "'payload'")
    text = payload.get("target", payload.get("query", ""))
    if not isinstance(text, str):
        raise QueryError(f"payload.target must be a string, got {text!r}")
    names = await reader.names()
    values = discovery.variable(text, names, await reader.everything())
    return [{"__text": v, "__value": v} for v in values]


async def tag_keys(reader: Reader, body: Body) -> list[dict[str, str]]:
    keys = discovery.label_names(await reader.everything())
    return [{"type": "string", "text": k} for k in keys]


async def tag_values(reader: Reader, body: Body) -> list[dict[str, str]]:
    key = body.get("key")
    if not isinstance(key, str) or not key:
        raise QueryError("'key' must be a label name")
    return [{"text": v} for v in discovery.label_values(await reader.everything(), key)]


async def legacy_annotations(reader: Reader, body: Body) -> list[dict[str, Any]]:
    """Legacy /annotations."""
    start, end = parse_range(body, reader.limits)
    annotation = require_object(body.get("annotation", {}), "'annotation'")
    found = await reader.annotations(start, end, annotation_tags(annotation.get("query", "")))
    return frames.legacy_annotations(annotation, found)
