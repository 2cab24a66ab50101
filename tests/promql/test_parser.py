"""The PromQL parser: precedence and associativity as Prometheus', durations as Grafana writes
them, and errors that name the construct and its position."""

from __future__ import annotations

import pytest

from slicecount.errors import QueryError
from slicecount.promql.ast import (
    Aggregate,
    Binary,
    Call,
    Matcher,
    MatrixSelector,
    Node,
    NumberLiteral,
    Unary,
    VectorSelector,
    compile_regex,
)
from slicecount.promql.durations import format_duration, parse_duration
from slicecount.promql.lexer import DottedName
from slicecount.promql.parser import parse


def shape(node: Node) -> str:
    """A compact rendering that shows the tree's grouping."""
    if isinstance(node, NumberLiteral):
        return f"{node.value:g}"
    if isinstance(node, VectorSelector):
        text = ",".join(f"{m.label}{m.op}{m.value}" for m in node.matchers)
        return text + (f" offset {node.offset:g}" if node.offset else "")
    if isinstance(node, MatrixSelector):
        offset = node.vector.offset
        inner = shape(VectorSelector(node.vector.matchers))
        return f"{inner}[{node.range:g}]" + (f" offset {offset:g}" if offset else "")
    if isinstance(node, Unary):
        return f"(-{shape(node.expr)})"
    if isinstance(node, Binary):
        mods = " bool" if node.bool else ""
        if node.matching and (node.matching.labels or node.matching.card != "one-to-one"):
            m = node.matching
            if m.card != "many-to-many" or m.labels:
                mods += f" {'on' if m.on else 'ignoring'}{list(m.labels)} {m.card}{list(m.include)}"
        return f"({shape(node.lhs)} {node.op}{mods} {shape(node.rhs)})"
    if isinstance(node, Call):
        return f"{node.func}({', '.join(shape(a) for a in node.args)})"
    if isinstance(node, Aggregate):
        how = (
            f" {'without' if node.without else 'by'}{list(node.grouping)}" if node.grouping else ""
        )
        param = f"{shape(node.param)}, " if node.param else ""
        return f"{node.op}{how}({param}{shape(node.expr)})"
    return repr(node)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 + 2 * 3", "(1 + (2 * 3))"),
        ("1 - 2 - 3", "((1 - 2) - 3)"),
        ("2 ^ 3 ^ 2", "(2 ^ (3 ^ 2))"),  # right-associative
        ("-2 ^ 2", "(-(2 ^ 2))"),  # unary minus binds looser than ^
        ("-x", "(-__name__=x)"),
        ("a or b and c", "(__name__=a or (__name__=b and __name__=c))"),
        ("a > 1 and b", "((__name__=a > 1) and __name__=b)"),
        ("a + b > bool c", "((__name__=a + __name__=b) > bool __name__=c)"),
        ("a unless on(x) b", "(__name__=a unless on['x'] many-to-many[] __name__=b)"),
        (
            "a / ignoring(status) group_left(team) b",
            "(__name__=a / ignoring['status'] many-to-one['team'] __name__=b)",
        ),
        ("a * on(x) group_right b", "(__name__=a * on['x'] one-to-many[] __name__=b)"),
        ("sum by (a, b) (x)", "sum by['a', 'b'](__name__=x)"),
        ("sum(x) without (a,)", "sum without['a'](__name__=x)"),
        ("topk(3, x)", "topk(3, __name__=x)"),
        ("quantile by (r) (0.9, x)", "quantile by['r'](0.9, __name__=x)"),
        ("rate(x[1m0s])", "rate(__name__=x[60])"),
        ("increase(x{a=~'b.*'}[5m] offset 1h)", "increase(__name__=x,a=~b.*[300] offset 3600)"),
        ("x offset -5m", "__name__=x offset -300"),
        ('{__name__=~"http_.*", route!=""}', "__name__=~http_.*,route!="),
        ('x{a="1",}', "__name__=x,a=1"),  # trailing comma
        ("0x1F + 1e3 + .5 + Inf", "(((31 + 1000) + 0.5) + inf)"),
        (
            "histogram_quantile(0.9, rate(h_bucket[5m]))",
            "histogram_quantile(0.9, rate(__name__=h_bucket[300]))",
        ),
        ("round(x, 0.5)", "round(__name__=x, 0.5)"),
        ("x # a comment\n + 1", "(__name__=x + 1)"),
        ("SUM(x) OR y", "(sum(__name__=x) or __name__=y)"),
    ],
)
def test_structure(text: str, expected: str) -> None:
    assert shape(parse(text)) == expected


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1m0s", 60),
        ("1m15s", 75),
        ("2h0m0s", 7200),
        ("500ms", 0.5),
        ("1d", 86400),
        ("1w2d", 777600),
    ],
)
def test_durations_as_grafana_writes_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize("text", ["1s1m", "5", "m", "1m1m", "1.5m", ""])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty query"),
        ("sum(", "char 5: unexpected end of input"),
        ("rate(x)", "expected type range vector in argument 1 of rate(), got instant vector"),
        ("rate(x[5m]) + y[5m]", "binary expression must contain only scalar and instant vector"),
        ("sum(x[5m])", "expected type instant vector in the argument of sum, got range vector"),
        ("x[5m:1m]", "subqueries"),
        ("x @ 100", "@ modifier"),
        ("holt_winters(x[5m], 0.5, 0.5)", "holt_winters() is not supported"),
        ("nosuch(x)", "nosuch() is unknown"),
        ('count_values("v", x)', "count_values() is not supported"),
        ("1 > 2", "bool modifier"),
        ("x + bool y", "bool modifier can only be used on comparison operators"),
        ("x and 1", "set operator 'and' not allowed"),
        ("x and on(a) group_left b", "no grouping allowed for 'and'"),
        ("1 + on(a) 2", "vector matching only allowed between instant vectors"),
        ("{}", "at least one non-empty matcher"),
        ('{a=""}', "at least one non-empty matcher"),
        ('x{a="1" b="2"}', "expected '}'"),
        ('x{a>"1"}', "in a label matcher"),
        ('x{a=~"("}', "invalid regex"),
        ("x[0s]", "range must be positive"),
        ("(x)[5m]", "[ only applies to a selector"),
        ("(x) offset 5m", "offset only applies to a selector"),
        ("x offset 5m offset 1m", "offset applies once"),
        ("round(x, 1, 2)", "round() takes 1 to 2 arguments, got 3"),
        ("topk(x)", "topk takes 2 argument(s), got 1"),
        ("label_replace(x, 1, 'a', 'b', 'c')", "expected type string in argument 2"),
        ('"a" + 1', "binary expression must contain only scalar and instant vector"),
        ("x 5m", "found '5m'"),
        ("5m", "unexpected duration"),
        ("x $", "unexpected character '$'"),
        ('x{a="\\q"}', "unknown escape sequence"),
        ("(" * 120 + "x" + ")" * 120, "nests more than"),
    ],
)
def test_errors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(QueryError) as raised:
        parse(text)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("text", "name"),
    [("rate(http.requests[1m])", "http.requests"), ("sum(a.b.c_d) by (x)", "a.b.c_d")],
)
def test_a_dotted_name_is_named_whole(text: str, name: str) -> None:
    with pytest.raises(DottedName) as raised:
        parse(text)
    assert raised.value.name == name
    assert f"in {name!r} (PromQL writes '.' as '_')" in str(raised.value)


def test_strings_and_escapes() -> None:
    node = parse('label_replace(x, "dst", "a\\tb\\u00e9", "src", `\\d+`)')
    assert isinstance(node, Call)
    values = [getattr(a, "value", None) for a in node.args[1:]]
    assert values == ["dst", "a\tb\u00e9", "src", "\\d+"]


def test_name_matcher_and_regex_are_fully_anchored() -> None:
    node = parse('{__name__=~"http_.*", route=~"/a|/b"}')
    assert isinstance(node, VectorSelector)
    assert node.matches({"__name__": "http_requests_total", "route": "/a"})
    assert not node.matches({"__name__": "xhttp_requests_total", "route": "/a"})
    assert not node.matches({"__name__": "http_requests_total", "route": "/ab"})


@pytest.mark.parametrize("pattern", [".*", ".+", ".*x", "(.*)"])
@pytest.mark.parametrize("op", ["=~", "!~"])
def test_a_regex_matching_everything_answers_as_it_would_run(pattern: str, op: str) -> None:
    """``.*`` and ``.+`` are answered without running them, alike to the regex: ``.``
    matches no newline, ``.+`` no empty value."""
    matcher, regex = Matcher.make("a", op, pattern), compile_regex(pattern)
    for value in ["", "x", "/api/v1/{id}", "two\nlines", "\n", "ünïcode", " "]:
        ran = regex.fullmatch(value) is not None
        assert matcher.matches(value) == (ran if op == "=~" else not ran), value


def test_the_same_text_is_parsed_once_and_an_error_every_time() -> None:
    """A dashboard asks the same queries at every refresh: their trees are kept (a tree is
    never changed once built); a text that does not parse is refused each time it comes."""
    text = 'sum by (le) (rate(x_bucket{a=~"b.*"}[1m]))'
    assert parse(text) is parse(text)
    assert parse(text) is not parse(text + " ")
    for _ in range(2):
        with pytest.raises(QueryError, match="unexpected"):
            parse("sum(")
