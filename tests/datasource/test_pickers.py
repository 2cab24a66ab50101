"""Answers for Grafana's pickers and variables, from series already discovered. Pure: no Redis."""

from __future__ import annotations

import pytest

from slicecount.config import Settings
from slicecount.core.series import encode
from slicecount.datasource.simpod.pickers import (
    label_names,
    label_values,
    metric_entry,
    of_metric,
    payload_options,
    precision_options,
    search,
    variable,
)
from slicecount.errors import QueryError
from slicecount.reads.listing import SeriesInfo


def info(name: str, **labels: str) -> SeriesInfo:
    return SeriesInfo(encode(name, labels), name, labels)


EVERYTHING = [
    info("http.requests", method="GET", route="/a", status="200"),
    info("http.requests", method="POST", route="/b.c", status="500"),
    info("h.bucket", le="0.1", route="/a"),
    info("db.queries", operation="SELECT"),
]
NAMES = ["db.queries", "h", "h.bucket", "http.requests"]


def test_series_info_is_a_named_record() -> None:
    series = EVERYTHING[2]
    assert series.id == 'h.bucket{le="0.1",route="/a"}'
    assert (series.name, series.labels) == ("h.bucket", {"le": "0.1", "route": "/a"})


def test_a_histogram_name_covers_its_buckets_and_le_is_no_label_to_pick() -> None:
    assert of_metric(EVERYTHING, ["h"]) == [EVERYTHING[2]]
    assert of_metric(EVERYTHING, ["db.queries", "nope"]) == [EVERYTHING[3]]
    assert label_names(EVERYTHING) == ["method", "operation", "route", "status"]
    assert label_values(EVERYTHING, "route") == ["/a", "/b.c"]
    assert label_values(EVERYTHING, "absent") == []


def test_search_undoes_grafana_escaping_and_ignores_case() -> None:
    assert search(NAMES, r"http\.req") == ["http.requests"]
    assert search(NAMES, "H.B") == ["h.bucket"]
    assert search(NAMES, "") == NAMES
    assert search(NAMES, 5) == NAMES  # not text: everything, as an empty search


def test_variable_queries() -> None:
    assert variable("metrics()", NAMES, EVERYTHING) == NAMES
    assert variable(r"metrics(h.*)", NAMES, EVERYTHING) == ["h", "h.bucket", "http.requests"]
    assert variable("label_names(http.requests)", NAMES, EVERYTHING) == [
        "method",
        "route",
        "status",
    ]
    assert variable("label_values(route)", NAMES, EVERYTHING) == ["/a", "/b.c"]
    selected = 'label_values(http.requests{status="500"}, route)'
    assert variable(selected, NAMES, EVERYTHING) == ["/b.c"]
    assert variable("db", NAMES, EVERYTHING) == ["db.queries"]  # not a function: a search
    with pytest.raises(QueryError, match="needs a label name"):
        variable("label_values(http.requests, )", NAMES, EVERYTHING)
    with pytest.raises(QueryError, match="expected a metric selector"):
        variable("label_names(rate(x))", NAMES, EVERYTHING)


def test_builder_payloads_and_their_options() -> None:
    settings = Settings(precisions=(1, 90, 3600, 86400))
    assert [o["label"] for o in precision_options(settings)] == [
        "auto", "1 s", "90 s", "1 h", "1 d",
    ]  # fmt: skip
    short = metric_entry("http.requests", False, settings, None)
    assert short["value"] == "http.requests"
    assert [p["name"] for p in short["payloads"]] == ["function", "group_by", "precision"]
    assert [o["value"] for o in short["payloads"][0]["options"]] == ["count", "rate"]
    full = metric_entry("http.requests", False, settings, of_metric(EVERYTHING, ["http.requests"]))
    by_name = {p["name"]: p for p in full["payloads"]}
    assert list(by_name) == ["function", "group_by", "precision", "method", "route", "status"]
    assert by_name["route"]["options"] == [
        {"label": "/a", "value": r"\/a"},
        {"label": "/b.c", "value": r"\/b\.c"},
    ]
    histogram = of_metric(EVERYTHING, ["h"])
    functions = payload_options("h", "function", True, settings, histogram)
    assert [o["value"] for o in functions] == ["count", "rate", "p50", "p90", "p95", "p99"]
    assert payload_options("h", "group_by", True, settings, histogram) == [
        {"label": "route", "value": "route"}
    ]
    assert payload_options("h", "precision", True, settings, histogram)[1]["value"] == "1"
