"""The simPod targets' language: PromQL with Grafana's conveniences, compiled to the PromQL
tree (``promql.ast``) that the one engine evaluates. Pure.

    http.requests{status=~"5..",route!="/health"}         the count of each point's slice
    rate(http.requests)                                   per second, each slice (no window)
    sum by (status) (rate(http.requests{method="GET"}))
    histogram_quantile(0.95, sum(http.request.duration))  ``le`` kept for you
    topk(3, sum by (route) (rate(http.requests[5m])))     any PromQL function
    unique(http.unique_clients{route="/"})                distinct values per point
    sum by (route) (unique(http.unique_clients))          a union per route, never a sum

A name is a metric as slicecount stores it (dots and dashes allowed: a dash inside a name
belongs to it, so put spaces around the minus operator), a histogram's name (its cumulative
``le`` buckets), or Grafana's interpolation of a multi-value variable: escaped
(``http\\.requests``), ``(a|b)`` or ``{a,b}``. A bare selector is the count of each point's
slices (``increase(x[0])``, where ``[0]`` is a point's window); a range function without a
window (``rate(x)``) takes that window too; ``<`` and ``>`` compare label values as numbers;
a lone unlabelled series (``sum(x)``) divides or multiplies every series of the other side
(``on() group_left``).

This module is the grammar (tokens, the parser, the name forms and their catalogue); the
rewrites it applies to the tree, and the questions asked of a parsed one, are ``rewrites``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from slicecount.core.histogram import BUCKET_SUFFIX
from slicecount.core.series import is_label_name, is_metric_name
from slicecount.errors import QueryError
from slicecount.promql import parser as promql
from slicecount.promql import typecheck
from slicecount.promql.ast import NAME_LABEL, Call, Matcher, MatrixSelector, Node, VectorSelector
from slicecount.promql.durations import PATTERN as DURATION
from slicecount.promql.lexer import Token, scan, shown
from slicecount.promql.signatures import AGGREGATIONS, FUNCTIONS
from slicecount.query.catalogue import Catalogue, Source
from slicecount.targets.rewrites import conveniences, one_slice, per_second

MAX_QUERY_LENGTH = 4000
"""Longest target accepted."""
PARSED_TARGETS = 1024
"""Targets whose trees are kept (at most MAX_QUERY_LENGTH characters each)."""

_TOKEN = re.compile(
    rf"""
      (?P<duration>{DURATION})(?![A-Za-z0-9_.])
    | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?![A-Za-z0-9_])
    | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`)
    | (?P<ident>(?:[A-Za-z_:]|\\.)(?:[A-Za-z0-9_.:\-]|\\.)*)
    | (?P<op>==|!=|<=|>=|=~|!~|[-+*/%^<>=])
    | (?P<punct>[(){{}}\[\],@|])
    """,
    re.VERBOSE,
)
_SPACE = re.compile(r"\s+")
_REGEX_SPECIALS = re.compile(r"([\\^$*+?.()|\[\]{}/])")


def unescape(text: str) -> str:
    """Drop Grafana's regex escaping (``\\.`` -> ``.``)."""
    return re.sub(r"\\(.)", r"\1", text) if "\\" in text else text


def regex_escape(value: str) -> str:
    """Escape like Grafana's regex interpolation does (what the builder sends back)."""
    return _REGEX_SPECIALS.sub(r"\\\1", value)


def unique_name(name: str) -> str:
    """The name ``unique(name)`` matches: how a unique metric is listed to Grafana."""
    return f"unique({name})"


def tokenize(text: str) -> list[Token]:
    return scan(text, MAX_QUERY_LENGTH, _TOKEN, _SPACE, _unexpected)


def _unexpected(text: str, pos: int, last: Token | None) -> QueryError:
    return QueryError(f"unexpected character {text[pos]!r} at {pos}")


def parse(text: str) -> Node:
    """The PromQL tree of a target; QueryError naming the first problem. A tree is never
    changed once built, so a dashboard's targets, asked again on every refresh, are parsed
    once."""
    if not isinstance(text, str) or not text.strip():
        raise QueryError("empty query: expected a metric name such as http.requests")
    return _parse(text)


@functools.lru_cache(maxsize=PARSED_TARGETS)
def _parse(text: str) -> Node:
    node = _Parser(text).whole(levels=2)
    return conveniences(node)  # recursive: after the depth is known to be bounded


class _Parser(promql._Parser):
    """PromQL's parser over the targets' tokens, with their name forms and defaults."""

    def __init__(self, text: str) -> None:
        super().__init__("")
        self.text = text
        self.tokens = tokenize(text)
        self.uniques: set[int] = set()

    def primary(self) -> Node:
        token, after = self.peek(), self.peek(1)
        if token.kind == "ident":
            word = token.text
            if word == "unique" and after.text == "(":
                return self.unique()
            called = after.kind == "punct" and after.text == "("
            keyword = word.lower() in ("inf", "nan") or word.lower() in AGGREGATIONS
            if called or (keyword and "." not in word):
                return super().primary()
            return self.named(self.names(), unique=False)
        if self.name_list_ahead():
            return self.named(self.names(), unique=False)
        if token.kind == "end" or token.text in (")", ",", "]", "}", "|"):
            raise self.error(f"expected a metric name, found {shown(token)}")
        return super().primary()

    def name_list_ahead(self) -> bool:
        """``(a|b)`` or ``{a,b}``: Grafana's interpolation of a multi-value variable."""
        token, name, after = self.peek(), self.peek(1), self.peek(2)
        if token.text == "(":
            return name.kind == "ident" and after.text == "|"
        return token.text == "{" and name.kind == "ident" and after.text in (",", "}")

    def names(self) -> tuple[str, ...]:
        token = self.peek()
        if token.kind == "ident":
            self.next()
            return (self.metric_name(token),)
        close, separator = (")", "|") if token.text == "(" else ("}", ",")
        self.next()
        names = [self.metric_name(self.expect("ident"))]
        while not self.at(close):
            self.expect("punct", separator)
            names.append(self.metric_name(self.expect("ident")))
        self.next()
        return tuple(dict.fromkeys(names))

    def metric_name(self, token: Token) -> str:
        name = unescape(token.text)
        if not is_metric_name(name):
            raise QueryError(f"invalid metric name {name!r} at {token.pos}")
        return name

    def unique(self) -> VectorSelector:
        token = self.next()
        self.expect("punct", "(")
        inner, after = self.peek(), self.peek(1)
        if not (inner.kind == "ident" or self.name_list_ahead()) or after.text == "(":
            raise QueryError(
                f"unique() at {token.pos} takes a metric selector, such as "
                'unique(http.unique_clients{route="/"}), not a function call'
            )
        selector = self.named(self.names(), unique=True)
        self.expect("punct", ")")
        return selector

    def named(self, names: tuple[str, ...], unique: bool) -> VectorSelector:
        shown = [unique_name(n) if unique else n for n in names]
        if len(shown) == 1:
            by_name = Matcher.make(NAME_LABEL, "=", shown[0])
        else:
            by_name = Matcher.make(NAME_LABEL, "=~", "|".join(map(regex_escape, shown)))
        selector = VectorSelector((by_name, *self.matchers()))
        if unique:
            self.uniques.add(id(selector))
        return selector

    def matchers(self) -> list[Matcher]:
        matchers: list[Matcher] = []
        if not self.at("{"):
            return matchers
        self.next()
        while not self.at("}"):
            label = self.label_name()
            op = self.expect("op")
            if op.text not in ("=", "!=", "=~", "!~", "<", ">"):
                raise self.error(f"unexpected {op.text!r} in a label matcher", op)
            body = self.expect("string").text[1:-1]
            if op.text in ("=~", "!~"):  # keep regex escapes; only the quotes are unescaped
                value = body.replace('\\"', '"').replace("\\'", "'")
            else:  # Grafana's regex interpolation escapes . / { } ... in exact values too
                value = unescape(body)
            matchers.append(Matcher.make(label, op.text, value))
            if not self.at(","):
                break
            self.next()
        self.expect("punct", "}")
        return matchers

    def label_name(self) -> str:
        token = self.peek()
        if token.kind != "ident" or not is_label_name(token.text):
            raise self.error(f"expected a label name, found {token.text!r}")
        return self.next().text

    def postfix(self, node: Node) -> Node:
        node = super().postfix(node)
        if isinstance(node, VectorSelector) and id(node) not in self.uniques:
            return Call("increase", (MatrixSelector(node, 0.0),))  # the count of its slices
        return node

    def call(self) -> Call:
        token = self.next()
        with self.typed(token):
            typecheck.known_function(token.text)
        args = self.arguments()
        signature = FUNCTIONS.get(token.text)
        if args and signature and signature.args[:1] == ("matrix",) and args[0].type == "vector":
            if token.text == "rate":
                return per_second(args[0])  # type: ignore[return-value]  # or a sum of rates
            window = one_slice(args[0])
            if window is None:
                raise self.error(f"{token.text}() needs a metric or a range such as x[5m]", token)
            args[0] = window
        with self.typed(token):
            return typecheck.call(token.text, args)


def catalogue(stored: Iterable[str], unique: Iterable[str]) -> Catalogue:
    """The names the targets' selectors match: each stored metric as stored (a histogram's
    ``.bucket`` and ``.sum_us`` parts as they are), each histogram's name for its cumulative
    ``le`` buckets (unless a metric is stored under it), ``unique(name)`` for unique ones."""
    names = sorted(set(stored))
    sources = {name: Source(name, "counter") for name in names}
    for name in names:
        if name.endswith(BUCKET_SUFFIX):
            sources.setdefault(name[: -len(BUCKET_SUFFIX)], Source(name, "bucket"))
    sources |= {unique_name(name): Source(name, "unique") for name in sorted(set(unique))}
    return Catalogue(sources, ())
