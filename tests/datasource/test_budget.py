"""The work of a /query, counted from its plan and the series it matched. Pure: no Redis."""

from __future__ import annotations

import pytest

from slicecount.config import Settings
from slicecount.datasource.budget import Work, check_work, work_of
from slicecount.datasource.discovery import SeriesInfo
from slicecount.datasource.limits import LimitExceeded, Limits
from slicecount.datasource.plan import SeriesQuery, choose_series, plan_query
from slicecount.series import encode

NOW = 1_700_000_030.0
LIMITS = Limits(max_series=500, max_points=1000)
POINTS = 61  # one hour at 60 s slices, from 30 s into a slice to 30 s into another


def query(target: str, **payload: str) -> SeriesQuery:
    body = {
        "range": {"from": (NOW - 3600) * 1000, "to": NOW * 1000},
        "targets": [{"refId": "A", "target": target, "payload": payload}],
    }
    (planned,) = plan_query(body, Settings(), LIMITS, NOW).series_queries
    assert len(planned.timeline.starts) == POINTS
    return planned


def series(name: str, count: int, histogram: bool = False) -> list[SeriesInfo]:
    labels = [{"i": str(i), **({"le": str(i)} if histogram else {})} for i in range(count)]
    return [SeriesInfo(encode(name, lab), name, lab) for lab in labels]


DISCOVERED = {
    ("a", 60): series("a", 10),
    ("b", 60): series("b", 3),
    ("h.bucket", 60): series("h.bucket", 8, histogram=True),
    ("h", 60): series("h", 1),
    ("never.written", 60): [],
}


def work(target: str) -> Work:
    planned = query(target)
    return work_of(planned, choose_series(planned, DISCOVERED, LIMITS))


@pytest.mark.parametrize(
    ("target", "read", "computed"),
    [
        ("a", 10, 0),
        ("never.written", 0, 0),
        ("rate(a)", 10, 10),
        ("sum by (i) (rate(a))", 10, 20),  # rate goes through 10 series, the sum too
        ("a / b", 13, 10),  # the larger side bounds what an operator yields
        ("a * 100", 10, 1 + 10),  # a number is one series of its own
        ("a * 1 * 1 * 1", 10, 3 + 30),
        ("a / a", 20, 10),  # a selector read twice is counted twice
        ("histogram_quantile(0.9, h)", 8, 8),  # the buckets are read, not the plain h
        ("histogram_quantile(0.9, sum by (x) (h))", 8, 16),
        ("7", 0, 1),
    ],
)
def test_points_read_and_computed(target: str, read: int, computed: int) -> None:
    assert work(target) == Work(read * POINTS, computed * POINTS)


def test_the_budget_names_the_figure_the_biggest_target_and_the_limit() -> None:
    planned = query("a")
    chosen = choose_series(planned, DISCOVERED, LIMITS)
    other = query("b")
    both = {planned: work_of(planned, chosen), other: Work(3 * POINTS)}
    assert check_work(both, Limits(max_request_points=13 * POINTS)) == Work(13 * POINTS)
    with pytest.raises(LimitExceeded) as refused:
        check_work(both, Limits(max_request_points=13 * POINTS - 1))
    assert str(refused.value) == (
        "the query reads 793 points (series x points per series, summed over its targets; "
        "target 'A': 10 series x 61 points at precision 60 s), more than the work budget "
        "max_request_points = 792: shorten the range, pick a coarser precision or match "
        "fewer series"
    )
    computing = query("rate(a) * 2")
    spent = {computing: work_of(computing, choose_series(computing, DISCOVERED, LIMITS))}
    with pytest.raises(LimitExceeded, match=r"computes 1,281 points .* max_computed_points = 1,"):
        check_work(spent, Limits(max_computed_points=1000))


def test_the_default_budget_admits_500_series_of_1000_points() -> None:
    defaults = Limits()
    assert defaults.max_request_points >= 500 * 1000
    assert defaults.max_computed_points >= 2 * 500 * 1000  # sum by (...) (rate(...)) of them
