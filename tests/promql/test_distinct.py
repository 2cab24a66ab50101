"""Unique series in the pure engine: which uses add distinct counts (refused), the slices each
point unions, the precision chosen for them, and ready series (unions) taking the place of a
``sum``. No Redis: the datasource tests cover the same through the API."""

from __future__ import annotations

import pytest

from slicecount.config import Settings
from slicecount.errors import QueryError
from slicecount.promql.ast import Aggregate, Node, VectorSelector, walk
from slicecount.promql.distinct import carries_counts, check, unions, windows
from slicecount.promql.engine import as_vector, evaluate
from slicecount.promql.parser import parse
from slicecount.promql.values import Grid, Series
from slicecount.query.precision import Need, choose

NOW = 1_700_006_400 + 7230


def distinct_of(node: Node, name: str = "u") -> list[VectorSelector]:
    return [
        s
        for s in walk(node)
        if isinstance(s, VectorSelector) and any(m.value == name for m in s.matchers)
    ]


@pytest.mark.parametrize(
    "text",
    [
        "u",
        "sum(u)",
        "sum by (a) (u) / count(u)",
        "count(u) + sum(count by (a) (u))",
        "max(u) * 2",
        "topk(3, u)",
        "sum(u > bool 5)",
        "sum(c) + sum(rate(c[5m]))",
        "abs(u)",
    ],
)
def test_uses_that_keep_numbers_apart_pass(text: str) -> None:
    node = parse(text)
    check(node, distinct_of(node))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rate(u[5m])", "rate() over unique series u"),
        ("max_over_time(u[5m])", "max_over_time() over unique series u"),
        ("sum(u * 2)", "sum over an expression of unique series (u)"),
        ("sum(round(u))", "sum over an expression"),
        ("sum(max by (a) (u))", "sum over an expression"),
        ("sum(c + u)", "sum over an expression"),
        ("sum(u and c)", "sum over an expression"),
    ],
)
def test_adding_distinct_counts_is_refused(text: str, message: str) -> None:
    node = parse(text)
    with pytest.raises(QueryError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check(node, distinct_of(node))


def test_a_sum_over_a_selector_of_both_kinds_is_refused() -> None:
    node = parse('sum({a="1"})')
    (selector,) = distinct_of(node, "1")
    with pytest.raises(QueryError, match="matches unique series and counters"):
        check(node, [selector], [selector])


def test_what_carries_counts() -> None:
    node = parse("count(u) * u")
    assert carries_counts(node, distinct_of(node))
    node = parse("u > bool 3")
    assert not carries_counts(node, distinct_of(node))
    node = parse("c unless u")
    assert not carries_counts(node, distinct_of(node))


def test_windows_cover_the_step_ending_with_each_time() -> None:
    grid = Grid((600.0, 660.0, 690.0), 60, first=0, oldest=0, newest=720)
    assert windows(grid, 0, None) == [(540,), (600,), (660,)]  # the slice holding t
    assert windows(grid, 0, 180) == [(420, 480, 540), (480, 540, 600), (540, 600, 660)]
    assert windows(grid, 60, 90) == [(420, 480), (480, 540), (540, 600)]  # 90 s: 2 slices
    late = Grid((600.0, 900.0), 60, first=0, oldest=500, newest=720, now=700)
    assert windows(late, 0, 120) == [None, None]  # before what is kept; after now


def test_a_ready_union_stands_for_its_sum() -> None:
    node = parse("sum by (a) (u) + 1")
    (selector,) = distinct_of(node)
    (summed,) = unions(node, [selector])
    assert isinstance(summed, Aggregate) and summed.expr is selector
    grid = Grid((60.0, 120.0), 60, first=0, oldest=0, newest=120)
    ready: dict[Node, list[Series]] = {summed: [Series({"a": "x"}, [5.0, None])]}
    got = as_vector(evaluate(node, grid, {selector: []}, ready=ready))
    assert [(s.labels, s.values) for s in got] == [({"a": "x"}, [6.0, None])]
    assert ready[summed][0].values == [5.0, None]  # copied, not changed in place


def choice(step: float | None, times: list[float], distinct: bool = True) -> int:
    (selector,) = distinct_of(parse("u"))
    need = Need(selector, step or 0.0, absolute=False, distinct=distinct)
    return choose(Settings(layout="book"), [need], times, step, NOW, 11_000).precision


def test_unique_series_read_the_coarsest_precision_dividing_the_step() -> None:
    assert choice(None, [NOW]) == 60  # the unique precisions start at 60 s
    assert choice(15, [NOW - 600, NOW]) == 60
    assert choice(120, [NOW - 600, NOW]) == 60
    assert choice(600, [NOW - 6000, NOW]) == 300  # two slices of 300 s, not ten of 60
    assert choice(3600, [NOW - 7200, NOW]) == 3600  # one slice a point
    assert choice(600, [NOW - 6000, NOW], distinct=False) == 60  # a counter: the finest
