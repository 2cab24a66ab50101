"""The query language of targets: a PromQL-like subset. Pure: parsing only.

    http.requests{status=~"5..",route!="/health"}
    rate(http.requests)
    sum by (status) (rate(http.requests{method="GET"}))
    histogram_quantile(0.95, http.request.duration{route="/"})
    sum(rate(http.requests{status=~"5.."})) / sum(rate(http.requests)) * 100
    unique(http.unique_clients{route="/"})             distinct values per point
    sum by (route) (unique(http.unique_clients))       a union per route, never a sum

Targets arrive interpolated by Grafana in its regex format, so a metric name may be escaped
(``http\\.requests``) or an alternation (``(a|b)``), or a glob list (``{a,b}``); all three name
one or more metrics. The tree it builds is ``nodes``.
"""

from __future__ import annotations

import math
import re

from slicecount.datasource.nodes import (
    Aggregate,
    Binary,
    Matcher,
    Node,
    Quantile,
    Rate,
    Scalar,
    Selector,
    Unique,
    depth,
)
from slicecount.errors import QueryError
from slicecount.series import is_label_name, is_metric_name

MAX_QUERY_LENGTH = 4000
"""Longest target string accepted."""
MAX_DEPTH = 64
"""Deepest query tree accepted: nested calls plus chained operators (``a / b * c`` is 3 deep).
Parsing, planning and evaluation recurse along it, so it must stay far below Python's limit."""
AGGREGATIONS = ("sum", "avg", "max", "min", "count")

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<number>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)
    | (?P<op>=~|!~|!=|=|<|>)
    | (?P<punct>[(){},|*/])
    | (?P<name>(?:[A-Za-z_:]|\\.)(?:[A-Za-z0-9_.:\-]|\\.)*)
    )""",
    re.VERBOSE,
)


def unescape(text: str) -> str:
    """Drop Grafana's regex escaping (``\\.`` -> ``.``)."""
    return re.sub(r"\\(.)", r"\1", text) if "\\" in text else text


def parse(text: str) -> Node:
    """Parse a target; QueryError with the position of the first problem."""
    if not isinstance(text, str) or not text.strip():
        raise QueryError("empty query: expected a metric name such as http.requests")
    if len(text) > MAX_QUERY_LENGTH:
        raise QueryError(f"query is {len(text)} characters long (limit {MAX_QUERY_LENGTH})")
    parser = _Parser(text)
    node = parser.expression()
    parser.expect_end()
    if depth(node) > MAX_DEPTH:
        raise QueryError(_too_deep())
    return node


def _too_deep() -> str:
    return f"query nests more than {MAX_DEPTH} calls and operators deep"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            if text[pos:].isspace():
                break
            match = _TOKEN.match(text, pos)
            if match is None or match.end() == pos:
                raise QueryError(f"unexpected character {text[pos:].lstrip()[:1]!r} at {pos}")
            kind = match.lastgroup or ""
            self.tokens.append((kind, match.group(kind), match.start(kind)))
            pos = match.end()
        self.i = 0
        self.calls = 0  # calls open around the current token: bounds this parser's recursion

    def peek(self, offset: int = 0) -> tuple[str, str, int]:
        index = self.i + offset
        return self.tokens[index] if index < len(self.tokens) else ("end", "", len(self.text))

    def take(self, kind: str, value: str | None = None) -> str:
        got_kind, got, pos = self.peek()
        if got_kind != kind or (value is not None and got != value):
            want = repr(value) if value is not None else kind
            found = repr(got) if got_kind != "end" else "the end"
            raise QueryError(f"expected {want} at {pos}, found {found} in {self.text!r}")
        self.i += 1
        return got

    def expect_end(self) -> None:
        kind, value, pos = self.peek()
        if kind != "end":
            raise QueryError(f"unexpected {value!r} at {pos} in {self.text!r}")

    def expression(self) -> Node:
        node = self.term()
        while self.peek()[:2] in (("punct", "/"), ("punct", "*")):
            op = self.take("punct")
            node = Binary(op, node, self.term())
        return node

    def term(self) -> Node:
        kind, value, _ = self.peek()
        if kind == "number":
            self.i += 1
            number = float(value)
            if not math.isfinite(number):
                raise QueryError(f"number {value[:40]} is out of range")
            return Scalar(number)
        if kind == "name" and (self.peek(1)[1] == "(" or value in AGGREGATIONS):
            return self.function(value)
        return self.selector()

    def function(self, name: str) -> Node:
        pos = self.peek()[2]
        self.calls += 1
        if self.calls > MAX_DEPTH:
            raise QueryError(_too_deep())
        node = self.call(name, pos)
        self.calls -= 1
        return node

    def call(self, name: str, pos: int) -> Node:
        self.take("name")
        if name in AGGREGATIONS:
            by = self.by_clause()
            self.take("punct", "(")
            arg = self.expression()
            self.take("punct", ")")
            if not by:
                by = self.by_clause()
            return Aggregate(name, by, arg)
        self.take("punct", "(")
        if name == "rate":
            node: Node = Rate(self.expression())
        elif name == "unique":
            if self.peek(1)[1] == "(" or self.peek()[1] in AGGREGATIONS:
                raise QueryError(
                    f"unique() at {pos} takes a metric selector, such as "
                    'unique(http.unique_clients{route="/"}), not a function call'
                )
            node = Unique(self.selector())
        elif name == "histogram_quantile":
            q = float(self.take("number"))
            if not 0 <= q <= 1:
                raise QueryError(f"histogram_quantile needs 0 <= q <= 1, got {q}")
            self.take("punct", ",")
            node = Quantile(q, self.expression())
        else:
            raise QueryError(
                f"unknown function {name!r} at {pos}: expected rate, sum, avg, max, min, "
                "count, unique or histogram_quantile"
            )
        self.take("punct", ")")
        return node

    def by_clause(self) -> tuple[str, ...]:
        if self.peek()[:2] != ("name", "by"):
            return ()
        self.take("name")
        self.take("punct", "(")
        labels = [self.label()]
        while self.peek()[1] == ",":
            self.take("punct")
            labels.append(self.label())
        self.take("punct", ")")
        return tuple(labels)

    def label(self) -> str:
        label = self.take("name")
        if not is_label_name(label):
            raise QueryError(f"invalid label name {label!r}")
        return label

    def selector(self) -> Selector:
        kind, value, pos = self.peek()
        if kind == "name":
            self.i += 1
            names: tuple[str, ...] = (self.metric_name(unescape(value), pos),)
        elif value == "(":  # Grafana's multi-value interpolation: (a|b|c)
            names = self.name_list("(", "|", ")")
        elif value == "{" and self.peek(2)[1] in (",", "}"):  # the :glob format: {a,b}
            names = self.name_list("{", ",", "}")
        else:
            found = repr(value) if kind != "end" else "the end"
            raise QueryError(f"expected a metric name at {pos}, found {found} in {self.text!r}")
        matchers: list[Matcher] = []
        if self.peek()[1] == "{":
            self.take("punct", "{")
            while self.peek()[1] != "}":
                label = self.label()
                op = self.take("op")
                matchers.append(Matcher.make(label, op, self.string(op)))
                if self.peek()[1] != ",":
                    break
                self.take("punct", ",")
            self.take("punct", "}")
        return Selector(names, tuple(matchers))

    def name_list(self, open_: str, separator: str, close: str) -> tuple[str, ...]:
        self.take("punct", open_)
        names = []
        while True:
            _, value, pos = self.peek()
            self.take("name")
            names.append(self.metric_name(unescape(value), pos))
            if self.peek()[1] == close:
                break
            self.take("punct", separator)
        self.take("punct", close)
        return tuple(dict.fromkeys(names))

    def metric_name(self, name: str, pos: int) -> str:
        if not is_metric_name(name):
            raise QueryError(f"invalid metric name {name!r} at {pos}")
        return name

    def string(self, op: str) -> str:
        raw = self.take("string")
        body = raw[1:-1]
        if op in ("=~", "!~"):
            # Keep regex escapes (\. \d ...); only the quote itself is unescaped.
            return body.replace('\\"', '"').replace("\\'", "'")
        # Exact matchers: Grafana's regex interpolation escapes . / { } ... - undo it.
        return unescape(body)
