"""The PromQL tree ``parser`` builds and ``engine`` evaluates. Pure.

Every node knows its value type (``scalar``, ``vector``, ``matrix``, ``string``), checked while
parsing as Prometheus does, so that evaluation never meets a type it cannot handle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from slicecount.core.series import is_label_name
from slicecount.errors import QueryError, extra_imports

with extra_imports("datasource", "the PromQL engine of the datasource"):
    import re2

ValueType = Literal["scalar", "vector", "matrix", "string"]
Card = Literal["one-to-one", "many-to-one", "one-to-many", "many-to-many"]
NAME_LABEL = "__name__"

MAX_REGEX_LENGTH = 1000
"""Longest regex accepted in a matcher or a function argument."""
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.max_mem = 8 << 20


def compile_regex(pattern: str) -> Any:
    """An RE2 regex for full matches (linear time), or QueryError naming the pattern."""
    if len(pattern) > MAX_REGEX_LENGTH:
        raise QueryError(
            f"regex is {len(pattern)} characters long, more than the limit of {MAX_REGEX_LENGTH}"
        )
    try:
        return re2.compile(f"(?:{pattern})", _RE2_OPTIONS)
    except Exception as exc:
        raise QueryError(f"invalid regex {pattern!r}: {exc}") from None


_ANY = {".*": 0, ".+": 1}
"""Regexes that match every value of at least so many characters with no newline (``.``
matches none), answered without running them: Grafana's "All" sends ``.*`` for every
variable of every panel, and matching thousands of series cost a refresh a few ms."""


@dataclass(frozen=True)
class Matcher:
    """``label op "value"`` with op ``=``, ``!=``, ``=~``, ``!~`` (regexes fully anchored), or
    ``<``, ``>`` (the simPod targets' numeric comparison: a value that is no number fails)."""

    label: str
    op: str
    value: str
    regex: Any = field(default=None, compare=False, repr=False)  # the number for < and >

    @classmethod
    def make(cls, label: str, op: str, value: str) -> Matcher:
        if not is_label_name(label):
            raise QueryError(f"invalid label name {label!r} in a matcher")
        if op in ("=~", "!~"):
            return cls(label, op, value, compile_regex(value))
        if op in ("<", ">"):
            try:
                return cls(label, op, value, float(value))
            except ValueError:
                raise QueryError(f"{label}{op}{value!r}: '<' and '>' need a number") from None
        if op not in ("=", "!="):
            raise QueryError(f"unknown matcher operator {op!r}")
        return cls(label, op, value)

    def matches(self, value: str) -> bool:
        """Whether a label's value (``""`` when the label is absent) satisfies the matcher."""
        op = self.op
        if op == "=":
            return value == self.value
        if op == "!=":
            return value != self.value
        if op in ("<", ">"):
            try:
                number = float(value)
            except ValueError:
                return False
            bound: float = self.regex
            return number < bound if op == "<" else number > bound
        shortest = _ANY.get(self.value)
        if shortest is not None and "\n" not in value:
            found = len(value) >= shortest
        else:
            found = self.regex.fullmatch(value) is not None
        return found if op == "=~" else not found

    def __str__(self) -> str:
        return f'{self.label}{self.op}"{self.value}"'


@dataclass(frozen=True, eq=False)
class NumberLiteral:
    value: float
    type: ValueType = "scalar"


@dataclass(frozen=True, eq=False)
class StringLiteral:
    value: str
    type: ValueType = "string"


@dataclass(frozen=True, eq=False)
class VectorSelector:
    """``name{matchers} offset o``; the name, when given, is one of the matchers."""

    matchers: tuple[Matcher, ...]
    offset: float = 0.0
    type: ValueType = "vector"

    def matches(self, labels: dict[str, str]) -> bool:
        return all(m.matches(labels.get(m.label, "")) for m in self.matchers)

    def __str__(self) -> str:
        body = ",".join(str(m) for m in self.matchers)
        return "{" + body + "}"


@dataclass(frozen=True, eq=False)
class MatrixSelector:
    """``selector[range]``: the samples of a window, only as a range function's argument."""

    vector: VectorSelector
    range: float
    type: ValueType = "matrix"


@dataclass(frozen=True, eq=False)
class Call:
    func: str
    args: tuple[Node, ...]
    type: ValueType = "vector"


@dataclass(frozen=True, eq=False)
class Aggregate:
    """``op by|without (grouping) ([param,] expr)``."""

    op: str
    expr: Node
    param: Node | None = None
    grouping: tuple[str, ...] = ()
    without: bool = False
    type: ValueType = "vector"


@dataclass(frozen=True)
class Matching:
    """How two vectors' series pair up: ``on``/``ignoring`` labels, and ``group_left`` /
    ``group_right`` (``card`` many-to-one / one-to-many) with the labels they copy over."""

    card: Card = "one-to-one"
    on: bool = False
    labels: tuple[str, ...] = ()
    include: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class Binary:
    op: str
    lhs: Node
    rhs: Node
    bool: bool = False
    matching: Matching | None = None  # only between two vectors
    type: ValueType = "vector"


@dataclass(frozen=True, eq=False)
class Unary:
    op: str
    expr: Node
    type: ValueType = "vector"


Node = (NumberLiteral | StringLiteral | VectorSelector | MatrixSelector | Call | Aggregate) | (
    Binary | Unary
)


def children(node: Node) -> tuple[Node, ...]:
    """The direct subtrees of a node."""
    if isinstance(node, MatrixSelector):
        return (node.vector,)
    if isinstance(node, Call):
        return node.args
    if isinstance(node, Aggregate):
        return (node.expr,) if node.param is None else (node.param, node.expr)
    if isinstance(node, Binary):
        return (node.lhs, node.rhs)
    if isinstance(node, Unary):
        return (node.expr,)
    return ()


def walk(node: Node) -> list[Node]:
    """Every node of a tree, parents before children, without recursion."""
    out, stack = [], [node]
    while stack:
        item = stack.pop()
        out.append(item)
        stack.extend(reversed(children(item)))
    return out


def depth(node: Node) -> int:
    """Levels of a tree (a leaf is 1), counted without recursion."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        stack += [(child, level + 1) for child in children(item)]
    return deepest
