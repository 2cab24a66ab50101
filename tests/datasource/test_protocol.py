"""Reading Grafana's request bodies into checked values. Pure: no Redis."""

from __future__ import annotations

from typing import Any

import pytest

from slicecount.config.request_limits import Limits
from slicecount.datasource.simpod.protocol import (
    Target,
    adhoc_matchers,
    annotation_tags,
    compile_target,
    is_annotation_query,
    parse_range,
    parse_time,
    payload_of,
    positive_number,
    regex_escape,
    visible_targets,
)
from slicecount.errors import LimitExceeded, QueryError
from slicecount.promql.ast import Aggregate, Call, Matcher, MatrixSelector, NumberLiteral
from slicecount.targets.grammar import parse

LIMITS = Limits(max_targets=3, max_range_seconds=86400)


def test_times_iso_or_epoch_milliseconds() -> None:
    assert parse_time("2024-06-06T09:05:02.250Z", "t") == 1717664702.25
    assert parse_time(1717664702250, "t") == 1717664702.25
    assert parse_time("1717664702250", "t") == 1717664702.25
    for bad in (True, None, "now-1h", -5, float("inf")):
        with pytest.raises(QueryError, match="t"):
            parse_time(bad, "t")


def test_range_checked_and_timerange_accepted() -> None:
    span = {"from": "2024-06-06T09:00:00Z", "to": "2024-06-06T10:00:00Z"}
    assert parse_range({"range": span}, LIMITS) == (1717664400.0, 1717668000.0)
    assert parse_range({"timeRange": span}, LIMITS) == (1717664400.0, 1717668000.0)
    with pytest.raises(QueryError, match="is after"):
        parse_range({"range": {"from": span["to"], "to": span["from"]}}, LIMITS)
    with pytest.raises(LimitExceeded, match="2 days, more than the limit of 1"):
        parse_range({"range": {"from": 0, "to": 2 * 86400_000}}, LIMITS)
    with pytest.raises(QueryError, match="'range' must be a JSON object"):
        parse_range({"range": "now-1h"}, LIMITS)


def test_resolution_hints() -> None:
    assert positive_number({"intervalMs": 2000}, "intervalMs") == 2000.0
    assert positive_number({"intervalMs": 0}, "intervalMs") is None
    assert positive_number({}, "intervalMs") is None
    for bad in (-1, "2s", True):
        with pytest.raises(QueryError, match="'intervalMs'"):
            positive_number({"intervalMs": bad}, "intervalMs")


def test_payload_from_every_plugin_version() -> None:
    assert payload_of({"payload": {"precision": "60"}}) == {"precision": "60"}
    assert payload_of({"payload": ""}) == {}
    assert payload_of({"payload": "{not json"}) == {}
    assert payload_of({}) == {}
    assert payload_of({"data": {"precision": "5"}}) == {"precision": "5"}
    with pytest.raises(QueryError, match="'payload'"):
        payload_of({"payload": [1]})


def test_visible_targets_skip_hidden_and_placeholders() -> None:
    body: dict[str, Any] = {
        "targets": [
            {"target": "a", "refId": "A", "type": "timeserie"},
            {"target": "b", "refId": "B", "hide": True},
            {"target": "select metric", "refId": "C"},
            {"target": "d", "refId": None, "type": "table"},
        ]
    }
    assert visible_targets(body, Limits()) == [
        Target("A", "a", False, {}),
        Target("", "d", True, {}),
    ]
    simpod = {"targets": [{"target": "x", "refId": "A", "payload": {"format": "table"}}]}
    assert visible_targets(simpod, Limits())[0].table is True
    with pytest.raises(LimitExceeded, match="4 targets"):
        visible_targets({"targets": [{"target": "x"}] * 4}, LIMITS)


def test_adhoc_filters_from_either_field() -> None:
    scenes = {"filters": [{"key": "route", "operator": "=|", "values": ["/a", "/b.c"]}]}
    (either,) = adhoc_matchers(scenes)
    assert (either.label, either.op, either.value) == ("route", "=~", r"\/a|\/b\.c")
    assert either.matches("/b.c") and not either.matches("/bxc")
    (nothing,) = adhoc_matchers({"filters": [{"key": "route", "operator": "=|", "values": []}]})
    assert not nothing.matches("") and not nothing.matches("/a")
    (anything,) = adhoc_matchers({"filters": [{"key": "route", "operator": "!=|", "values": []}]})
    assert anything.matches("/a")
    legacy = {"filters": [], "adhocFilters": [{"key": "status", "operator": ">", "value": 499}]}
    assert adhoc_matchers(legacy) == (Matcher("status", ">", "499"),)
    (above,) = adhoc_matchers(legacy)
    assert above.matches("500") and not above.matches("404") and not above.matches("n/a")
    with pytest.raises(QueryError, match="needs a string key"):
        adhoc_matchers({"filters": [{"key": 5}]})


def test_builder_payload_compiles_to_the_same_tree_as_the_code_editor() -> None:
    payload = {"function": "rate", "group_by": ["route"], "status": ["2..", "3.."],
               "precision": "300", "method": "GET"}  # fmt: skip
    node, pinned = compile_target(Target("A", "http.requests", False, payload), ())
    assert pinned == 300
    assert isinstance(node, Aggregate) and node.grouping == ("route",)
    rate = node.expr
    assert isinstance(rate, Call) and rate.func == "rate"
    window = rate.args[0]
    assert isinstance(window, MatrixSelector) and window.range == 0  # a point's slices
    assert [(m.label, m.value) for m in window.vector.matchers] == [
        ("__name__", "http.requests"),
        ("status", "(?:2..)|(?:3..)"),
        ("method", "GET"),
    ]
    code = parse('sum by (route) (rate(http.requests{status=~"(?:2..)|(?:3..)",method=~"GET"}))')
    assert repr(code) == repr(node)  # the builder and the code editor: one tree
    quantile, auto = compile_target(Target("A", "h", False, {"function": "p95"}), ())
    assert isinstance(quantile, Call) and quantile.func == "histogram_quantile" and auto is None
    assert isinstance(quantile.args[0], NumberLiteral) and quantile.args[0].value == 0.95
    adhoc = (Matcher.make("route", "=", "/"),)
    plain, _ = compile_target(Target("A", "x", False, {"precision": "auto"}), adhoc)
    assert isinstance(plain, Call) and plain.func == "increase"
    assert isinstance(plain.args[0], MatrixSelector)
    assert plain.args[0].vector.matchers[1:] == adhoc
    with pytest.raises(QueryError, match=r"payload\.function"):
        compile_target(Target("A", "x", False, {"function": "median"}), ())
    with pytest.raises(QueryError, match=r"payload\.precision"):
        compile_target(Target("A", "x", False, {"precision": "fast"}), ())


def test_annotation_queries_and_their_tags() -> None:
    target = Target("Anno", "#deploy, config", False)
    assert is_annotation_query({}, target)
    assert is_annotation_query({"scopedVars": {"__annotation": {}}}, Target("A", "x", False))
    assert not is_annotation_query({"scopedVars": {}}, Target("A", "x", False))
    assert annotation_tags(target.text) == ["deploy", "config"]
    assert annotation_tags("") == [] and annotation_tags(None) == []


def test_regex_escape_like_grafana() -> None:
    assert regex_escape("/users/{id}.json") == r"\/users\/\{id\}\.json"


def test_limits_come_from_the_environment_and_refuse_nonsense() -> None:
    from slicecount.config.request_limits import Limits

    limits = Limits.from_env(
        {"SLICECOUNT_MAX_REQUEST_POINTS": "1000", "SLICECOUNT_MAX_RANGE_SECONDS": "3600.5"}
    )
    assert limits.max_request_points == 1000 and limits.max_range_seconds == 3600.5
    assert limits.max_series == Limits().max_series
    for bad in ("0", "-5", "lots"):
        with pytest.raises(ValueError, match="SLICECOUNT_HEAVY_REQUESTS"):
            Limits.from_env({"SLICECOUNT_HEAVY_REQUESTS": bad})
