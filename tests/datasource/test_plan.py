"""Planning a /query before any Redis call: precision, slices, series, read groups. Pure."""

from __future__ import annotations

from typing import Any

import pytest

from slicecount.config import Settings
from slicecount.datasource.discovery import SeriesInfo
from slicecount.datasource.evaluate import Series
from slicecount.datasource.limits import LimitExceeded, Limits
from slicecount.datasource.plan import (
    AnnotationQuery,
    QueryPlan,
    SeriesQuery,
    choose_series,
    filled,
    group_reads,
    metrics_to_discover,
    plan_query,
    timeline,
)
from slicecount.errors import ConfigurationError, QueryError
from slicecount.series import encode

NOW = 1_700_000_030.0  # 30 s into a 60 s slice
SETTINGS = Settings()  # 120 slices at each precision
LIMITS = Limits(max_series=3, max_points=500)


def body(*targets: dict[str, Any], seconds: float = 3600, **extra: Any) -> dict[str, Any]:
    return {
        "range": {"from": (NOW - seconds) * 1000, "to": NOW * 1000},
        "intervalMs": 2000,
        "maxDataPoints": 1000,
        "targets": list(targets),
        **extra,
    }


def plan(*targets: dict[str, Any], **extra: Any) -> QueryPlan:
    return plan_query(body(*targets, **extra), SETTINGS, LIMITS, NOW)


def info(name: str, **labels: str) -> SeriesInfo:
    return SeriesInfo(encode(name, labels), name, labels)


def test_every_target_planned_in_order_with_its_precision_and_slices() -> None:
    planned = plan(
        {"refId": "A", "target": "rate(http.requests)"},
        {"refId": "Anno", "target": "#deploy"},
        {"refId": "B", "target": "db.queries", "payload": {"precision": "300"}},
        {"refId": "C", "target": "x", "hide": True},
    )
    assert planned.start == NOW - 3600 and planned.end == NOW
    assert [t.target.ref_id for t in planned.targets] == ["A", "Anno", "B"]
    a, anno, b = planned.targets
    assert isinstance(anno, AnnotationQuery) and anno.tags == ("deploy",)
    assert isinstance(a, SeriesQuery) and isinstance(b, SeriesQuery)
    assert a.timeline.precision == 60  # 1 h: the finest precision whose retention covers it
    assert a.timeline.starts == range(1_699_996_380, 1_699_999_981, 60)
    assert a.timeline.oldest == 1_699_999_980 - 119 * 60 and a.timeline.now == NOW
    assert [f.selector.names for f in a.fetches] == [("http.requests",)]
    assert b.timeline.precision == 300
    assert planned.series_queries == [a, b] and planned.annotation_queries == [anno]


def test_a_bad_target_fails_the_plan_whatever_its_place() -> None:
    with pytest.raises(QueryError, match="unknown function"):
        plan({"refId": "A", "target": "db.queries"}, {"refId": "B", "target": "nope(x)"})
    with pytest.raises(ConfigurationError, match="unknown precision 7"):
        plan({"refId": "A", "target": "x", "payload": {"precision": "7"}})


def test_points_limit_is_checked_while_planning() -> None:
    assert len(timeline(SETTINGS, LIMITS, 5, NOW - 2495, NOW, NOW).starts) == 500
    with pytest.raises(LimitExceeded, match="501 points per series at precision 5 s"):
        timeline(SETTINGS, LIMITS, 5, NOW - 2500, NOW, NOW)
    with pytest.raises(LimitExceeded, match="points per series"):
        plan({"refId": "A", "target": "x", "payload": {"precision": "1"}})


def test_each_metric_is_discovered_once_per_precision() -> None:
    planned = plan(
        {"refId": "A", "target": "sum(rate(a)) / sum(rate(a))"},
        {"refId": "B", "target": "histogram_quantile(0.5, h) * (a|b)"},
        {"refId": "C", "target": "a", "payload": {"precision": "300"}},
    )
    assert metrics_to_discover(planned.series_queries) == [
        ("a", 60), ("h.bucket", 60), ("b", 60), ("a", 300),
    ]  # fmt: skip


def test_series_chosen_by_selector_within_the_series_limit() -> None:
    (query,) = plan({"refId": "A", "target": 'a{route="/x"} / b'}).series_queries
    discovered = {
        ("a", 60): [info("a", route="/x"), info("a", route="/y")],
        ("b", 60): [info("b"), info("b", route="/x")],
    }
    chosen = choose_series(query, discovered, LIMITS)
    assert [[s.id for s in found] for found in chosen.values()] == [
        ['a{route="/x"}'],
        ["b", 'b{route="/x"}'],
    ]
    discovered[("b", 60)].append(info("b", route="/z"))  # 1 + 3 series: over the limit of 3
    with pytest.raises(LimitExceeded, match="more than 3 series"):
        choose_series(query, discovered, LIMITS)


def test_one_read_per_timeline_each_series_once() -> None:
    planned = plan(
        {"refId": "A", "target": "a"},
        {"refId": "B", "target": "sum(a) / b"},
        {"refId": "C", "target": "a", "payload": {"precision": "300"}},
        {"refId": "D", "target": "never.written"},
    )
    a, b, c, d = planned.series_queries
    discovered = {
        ("a", 60): [info("a", k="1"), info("a", k="2")],
        ("b", 60): [info("b")],
        ("a", 300): [info("a", k="1")],
        ("never.written", 60): [],
    }
    chosen = [(q, choose_series(q, discovered, LIMITS)) for q in (a, b, c, d)]
    reads = group_reads(chosen)
    assert list(reads.items()) == [
        (a.timeline, ['a{k="1"}', 'a{k="2"}', "b"]),
        (c.timeline, ['a{k="1"}']),
    ]
    assert a.timeline == b.timeline == d.timeline != c.timeline
    assert group_reads([(d, chosen[3][1])]) == {}  # nothing found: nothing to read


def test_filled_series_are_ready_to_evaluate() -> None:
    pinned = {"refId": "A", "target": "a", "payload": {"precision": "60"}}
    (query,) = plan(pinned, seconds=120).series_queries
    starts = query.timeline.starts
    assert len(starts) == 3
    chosen = {query.fetches[0]: [info("a", k="1")]}
    data = filled(chosen, query.timeline, {'a{k="1"}': [4, None, 2], "other": [1, 1, 1]})
    assert data == {query.fetches[0]: [Series("a", {"k": "1"}, [4.0, 0.0, 2.0])]}
