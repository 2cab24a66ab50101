"""PromQL's typing rules, applied as the parser builds each node (as Prometheus does): which
argument types a function or aggregation takes and which operands an operator accepts. Pure.

Each builder returns the typed node or raises ``TypeProblem``, which the parser turns into a
QueryError at the position of the offending token."""

from __future__ import annotations

from slicecount.promql.ast import Aggregate, Binary, Call, Matching, MatrixSelector, Node, ValueType
from slicecount.promql.signatures import FUNCTIONS, PARAMETRIZED, UNSUPPORTED

COMPARISONS = frozenset({"==", "!=", "<=", "<", ">=", ">"})
SET_OPERATORS = frozenset({"and", "or", "unless"})
TYPE_NAMES = {
    "scalar": "scalar",
    "vector": "instant vector",
    "matrix": "range vector",
    "string": "string",
}


class TypeProblem(Exception):
    """A node whose arguments or operands have the wrong types or count."""


def _check(node: Node, expected: ValueType, what: str) -> None:
    if node.type != expected:
        raise TypeProblem(
            f"expected type {TYPE_NAMES[expected]} in {what}, got {TYPE_NAMES[node.type]}"
        )


def known_function(name: str) -> None:
    if name not in FUNCTIONS:
        known = "is not supported by slicecount" if name in UNSUPPORTED else "is unknown"
        raise TypeProblem(f"function {name}() {known}")


def call(name: str, args: list[Node]) -> Call:
    signature = FUNCTIONS[name]
    fixed = len(signature.args)
    low = fixed - signature.optional
    if len(args) < low or (len(args) > fixed and not signature.variadic):
        want = f"{low}" if low == fixed else f"{low} to {fixed}"
        raise TypeProblem(f"{name}() takes {want} arguments, got {len(args)}")
    for index, arg in enumerate(args):
        _check(arg, signature.args[min(index, fixed - 1)], f"argument {index + 1} of {name}()")
    if signature.args[:1] == ("matrix",) and not isinstance(args[0], MatrixSelector):
        raise TypeProblem(f"{name}() needs a range selector such as x[5m]")
    return Call(name, tuple(args), signature.returns)


def aggregation(op: str, args: list[Node], grouping: tuple[str, ...], without: bool) -> Aggregate:
    want = 2 if op in PARAMETRIZED else 1
    if len(args) != want:
        raise TypeProblem(f"{op} takes {want} argument(s), got {len(args)}")
    param = args[0] if want == 2 else None
    if param is not None:
        _check(param, "scalar", f"the parameter of {op}")
    _check(args[-1], "vector", f"the argument of {op}")
    return Aggregate(op, args[-1], param, grouping, without)


def binary(op: str, lhs: Node, rhs: Node, returns_bool: bool, matching: Matching) -> Binary:
    for side in (lhs, rhs):
        if side.type not in ("scalar", "vector"):
            raise TypeProblem(
                "binary expression must contain only scalar and instant vector types, "
                f"got {TYPE_NAMES[side.type]}"
            )
    both_vectors = lhs.type == "vector" and rhs.type == "vector"
    if op in SET_OPERATORS and not both_vectors:
        raise TypeProblem(f"set operator {op!r} not allowed in binary scalar expression")
    if op in COMPARISONS and lhs.type == rhs.type == "scalar" and not returns_bool:
        raise TypeProblem("comparisons between scalars must use the bool modifier")
    if (matching.on or matching.labels) and not both_vectors:
        raise TypeProblem("vector matching only allowed between instant vectors")
    kind: ValueType = "scalar" if lhs.type == rhs.type == "scalar" else "vector"
    return Binary(op, lhs, rhs, returns_bool, matching if both_vectors else None, kind)
