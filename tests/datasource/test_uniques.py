"""The pure parts of unique(...) targets: parsing, the precision and step, the read chunks."""

from __future__ import annotations

import pytest

from slicecount.config import Settings
from slicecount.datasource.nodes import Aggregate, Matcher, Selector, Unique, with_matchers
from slicecount.datasource.query import parse
from slicecount.datasource.reader import union_parts as parts
from slicecount.datasource.uniques import choose, leaves
from slicecount.errors import QueryError
from slicecount.unique_reading import Group

NOW = 1_800_000_000.0
SETTINGS = Settings()  # unique precisions 60, 300, 3600, 18000, 86400; retention 120


def test_parse_and_adhoc_filters_reach_the_selector() -> None:
    node = parse('sum by (route) (unique(visitors{plan="pro"}))')
    inner = Unique(Selector(("visitors",), (Matcher.make("plan", "=", "pro"),)))
    assert node == Aggregate("sum", ("route",), inner)
    assert leaves(node) == (node,)
    assert leaves(parse("max(unique(a)) / unique(a)")) == (Unique(Selector(("a",))),)
    extra = (Matcher.make("route", "=", "/"),)
    widened = Unique(Selector(inner.arg.names, (*inner.arg.matchers, *extra)))
    assert with_matchers(inner, extra) == widened
    with pytest.raises(QueryError, match="takes a metric selector"):
        parse("unique(rate(a))")


def test_choose_reads_the_coarsest_precision_that_fits_a_step() -> None:
    hour = (NOW - 3600, NOW)
    assert choose(SETTINGS, *hour, NOW, 2000, 1114, None) == (60, 60)  # 2 s interval: 60 s
    assert choose(SETTINGS, *hour, NOW, 120_000, None, None) == (60, 120)  # 2 slices a point
    assert choose(SETTINGS, *hour, NOW, 600_000, None, None) == (300, 600)
    day = (NOW - 86400, NOW)  # 60 s keeps 2 h, 300 s 10 h: 3600 s is the finest covering
    assert choose(SETTINGS, *day, NOW, 60_000, None, None) == (3600, 3600)
    assert choose(SETTINGS, *hour, NOW, 2000, None, 300) == (300, 300)
    with pytest.raises(QueryError, match="not 1 s"):
        choose(SETTINGS, *hour, NOW, 2000, None, 1)


def test_unions_are_read_in_calls_of_bounded_size() -> None:
    pair: Group = [("a", range(0, 240, 60)), ("b", range(0, 240, 60))]  # 8 slices
    groups = [pair, pair, pair, [("c", range(0, 1200, 60))]]  # then 20 slices
    assert [len(p) for p in parts(groups, 10)] == [1, 1, 1, 1]
    assert [len(p) for p in parts(groups, 16)] == [2, 1, 1]
    assert parts([], 16) == []
