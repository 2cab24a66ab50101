"""Grafana's answer shapes, built from evaluated series and annotations. Pure.

Time series ``{"target", "refId", "tags", "datapoints": [[value, epoch_ms], ...]}`` (each point
dated by the start of its slices), tables
``{"type": "table", "refId", "columns", "rows"}``, and the legacy ``/annotations`` items; see
docs/datasource.md (the simPod protocol). Every frame echoes its ``refId``. A value that is
not finite (``1e400``, ``x * 1e308 * 10``) is ``null``: JSON has no Infinity and Grafana draws
a gap.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, cast

from slicecount.core.histogram import LE_LABEL
from slicecount.datasource.numbers import datapoint_items
from slicecount.datasource.render import Fragment
from slicecount.errors import extra_imports
from slicecount.promql.arrays import Floats

with extra_imports("datasource", "the datasource"):
    import numpy as np

Value = int | float | None

BULK_POINTS = 1 << 16
"""Points written by one call of ``datapoint_items``: each of its C routines holds the
interpreter lock for the whole call, and a million points held it ~50 ms, in which the event
loop answered no light request."""


class Line(NamedTuple):
    """One evaluated series as a frame shows it: its legend, its labels (the frame's tags)
    and a value per point (None, or NaN in an array: no sample)."""

    legend: str
    tags: dict[str, str]
    values: Sequence[Value] | Floats


def legend(name: str, tags: Mapping[str, str]) -> str:
    """``name{k="v",...}`` (labels sorted), the name alone, or ``{}``."""
    body = ",".join(f'{k}="{v}"' for k, v in sorted(tags.items()))
    if not body:
        return name or "{}"
    return f"{name}{{{body}}}"


Annotation = Mapping[str, Any]
"""An annotation as the store returns it: ``time`` (ms), optional ``timeEnd``, ``title``,
``text``, ``tags``."""

ANNOTATION_COLUMNS = (
    {"text": "time", "type": "time"},
    {"text": "timeEnd", "type": "time"},
    {"text": "title", "type": "string"},
    {"text": "text", "type": "string"},
    {"text": "tags", "type": "string"},
)
"""The field names Grafana maps an annotation table by (simPod's annotations via /query)."""


def number(value: Value) -> float | int | None:
    """Whole values as integers (``60``, not ``60.0``): counts read as counts; a value that
    is not finite as None."""
    if value is None or isinstance(value, int):
        return value
    if value.is_integer():
        return int(value)
    return value if math.isfinite(value) else None


def timeseries(ref_id: str, lines: Sequence[Line], starts: Sequence[int]) -> list[dict[str, Any]]:
    """One time series frame per line, points in ascending time (ms) of ``starts``. The
    values of lines given as arrays are written together (one pass over all of them)."""
    template = points_template(starts)
    arrays = [line.values for line in lines if isinstance(line.values, np.ndarray)]
    width = len(starts)
    rows = max(1, BULK_POINTS // max(width, 1))  # lines written by one call
    found: list[Sequence[int | str]] = []
    for at in range(0, len(arrays), rows):
        bulk = datapoint_items(np.stack(arrays[at : at + rows]))
        found += [bulk[i * width : (i + 1) * width] for i in range(len(arrays[at : at + rows]))]
    items = iter(found)
    return [
        {
            "target": line.legend,
            "refId": ref_id,
            "tags": line.tags,
            "datapoints": Fragment(
                template % tuple(next(items))
                if isinstance(line.values, np.ndarray)
                else datapoints(line.values, template)
            ),
        }
        for line in lines
    ]


def points_template(starts: Sequence[int]) -> str:
    """``[[%s,<ms>],...]`` for slices ``starts``: the datapoints of a series are its values
    put in by one ``%`` (in C, with no list per point: 500 000 points take ~30 ms)."""
    return "[" + ",".join([f"[%s,{start * 1000}]" for start in starts]) + "]"


def datapoints(values: Sequence[Value] | Floats, template: str) -> str:
    """The datapoints of ``values`` as JSON text, exactly as ``json.dumps`` writes them: ``%s``
    of an int, or of a float that is not whole, is its JSON text; None becomes null."""
    if isinstance(values, np.ndarray):
        return template % tuple(datapoint_items(values))
    if _all_ints(values):  # counts as they were stored: the usual case, checked in C
        return template % tuple(values)
    if float in map(type, values):
        values = [number(v) for v in values]
    return (template % tuple(values)).replace("[None,", "[null,")  # the rest is digits


def _all_ints(values: Sequence[Value]) -> bool:
    """True when every value is an int of 64 bits (no None, no float), without a Python loop."""
    try:
        array("q", cast("Sequence[int]", values))  # refuses anything else with TypeError
    except (TypeError, OverflowError):
        return False
    return True


def table(ref_id: str, lines: Sequence[Line]) -> dict[str, Any]:
    """One row per line: its legend, one column per label, the total and the last value."""
    labels = sorted({k for line in lines for k in line.tags if k != LE_LABEL})
    columns = [{"text": "series", "type": "string"}]
    columns += [{"text": label, "type": "string"} for label in labels]
    columns += [{"text": "total", "type": "number"}, {"text": "last", "type": "number"}]
    rows = []
    for line in lines:
        if isinstance(line.values, np.ndarray):
            raise TypeError("a table's lines are lists: None tells no sample from NaN")
        present = [v for v in line.values if v is not None]
        total = number(sum(present)) if present else None
        last = number(present[-1]) if present else None
        rows.append([line.legend, *(line.tags.get(label, "") for label in labels), total, last])
    return {"type": "table", "refId": ref_id, "columns": columns, "rows": rows}


def annotation_table(ref_id: str, found: Sequence[Annotation]) -> dict[str, Any]:
    """Annotations as the table simPod expects from /query; tags comma-separated."""
    rows = [
        [
            a["time"],
            a.get("timeEnd", a["time"]),
            a.get("title", ""),
            a.get("text", ""),
            ",".join(a.get("tags", [])),
        ]
        for a in found
    ]
    columns = [dict(c) for c in ANNOTATION_COLUMNS]
    return {"type": "table", "refId": ref_id, "columns": columns, "rows": rows}


def legacy_annotations(
    annotation: Mapping[str, Any], found: Sequence[Annotation]
) -> list[dict[str, Any]]:
    """The legacy /annotations answer: each item echoes the request's ``annotation``."""
    return [
        {
            "annotation": annotation,
            "time": a["time"],
            "timeEnd": a.get("timeEnd", a["time"]),
            "title": a.get("title", ""),
            "text": a.get("text", ""),
            "tags": a.get("tags", []),
        }
        for a in found
    ]
