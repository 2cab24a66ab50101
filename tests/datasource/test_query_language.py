from __future__ import annotations

import pytest

from slicecount.datasource.nodes import (
    Aggregate,
    Binary,
    Matcher,
    Quantile,
    Rate,
    Scalar,
    Selector,
    depth,
    selectors,
    with_matchers,
)
from slicecount.datasource.query import MAX_DEPTH, parse
from slicecount.errors import QueryError
from slicecount.promql.ast import MAX_REGEX_LENGTH


def test_selectors_with_every_matcher_operator() -> None:
    node = parse('http.requests{status=~"5..", route!="/health", method="GET", user!~"bot.*",}')
    assert isinstance(node, Selector)
    assert node.names == ("http.requests",)
    assert [(m.label, m.op, m.value) for m in node.matchers] == [
        ("status", "=~", "5.."),
        ("route", "!=", "/health"),
        ("method", "=", "GET"),
        ("user", "!~", "bot.*"),
    ]
    assert node.matches({"status": "503", "route": "/", "method": "GET", "user": "ann"})
    assert not node.matches({"status": "5030", "route": "/", "method": "GET"})  # anchored
    assert not node.matches({"status": "500", "route": "/health", "method": "GET"})
    assert not node.matches({"status": "500", "route": "/", "method": "GET", "user": "botty"})


def test_functions_and_aggregations() -> None:
    node = parse('sum by (status) (rate(http.requests{method="GET"}))')
    assert isinstance(node, Aggregate) and node.op == "sum" and node.by == ("status",)
    assert isinstance(node.arg, Rate)
    trailing = parse("max(rate(x)) by (a, b)")
    assert isinstance(trailing, Aggregate) and trailing.by == ("a", "b")
    quantile = parse('histogram_quantile(0.95, sum by (route) (http.request.duration{route="/"}))')
    assert isinstance(quantile, Quantile) and quantile.q == 0.95
    assert [s.names for s in selectors(quantile)] == [("http.request.duration",)]
    assert isinstance(parse("avg(x)"), Aggregate)
    assert isinstance(parse("count by (route) (x)"), Aggregate)


def test_grafana_regex_interpolation_is_understood() -> None:
    assert parse(r"http\.requests") == Selector(("http.requests",))
    assert parse(r"(http\.requests|db\.queries)").names == ("http.requests", "db.queries")  # type: ignore[union-attr]
    assert parse("{http.requests,db.queries}").names == ("http.requests", "db.queries")  # type: ignore[union-attr]
    exact = parse(r'x{route="\/users\/\{id\}"}')
    assert isinstance(exact, Selector)
    assert exact.matches({"route": "/users/{id}"})
    multi = parse(r'x{route=~"(\/a|\/b\.c)"}')
    assert isinstance(multi, Selector)
    assert multi.matches({"route": "/b.c"}) and not multi.matches({"route": "/bxc"})


def test_numeric_matchers() -> None:
    node = parse('x{status>"499"}')
    assert isinstance(node, Selector)
    assert node.matches({"status": "500"}) and not node.matches({"status": "404"})
    assert not node.matches({"status": "n/a"})


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty query"),
        ("   ", "empty query"),
        ("rate(", "expected a metric name"),
        ("sum by status (x)", "expected '('"),
        ('x{a=~"("}', "invalid regex"),
        ("nope(x)", "unknown function 'nope'"),
        ("x y", "unexpected 'y'"),
        ("histogram_quantile(2, x)", "0 <= q <= 1"),
        ('x{1a="b"}', "expected"),
        ('x{a=="b"}', "expected string"),
        ('x{a<"b"}', "need a number"),
        ("x{a=b}", "expected string"),
        ("9x", "expected"),
        ("x @ 5", "unexpected character '@'"),
        ("x" * 5000, "limit"),
    ],
)
def test_syntax_errors_name_the_problem(text: str, fragment: str) -> None:
    with pytest.raises(QueryError) as info:
        parse(text)
    assert fragment in str(info.value)


def test_regex_length_is_bounded() -> None:
    with pytest.raises(QueryError, match="limit"):
        parse('x{a=~"' + "a" * (MAX_REGEX_LENGTH + 1) + '"}')


def test_catastrophic_regexes_run_in_linear_time() -> None:
    # (a+)+$ is exponential for backtracking engines; RE2 answers at once.
    node = parse('x{a=~"(a+)+b"}')
    assert isinstance(node, Selector)
    assert not node.matches({"a": "a" * 50_000})


def test_with_matchers_reaches_every_selector() -> None:
    extra = (Matcher.make("route", "=", "/"),)
    node = with_matchers(parse("histogram_quantile(0.5, sum by (a) (rate(x)))"), extra)
    assert [s.matchers for s in selectors(node)] == [extra]


def test_binary_operators_and_numbers() -> None:
    node = parse("sum(rate(a)) / sum(rate(b)) * 100")
    assert isinstance(node, Binary) and node.op == "*" and node.right == Scalar(100.0)
    assert isinstance(node.left, Binary) and node.left.op == "/"
    assert len(selectors(node)) == 2
    assert len(selectors(with_matchers(node, (Matcher.make("a", "=", "b"),)))[1].matchers) == 1


def test_names_follow_the_data_model_of_series_ids() -> None:
    assert parse("a_b:c.d-e") == Selector(("a_b:c.d-e",))
    with pytest.raises(QueryError, match="invalid metric name ':a'"):
        parse(":a")
    with pytest.raises(QueryError, match=r"invalid label name 'a\.b'"):
        Matcher.make("a.b", "=", "x")


@pytest.mark.parametrize(
    "text",
    [
        "sum(" * 795 + "x" + ")" * 795,  # under the length limit, past the recursion limit
        "sum(" * (MAX_DEPTH + 1) + "x" + ")" * (MAX_DEPTH + 1),
        "rate(" * 799,  # never closed: refused while descending
        "/".join(["x"] * 1500),  # a chain of operators is as deep as it is long
        "*".join(["x"] + ["1"] * MAX_DEPTH),
    ],
)
def test_nesting_is_bounded(text: str) -> None:
    with pytest.raises(QueryError, match=f"nests more than {MAX_DEPTH} calls and operators deep"):
        parse(text)


def test_nesting_up_to_the_limit_parses() -> None:
    node = parse("sum(" * (MAX_DEPTH - 1) + "x" + ")" * (MAX_DEPTH - 1))
    assert depth(node) == MAX_DEPTH
    assert depth(parse("/".join(["x"] * MAX_DEPTH))) == MAX_DEPTH
    assert depth(parse("x")) == 1 and depth(parse("a / b * 100")) == 3


def test_numbers_must_be_finite() -> None:
    with pytest.raises(QueryError, match="number 1e400 is out of range"):
        parse("1e400")
    with pytest.raises(QueryError, match="out of range"):
        parse("x * 1e309")
    assert parse("x * 1e308") == Binary("*", Selector(("x",)), Scalar(1e308))
