"""PromQL text -> a type-checked tree (``ast``), with Prometheus' precedence and errors that
name the construct and its position. Pure.

    sum by (status) (rate(http_requests_total{route=~"/api/.*"}[1m0s]))
    histogram_quantile(0.95, sum by (le) (rate(http_request_duration_seconds_bucket[5m])))
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

from slicecount.errors import QueryError
from slicecount.promql import typecheck
from slicecount.promql.ast import (
    NAME_LABEL,
    Aggregate,
    Call,
    Card,
    Matcher,
    Matching,
    MatrixSelector,
    Node,
    NumberLiteral,
    StringLiteral,
    Unary,
    VectorSelector,
    depth,
    walk,
)
from slicecount.promql.durations import parse_duration
from slicecount.promql.lexer import Token, Tokens, number, shown, unquote
from slicecount.promql.signatures import AGGREGATIONS
from slicecount.promql.typecheck import COMPARISONS, SET_OPERATORS

MAX_DEPTH = 100
"""Deepest tree accepted: evaluation recurses along it."""

PRECEDENCE = {
    "or": 1,
    "and": 2,
    "unless": 2,
    "==": 3,
    "!=": 3,
    "<=": 3,
    "<": 3,
    ">=": 3,
    ">": 3,
    "+": 4,
    "-": 4,
    "*": 5,
    "/": 5,
    "%": 5,
    "^": 6,
}
_UNARY_PRECEDENCE = PRECEDENCE["^"]  # -2 ^ 2 is -(2 ^ 2), as in Prometheus


PARSED = 1024
"""Texts whose trees are kept: a dashboard asks the same queries at every refresh, and a
panel's query took 1-2 ms to parse, a tenth of a live 5-minute refresh's CPU."""


def parse(text: str) -> Node:
    """The tree of a PromQL expression; QueryError naming the first problem. A tree is never
    changed once built, so the same text is parsed once (of the last PARSED)."""
    if not isinstance(text, str) or not text.strip():
        raise QueryError("empty query: expected a PromQL expression such as up")
    return _parse(text)


@functools.lru_cache(maxsize=PARSED)
def _parse(text: str) -> Node:
    return _Parser(text).whole()


class _Parser(Tokens):
    def __init__(self, text: str) -> None:
        super().__init__(text, MAX_DEPTH)

    def whole(self, levels: int = 0) -> Node:
        """The text as one expression, at most MAX_DEPTH (+ ``levels`` that the caller's
        grammar adds) deep: evaluation recurses along it."""
        node = self.expression(0)
        self.expect("end")
        if len(walk(node)) > 10_000 or depth(node) > MAX_DEPTH + levels:
            raise QueryError(f"query nests more than {MAX_DEPTH} levels deep")
        return node

    # -- expressions ------------------------------------------------------------------------

    def expression(self, minimum: int) -> Node:
        left = self.unary()
        while True:
            token = self.peek()
            op = token.text.lower() if token.kind == "ident" else token.text
            if token.kind not in ("op", "ident") or op not in PRECEDENCE:
                return left
            precedence = PRECEDENCE[op]
            if precedence < minimum:
                return left
            self.next()
            returns_bool, matching = self.modifiers(op)
            # ^ is right-associative, every other operator left-associative
            self.descend()  # a chain of ^ (or of unary minus) nests as deep as it is long
            right = self.expression(precedence if op == "^" else precedence + 1)
            self.level -= 1
            with self.typed(token):
                left = typecheck.binary(op, left, right, returns_bool, matching)

    def unary(self) -> Node:
        if self.at("-", "+"):
            token = self.next()
            self.descend()
            operand = self.expression(_UNARY_PRECEDENCE)
            self.level -= 1
            if operand.type not in ("scalar", "vector"):
                raise self.error(f"unary {token.text} needs a scalar or a vector", token)
            if token.text == "+":
                return operand
            if isinstance(operand, NumberLiteral):
                return NumberLiteral(-operand.value)
            return Unary("-", operand, operand.type)
        return self.postfix(self.primary())

    def postfix(self, node: Node) -> Node:
        while True:
            if self.at("["):
                token = self.next()
                if not isinstance(node, VectorSelector):
                    raise self.error("ranges only allowed for vector selectors", token)
                if node.offset:
                    raise self.error("offset must follow the range: x[5m] offset 1h", token)
                seconds = self.duration()
                if self.peek().text.startswith(":"):
                    raise self.error("subqueries ([range:step]) are not supported")
                if seconds <= 0:
                    raise self.error("a range must be positive", token)
                self.expect("punct", "]")
                node = MatrixSelector(node, seconds)
            elif self.peek().kind == "ident" and self.peek().text.lower() == "offset":
                token = self.next()
                node = self.offset(node, token)
            elif self.at("@"):
                raise self.error("the @ modifier is not supported")
            else:
                return node

    def offset(self, node: Node, token: Token) -> Node:
        negative = self.at("-")
        if negative:
            self.next()
        seconds = self.duration() * (-1 if negative else 1)
        if isinstance(node, VectorSelector) and not node.offset:
            return VectorSelector(node.matchers, seconds)
        if isinstance(node, MatrixSelector) and not node.vector.offset:
            return MatrixSelector(VectorSelector(node.vector.matchers, seconds), node.range)
        raise self.error("offset applies once, to a selector (x offset 5m, x[5m] offset 1h)", token)

    def duration(self) -> float:
        token = self.peek()
        if token.kind != "duration":
            raise self.error(f"expected a duration such as 5m or 1m30s, found {shown(token)}")
        self.next()
        try:
            return parse_duration(token.text)
        except ValueError as exc:
            raise self.error(str(exc), token) from None

    def primary(self) -> Node:
        token = self.peek()
        if token.kind == "number":
            self.next()
            return NumberLiteral(number(token.text))
        if token.kind == "string":
            self.next()
            return StringLiteral(unquote(token.text))
        if token.kind == "duration":
            raise self.error(f"unexpected duration {token.text}: durations go in [...] or offset")
        if self.at("("):
            self.next()
            self.descend()
            inner = self.expression(0)
            self.expect("punct", ")")
            self.level -= 1
            if self.at("[", "offset"):
                raise self.error(f"{self.peek().text} only applies to a selector, not to (...)")
            return inner
        if self.at("{"):
            return self.selector(None)
        if token.kind == "ident":
            word = token.text
            if word.lower() in ("inf", "nan"):
                self.next()
                return NumberLiteral(float(word))
            if word.lower() in AGGREGATIONS and (
                self.peek(1).text.lower() in ("(", "by", "without")
            ):
                return self.aggregation()
            if self.peek(1).text == "(" and self.peek(1).kind == "punct":
                return self.call()
            self.next()
            return self.selector(word)
        raise self.error(f"unexpected {shown(token)}")

    # -- selectors --------------------------------------------------------------------------

    def selector(self, name: str | None) -> VectorSelector:
        matchers: list[Matcher] = []
        if name is not None:
            matchers.append(Matcher.make(NAME_LABEL, "=", name))
        if self.at("{"):
            self.next()
            while not self.at("}"):
                label = self.label_name()
                op = self.expect("op")
                if op.text not in ("=", "!=", "=~", "!~"):
                    raise self.error(f"unexpected {op.text!r} in a label matcher", op)
                value = unquote(self.expect("string").text)
                matchers.append(Matcher.make(label, op.text, value))
                if not self.at(","):
                    break
                self.next()
            self.expect("punct", "}")
        if not any(not m.matches("") for m in matchers):
            raise self.error("vector selector must contain at least one non-empty matcher")
        return VectorSelector(tuple(matchers))

    def label_name(self) -> str:
        token = self.peek()
        if token.kind != "ident" or ":" in token.text:
            raise self.error(f"expected a label name, found {shown(token)}")
        return self.next().text

    def label_list(self) -> tuple[str, ...]:
        self.expect("punct", "(")
        labels: list[str] = []
        while not self.at(")"):
            labels.append(self.label_name())
            if not self.at(","):
                break
            self.next()
        self.expect("punct", ")")
        return tuple(labels)

    # -- calls ------------------------------------------------------------------------------

    def arguments(self) -> list[Node]:
        self.expect("punct", "(")
        self.descend()
        args: list[Node] = []
        while not self.at(")"):
            args.append(self.expression(0))
            if not self.at(","):
                break
            self.next()
        self.expect("punct", ")")
        self.level -= 1
        return args

    def call(self) -> Call:
        token = self.next()
        with self.typed(token):
            typecheck.known_function(token.text)
        args = self.arguments()
        with self.typed(token):
            return typecheck.call(token.text, args)

    def aggregation(self) -> Aggregate:
        token = self.next()
        op = token.text.lower()
        grouping: tuple[str, ...] = ()
        without = False
        if self.at("by", "without"):
            without = self.next().text.lower() == "without"
            grouping = self.label_list()
        args = self.arguments()
        if self.at("by", "without"):
            if grouping or without:
                raise self.error(f"{op}: by/without given twice")
            without = self.next().text.lower() == "without"
            grouping = self.label_list()
        with self.typed(token):
            return typecheck.aggregation(op, args, grouping, without)

    @contextmanager
    def typed(self, token: Token) -> Iterator[None]:
        """A typing rule broken while building a node: an error at ``token``."""
        try:
            yield
        except typecheck.TypeProblem as problem:
            raise self.error(str(problem), token) from None

    # -- binary operators -------------------------------------------------------------------

    def modifiers(self, op: str) -> tuple[bool, Matching]:
        returns_bool = False
        if self.at("bool"):
            if op not in COMPARISONS:
                raise self.error("bool modifier can only be used on comparison operators")
            self.next()
            returns_bool = True
        card: Card = "many-to-many" if op in SET_OPERATORS else "one-to-one"
        on = False
        labels: tuple[str, ...] = ()
        include: tuple[str, ...] = ()
        if self.at("on", "ignoring"):
            on = self.next().text.lower() == "on"
            labels = self.label_list()
            if self.at("group_left", "group_right"):
                if op in SET_OPERATORS:
                    raise self.error(f"no grouping allowed for {op!r} operation")
                left = self.next().text.lower() == "group_left"
                card = "many-to-one" if left else "one-to-many"
                if self.at("("):
                    include = self.label_list()
        return returns_bool, Matching(card, on, labels, include)
