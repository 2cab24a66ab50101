"""Grafana frame shapes from evaluated series. Pure: no Redis."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from slicecount.datasource.render import render
from slicecount.datasource.simpod.shapes import (
    Line,
    Value,
    annotation_table,
    datapoints,
    legacy_annotations,
    legend,
    number,
    points_template,
    table,
    timeseries,
)

T0 = 1_700_000_040  # a multiple of 60
STARTS = range(T0, T0 + 180, 60)


def test_numbers_whole_values_as_integers_and_not_finite_as_null() -> None:
    assert number(None) is None
    assert number(60.0) == 60 and isinstance(number(60.0), int)
    assert number(0.5) == 0.5
    assert number(7) == 7 and isinstance(number(7), int)
    assert number(math.inf) is None and number(-math.inf) is None and number(math.nan) is None


@pytest.mark.parametrize(
    "values",
    [
        [60, None, 0, 3],  # counts as read: ints and None
        [60.0, 0.5, None, -2.25, 1e16, 1e-7, 123456789.125, 2.0**60],
        [math.inf, 1.0, math.nan, -math.inf, None],
        [5, 2.5, None, 7.0, 2**70, -(2**63)],  # mixed, and ints past 64 bits
        [],
    ],
)
def test_datapoints_text_is_what_json_dumps_writes(values: list[Value]) -> None:
    stamps = [(T0 + 60 * i) * 1000 for i in range(len(values))]
    plain = [[number(v), t] for v, t in zip(values, stamps, strict=True)]
    expected = json.dumps(plain, allow_nan=False, separators=(",", ":"))
    template = points_template([T0 + 60 * i for i in range(len(values))])
    assert datapoints(values, template) == expected


def test_timeseries_one_frame_per_series_value_first_milliseconds_ascending() -> None:
    series = [
        Line(legend("http.requests", {"status": "200"}), {"status": "200"}, [60.0, 0.5, None]),
        Line(legend("", {}), {}, [1.0, 2.0, 3.0]),
    ]
    frames = timeseries("A", series, STARTS)
    assert json.loads(render(frames)) == [
        {
            "target": 'http.requests{status="200"}',
            "refId": "A",
            "tags": {"status": "200"},
            "datapoints": [[60, T0 * 1000], [0.5, (T0 + 60) * 1000], [None, (T0 + 120) * 1000]],
        },
        {
            "target": "{}",
            "refId": "A",
            "tags": {},
            "datapoints": [[1, T0 * 1000], [2, (T0 + 60) * 1000], [3, (T0 + 120) * 1000]],
        },
    ]
    # compact JSON, the keys in the order Grafana's plugins have always received them
    assert render(frames).startswith(b'[{"target":"http.requests{status=\\"200\\"}","refId":')
    assert list(frames[0]) == ["target", "refId", "tags", "datapoints"]


def test_table_has_a_column_per_label_but_le_then_total_and_last() -> None:
    tags = [{"route": "/a", "le": "0.1"}, {"method": "GET"}]
    series = [
        Line(legend("h.bucket", tags[0]), tags[0], [1.0, None, 2.5]),
        Line(legend("h.bucket", tags[1]), tags[1], [None, None, None]),
    ]
    frame = table("T", series)
    assert frame == {
        "type": "table",
        "refId": "T",
        "columns": [
            {"text": "series", "type": "string"},
            {"text": "method", "type": "string"},
            {"text": "route", "type": "string"},
            {"text": "total", "type": "number"},
            {"text": "last", "type": "number"},
        ],
        "rows": [
            ['h.bucket{le="0.1",route="/a"}', "", "/a", 3.5, 2.5],
            ['h.bucket{method="GET"}', "GET", "", None, None],
        ],
    }


def test_annotation_table_maps_fields_by_name_and_joins_tags() -> None:
    found: list[dict[str, Any]] = [
        {"time": 1000, "timeEnd": 2000, "title": "deploy", "text": "v1.2", "tags": ["a", "b"]},
        {"time": 3000},
    ]
    frame = annotation_table("Anno", found)
    assert [c["text"] for c in frame["columns"]] == ["time", "timeEnd", "title", "text", "tags"]
    assert [c["type"] for c in frame["columns"]] == ["time", "time", "string", "string", "string"]
    assert frame["refId"] == "Anno" and frame["type"] == "table"
    assert frame["rows"] == [[1000, 2000, "deploy", "v1.2", "a,b"], [3000, 3000, "", "", ""]]
    frame["columns"][0]["text"] = "changed"  # each answer owns its columns
    assert annotation_table("Anno", [])["columns"][0]["text"] == "time"


def test_legacy_annotations_echo_the_request_annotation() -> None:
    request = {"name": "Deploys", "query": "#deploy"}
    (item,) = legacy_annotations(request, [{"time": 5000, "tags": ["deploy"]}])
    assert item == {
        "annotation": request,
        "time": 5000,
        "timeEnd": 5000,
        "title": "",
        "text": "",
        "tags": ["deploy"],
    }
