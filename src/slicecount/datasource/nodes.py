"""The query tree: label matchers, metric selectors, functions and arithmetic. Pure.

``query.parse`` builds it from a target's text, ``protocol.compile_target`` adds the builder
payload and ad-hoc filters, ``evaluate`` computes it. Regex matchers run on RE2 (linear time).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slicecount.errors import QueryError

# one RE2 setup serves both query languages
from slicecount.promql.ast import compile_regex as compile_regex
from slicecount.series import is_label_name


@dataclass(frozen=True)
class Matcher:
    """``label op value``; ops ``=`` ``!=`` ``=~`` ``!~`` ``<`` ``>``."""

    label: str
    op: str
    value: str
    regex: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def make(cls, label: str, op: str, value: str) -> Matcher:
        if not is_label_name(label):
            raise QueryError(f"invalid label name {label!r} in a matcher")
        if op in ("=~", "!~"):
            return cls(label, op, value, compile_regex(value))
        if op in ("<", ">"):
            try:
                float(value)
            except ValueError:
                raise QueryError(f"{label}{op}{value!r}: '<' and '>' need a number") from None
        if op not in ("=", "!=", "<", ">"):
            raise QueryError(f"unknown matcher operator {op!r}")
        return cls(label, op, value)

    def matches(self, labels: dict[str, str]) -> bool:
        actual = labels.get(self.label, "")
        op = self.op
        if op == "=":
            return actual == self.value
        if op == "!=":
            return actual != self.value
        if op == "=~":
            return self.regex.fullmatch(actual) is not None
        if op == "!~":
            return self.regex.fullmatch(actual) is None
        try:
            number = float(actual)
        except ValueError:
            return False
        return number < float(self.value) if op == "<" else number > float(self.value)


@dataclass(frozen=True)
class Selector:
    """One or more metric names and the matchers their series must satisfy."""

    names: tuple[str, ...]
    matchers: tuple[Matcher, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        return all(m.matches(labels) for m in self.matchers)


@dataclass(frozen=True)
class Rate:
    """Per-second rate of each slice's count."""

    arg: Node


@dataclass(frozen=True)
class Aggregate:
    """``op by (labels) (arg)``, pointwise over the series of each group."""

    op: str
    by: tuple[str, ...]
    arg: Node


@dataclass(frozen=True)
class Quantile:
    """``histogram_quantile(q, h)``: h names a histogram (its ``.bucket`` series are read)."""

    q: float
    arg: Node


@dataclass(frozen=True)
class Unique:
    """``unique(selector)``: the distinct values of each unique series per point."""

    arg: Selector


@dataclass(frozen=True)
class Scalar:
    """A number, e.g. the 100 of ``... * 100``."""

    value: float


@dataclass(frozen=True)
class Binary:
    """``left / right`` or ``left * right``, pointwise between series with equal labels (a side
    with a single unlabelled series, or a number, applies to every series of the other)."""

    op: str
    left: Node
    right: Node


Node = Selector | Rate | Aggregate | Quantile | Unique | Scalar | Binary


def depth(node: Node) -> int:
    """Levels of the tree (a selector alone is 1), counted without recursion: a tree too deep
    to recurse over is measured before anything recurses over it."""
    deepest = 0
    stack = [(node, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, Binary):
            stack += [(item.left, level + 1), (item.right, level + 1)]
        elif isinstance(item, Rate | Aggregate | Quantile | Unique):
            stack.append((item.arg, level + 1))
    return deepest


def selectors(node: Node) -> list[Selector]:
    """Every selector of a tree, left to right."""
    if isinstance(node, Selector):
        return [node]
    if isinstance(node, Scalar):
        return []
    if isinstance(node, Binary):
        return selectors(node.left) + selectors(node.right)
    return selectors(node.arg)


def with_matchers(node: Node, extra: tuple[Matcher, ...]) -> Node:
    """The same tree with ``extra`` matchers added to every selector (ad-hoc filters)."""
    if not extra:
        return node
    if isinstance(node, Selector):
        return Selector(node.names, node.matchers + extra)
    if isinstance(node, Scalar):
        return node
    if isinstance(node, Binary):
        return Binary(node.op, with_matchers(node.left, extra), with_matchers(node.right, extra))
    if isinstance(node, Rate):
        return Rate(with_matchers(node.arg, extra))
    if isinstance(node, Aggregate):
        return Aggregate(node.op, node.by, with_matchers(node.arg, extra))
    if isinstance(node, Unique):
        return Unique(Selector(node.arg.names, node.arg.matchers + extra))
    return Quantile(node.q, with_matchers(node.arg, extra))


def uses_unique(node: Node) -> bool:
    """True when the tree reads unique series (``unique(...)`` anywhere in it)."""
    if isinstance(node, Unique):
        return True
    if isinstance(node, Selector | Scalar):
        return False
    if isinstance(node, Binary):
        return uses_unique(node.left) or uses_unique(node.right)
    return uses_unique(node.arg)


def is_union(node: Node) -> bool:
    """A node whose series are unions read from Redis: ``unique(...)`` (one per series) or
    ``sum [by (...)] (unique(...))`` (one per group: the union of its series, not a sum)."""
    if isinstance(node, Aggregate):
        return node.op == "sum" and isinstance(node.arg, Unique)
    return isinstance(node, Unique)
