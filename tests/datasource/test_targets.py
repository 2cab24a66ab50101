"""The simPod targets' front end: its language compiled to the PromQL tree, and the step of a
panel (ported from the tests of the simPod parser, precision chooser and unique rules)."""

from __future__ import annotations

import pytest

from slicecount.config import Settings
from slicecount.errors import ConfigurationError, QueryError
from slicecount.operations.unique_reading import Group
from slicecount.promql.ast import (
    MAX_REGEX_LENGTH,
    NAME_LABEL,
    Aggregate,
    Binary,
    Call,
    Matcher,
    MatrixSelector,
    Node,
    NumberLiteral,
    VectorSelector,
    walk,
)
from slicecount.promql.parser import MAX_DEPTH
from slicecount.query.precision import panel_step
from slicecount.reads.chunks import union_parts as parts
from slicecount.targets.grammar import MAX_QUERY_LENGTH, catalogue, parse
from slicecount.targets.rewrites import with_matchers


def selectors(node: Node) -> list[VectorSelector]:
    return [n for n in walk(node) if isinstance(n, VectorSelector)]


def only(node: Node) -> VectorSelector:
    (selector,) = selectors(node)
    return selector


def labels(selector: VectorSelector, name: str, **more: str) -> dict[str, str]:
    return {NAME_LABEL: name, **more}


def test_a_bare_selector_is_the_count_of_each_points_slices() -> None:
    node = parse('http.requests{status=~"5..", route!="/health", method="GET", user!~"bot.*",}')
    assert isinstance(node, Call) and node.func == "increase"
    window = node.args[0]
    assert isinstance(window, MatrixSelector) and window.range == 0
    selector = window.vector
    assert [(m.label, m.op, m.value) for m in selector.matchers] == [
        (NAME_LABEL, "=", "http.requests"),
        ("status", "=~", "5.."),
        ("route", "!=", "/health"),
        ("method", "=", "GET"),
        ("user", "!~", "bot.*"),
    ]
    ok = {"status": "503", "route": "/", "method": "GET", "user": "ann"}
    assert selector.matches(labels(selector, "http.requests", **ok))
    assert not selector.matches(labels(selector, "http.requests", **{**ok, "status": "5030"}))
    assert not selector.matches(labels(selector, "http.requests", **{**ok, "route": "/health"}))
    assert not selector.matches(labels(selector, "http.requests", **{**ok, "user": "botty"}))


def test_rate_without_a_window_is_one_point_and_goes_through_aggregations() -> None:
    node = parse('sum by (status) (rate(http.requests{method="GET"}))')
    assert isinstance(node, Aggregate) and node.grouping == ("status",)
    assert isinstance(node.expr, Call) and node.expr.func == "rate"
    assert repr(parse("rate(sum by (status) (http.requests))")) == repr(
        parse("sum by (status) (rate(http.requests))")
    )
    trailing = parse("max(rate(x)) by (a, b)")
    assert isinstance(trailing, Aggregate) and trailing.grouping == ("a", "b")
    windowed = parse("rate(x[5m])")
    assert isinstance(windowed, Call) and windowed.args[0].range == 300  # type: ignore[union-attr]
    with pytest.raises(QueryError, match="give any other a window"):
        parse("rate(a / b)")


def test_histogram_quantile_keeps_le_in_its_aggregations() -> None:
    node = parse('histogram_quantile(0.95, sum by (route) (http.request.duration{route="/"}))')
    assert isinstance(node, Call) and node.func == "histogram_quantile"
    inner = node.args[1]
    assert isinstance(inner, Aggregate) and inner.grouping == ("route", "le")
    plain = parse("histogram_quantile(0.5, sum by (le) (rate(http.request.duration[1m])))")
    assert isinstance(plain, Call) and plain.args[1].grouping == ("le",)  # type: ignore[union-attr]
    with pytest.raises(QueryError, match="histogram_quantile"):
        parse("histogram_quantile(x, y)")


def test_grafana_regex_interpolation_is_understood() -> None:
    assert only(parse(r"http\.requests")).matchers == (
        Matcher.make(NAME_LABEL, "=", "http.requests"),
    )
    for text in (r"(http\.requests|db\.queries)", "{http.requests,db.queries}"):
        selector = only(parse(text))
        assert selector.matches({NAME_LABEL: "db.queries"})
        assert selector.matches({NAME_LABEL: "http.requests"})
        assert not selector.matches({NAME_LABEL: "httpxrequests"})
    exact = only(parse(r'x{route="\/users\/\{id\}"}'))
    assert exact.matches({NAME_LABEL: "x", "route": "/users/{id}"})
    multi = only(parse(r'x{route=~"(\/a|\/b\.c)"}'))
    assert multi.matches({NAME_LABEL: "x", "route": "/b.c"})
    assert not multi.matches({NAME_LABEL: "x", "route": "/bxc"})


def test_numeric_matchers() -> None:
    selector = only(parse('x{status>"499"}'))
    assert selector.matches({NAME_LABEL: "x", "status": "500"})
    assert not selector.matches({NAME_LABEL: "x", "status": "404"})
    assert not selector.matches({NAME_LABEL: "x", "status": "n/a"})
    assert only(parse('x{status<"400"}')).matches({NAME_LABEL: "x", "status": "200"})


def test_unique_selects_unique_series_and_sum_of_them_stays_a_selector_sum() -> None:
    node = parse('sum by (route) (unique(visitors{plan="pro"}))')
    assert isinstance(node, Aggregate) and isinstance(node.expr, VectorSelector)
    assert node.expr.matches({NAME_LABEL: "unique(visitors)", "plan": "pro"})
    with pytest.raises(QueryError, match="takes a metric selector"):
        parse("unique(rate(a))")
    extra = (Matcher.make("route", "=", "/"),)
    widened = with_matchers(node, extra)
    assert only(widened).matchers[-1] == extra[0]


def test_every_promql_function_with_dotted_names() -> None:
    for text in (
        "topk(2, sum by (route) (rate(http.requests)))",
        "clamp_max(http.requests, 3)",
        'label_replace(http.requests, "r", "$1", "route", "/(.*)")',
        "abs(http.requests - 100)",
        "sort_desc(sum by (route) (http.requests))",
        "sum_over_time(http.requests[5m])",
        "http.requests offset 1h",
        "time() - 1",
    ):
        parse(text)


def test_a_lone_unlabelled_series_applies_to_each_series_of_the_other_side() -> None:
    node = parse("sum by (status) (rate(a)) / sum(rate(a)) * 100")
    assert isinstance(node, Binary) and isinstance(node.lhs, Binary)
    matching = node.lhs.matching
    assert matching is not None and matching.on and matching.card == "many-to-one"
    left = parse("sum(a) / b")
    assert isinstance(left, Binary) and left.matching is not None
    assert left.matching.card == "one-to-many"
    both = parse("sum(a) / sum(b)")
    assert isinstance(both, Binary) and both.matching is not None and not both.matching.on
    assert parse("x * 1e308") is not None
    assert isinstance(parse("2"), NumberLiteral)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty query"),
        ("   ", "empty query"),
        ("rate(", "expected a metric name"),
        ("sum by status (x)", "expected '('"),
        ('x{a=~"("}', "invalid regex"),
        ("nope(x)", "function nope() is unknown"),
        ("x y", "found 'y'"),
        ('x{1a="b"}', "unexpected character '1'"),
        ('x{a=="b"}', "unexpected '=='"),
        ('x{a<"b"}', "need a number"),
        ("x{a=b}", "expected string"),
        ("9x", "unexpected character '9'"),
        ("x @ 5", "@"),
        ("x" * (MAX_QUERY_LENGTH + 1), "limit"),
        (":a", "invalid metric name ':a'"),
        ("1e400", "number 1e400 is out of range"),
        ("x * 1e309", "out of range"),
    ],
)
def test_syntax_errors_name_the_problem(text: str, fragment: str) -> None:
    with pytest.raises(QueryError) as info:
        parse(text)
    assert fragment in str(info.value)


def test_regex_length_is_bounded_and_catastrophic_regexes_are_linear() -> None:
    with pytest.raises(QueryError, match="limit"):
        parse('x{a=~"' + "a" * (MAX_REGEX_LENGTH + 1) + '"}')
    # (a+)+$ is exponential for backtracking engines; RE2 answers at once.
    assert not only(parse('x{a=~"(a+)+b"}')).matches({NAME_LABEL: "x", "a": "a" * 50_000})


@pytest.mark.parametrize(
    "text",
    [
        "sum(" * 795 + "x" + ")" * 795,  # under the length limit, past the recursion limit
        "sum(" * (MAX_DEPTH + 1) + "x" + ")" * (MAX_DEPTH + 1),
        "rate(" * 799,  # never closed: refused while descending
        "/".join(["x"] * 1500),  # a chain of operators is as deep as it is long
    ],
)
def test_nesting_is_bounded(text: str) -> None:
    with pytest.raises(QueryError, match=f"nests more than {MAX_DEPTH} levels deep"):
        parse(text)


def test_names_follow_the_data_model_of_series_ids() -> None:
    assert only(parse("a_b:c.d-e")).matches({NAME_LABEL: "a_b:c.d-e"})
    with pytest.raises(QueryError, match=r"invalid label name 'a\.b'"):
        Matcher.make("a.b", "=", "x")


def test_the_catalogue_names_stored_metrics_histograms_and_unique_ones() -> None:
    names = catalogue(["h.bucket", "h.sum_us", "x"], ["x"])
    assert {n: (s.stored, s.kind) for n, s in names.sources.items()} == {
        "h": ("h.bucket", "bucket"),  # its cumulative le buckets
        "h.bucket": ("h.bucket", "counter"),  # the buckets as stored
        "h.sum_us": ("h.sum_us", "counter"),
        "x": ("x", "counter"),
        "unique(x)": ("x", "unique"),
    }


NOW = 1_700_000_000.0
SETTINGS = Settings(layout="book")
"""The book's ladder, 120 slices each: 1 s covers 2 min, 60 s 2 h, 3600 s 5 days."""


def step(start: float, wanted: float = 0.0, unique: bool = False, pinned: int | None = None) -> int:
    return panel_step(SETTINGS, start, NOW, wanted, unique, pinned)[0]


def test_counters_step_is_the_finest_precision_covering_the_range_and_the_interval() -> None:
    assert step(NOW - 60) == 1
    assert step(NOW - 3600) == 60
    assert step(NOW - 3600, 10) == 60
    assert step(NOW - 60, 2) == 5
    assert step(NOW - 60, 6) == 60  # 60 s over 10 points
    assert step(NOW - 2 * 86400) == 3600
    # 600 s slices wanted: every precision covers a 60 s range, the first >= 600 s is 3600
    assert step(NOW - 60, 600) == 3600
    assert step(NOW - 400 * 86400) == 86400
    oldest_60 = 1_699_999_980 - 119 * 60  # the current 60 s slice and the 119 before it
    assert step(oldest_60) == 60 and step(oldest_60 - 1) == 300
    longer = Settings(layout="book", retention={60: 1440})  # a day at 60 s
    assert panel_step(longer, NOW - 20 * 3600, NOW, 0, False, None) == (60, (60,))
    assert step(NOW - 3600, pinned=300) == 300
    with pytest.raises(ConfigurationError, match="unknown precision 7"):
        step(NOW - 3600, pinned=7)


def test_unique_step_is_a_multiple_of_the_coarsest_precision_that_fits() -> None:
    hour = NOW - 3600
    assert step(hour, 2, unique=True) == 60
    assert step(hour, 120, unique=True) == 120  # two slices a point
    assert step(hour, 600, unique=True) == 600  # two 300 s slices
    assert step(NOW - 86400, 60, unique=True) == 3600  # 3600 s is the finest covering
    assert step(hour, 2, unique=True, pinned=300) == 300
    with pytest.raises(QueryError, match="not 1 s"):
        step(hour, 2, unique=True, pinned=1)


def test_unions_are_read_in_calls_of_bounded_size() -> None:
    pair: Group = [("a", range(0, 240, 60)), ("b", range(0, 240, 60))]  # 8 slices
    groups = [pair, pair, pair, [("c", range(0, 1200, 60))]]  # then 20 slices
    assert [len(p) for p in parts(groups, 10)] == [1, 1, 1, 1]
    assert [len(p) for p in parts(groups, 16)] == [2, 1, 1]
    assert parts([], 16) == []
