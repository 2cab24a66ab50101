"""Binary operators: arithmetic and comparisons between scalars and vectors, vector matching
(``on``/``ignoring``, ``group_left``/``group_right``, ``bool``) and ``and or unless``, with
Prometheus' label rules. Pure."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from slicecount.promql.ast import NAME_LABEL, Binary, Matching
from slicecount.promql.typecheck import COMPARISONS, SET_OPERATORS
from slicecount.promql.values import (
    EvaluationError,
    Labels,
    Series,
    Value,
    check_unique,
    format_labels,
    key,
    without_name,
)

Signature = tuple[tuple[str, str], ...]


def divide(a: float, b: float) -> float:
    """``a / b`` as Go computes it: x/0 is +-Inf (0/0 and NaN/0 are NaN), never an error."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _modulo(a: float, b: float) -> float:
    if b == 0 or math.isinf(a):
        return math.nan
    return math.fmod(a, b)  # Go's math.Mod: the sign of the dividend


def _power(a: float, b: float) -> float:
    try:
        return math.pow(a, b)
    except OverflowError:
        return math.inf
    except ValueError:  # 0 ** -1, a negative number to a fractional power
        if a != 0:
            return math.nan
        odd = b == int(b) and int(b) % 2 == 1
        return math.copysign(math.inf, a) if odd else math.inf  # Go: Pow(-0, -1) = -Inf


ARITHMETIC: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": divide,
    "%": _modulo,
    "^": _power,
}
COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    # Python's operators: two floats give a bool, two numpy arrays (``pointwise``) a mask
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def apply(op: str, a: float, b: float) -> tuple[float, bool]:
    """(value, keep) of ``a op b``: a comparison keeps ``a`` when it holds."""
    if op in COMPARE:
        return a, COMPARE[op](a, b)
    try:
        return ARITHMETIC[op](a, b), True
    except OverflowError:
        return math.inf, True


def scalars(op: str, lhs: list[float], rhs: list[float]) -> list[float]:
    """Between two scalars: arithmetic, or a comparison with ``bool`` (1 or 0)."""
    if op in COMPARE:
        return [1.0 if COMPARE[op](a, b) else 0.0 for a, b in zip(lhs, rhs, strict=True)]
    return [apply(op, a, b)[0] for a, b in zip(lhs, rhs, strict=True)]


def with_scalar(
    op: str, vector: list[Series], number: list[float], swap: bool, as_bool: bool
) -> list[Series]:
    """A vector and a scalar (``swap``: the scalar is on the left). A comparison without
    ``bool`` filters and keeps the vector's value and name; anything else drops the name."""
    comparison = op in COMPARE
    out = []
    for s in vector:
        values: list[Value] = []
        for v, n in zip(s.values, number, strict=True):
            if v is None:
                values.append(None)
                continue
            result, keep = apply(op, n, v) if swap else apply(op, v, n)
            if comparison and as_bool:
                values.append(1.0 if keep else 0.0)
            elif comparison:
                values.append(v if keep else None)
            else:
                values.append(result)
        labels = s.labels if comparison and not as_bool else without_name(s.labels)
        out.append(Series(labels, values))
    return check_unique(out)


def signature(labels: Labels, matching: Matching) -> Signature:
    if matching.on:
        return tuple((k, labels.get(k, "")) for k in sorted(matching.labels))
    dropped = set(matching.labels) | {NAME_LABEL}
    return tuple(sorted((k, v) for k, v in labels.items() if k not in dropped))


def vectors(node: Binary, lhs: list[Series], rhs: list[Series]) -> list[Series]:
    matching = node.matching
    assert matching is not None
    if node.op in SET_OPERATORS:
        return _set_operation(node.op, lhs, rhs, matching)
    many, one = (rhs, lhs) if matching.card == "one-to-many" else (lhs, rhs)
    steps = len((lhs or rhs)[0].values) if lhs or rhs else 0
    ones: dict[Signature, list[Series]] = {}
    for s in one:
        ones.setdefault(signature(s.labels, matching), []).append(s)
    out: dict[tuple[tuple[str, str], ...], Series] = {}
    used: dict[tuple[Signature, int], Labels] = {}  # one-to-one: each match used once
    for s in many:
        sig = signature(s.labels, matching)
        partners = ones.get(sig)
        if not partners:
            continue
        pair: tuple[Series, Series] | None = None  # (partner, result line) while it lasts
        for index in range(steps):
            value = s.values[index]
            if value is None:
                continue
            partner = _only(partners, index, sig, matching)
            if partner is None:
                continue
            if matching.card == "one-to-one":
                previous = used.setdefault((sig, index), s.labels)
                if previous is not s.labels:
                    raise EvaluationError(
                        f"multiple matches for labels {format_labels(dict(sig))}: "
                        "many-to-one matching must be explicit (group_left/group_right)"
                    )
            other = partner.values[index]
            assert other is not None
            left, right = (other, value) if matching.card == "one-to-many" else (value, other)
            result, keep = apply(node.op, left, right)
            if node.op in COMPARISONS:
                if node.bool:
                    result = 1.0 if keep else 0.0
                elif not keep:
                    continue
            if pair is None or pair[0] is not partner:  # labels computed once per pairing
                labels = result_labels(node, matching, s.labels, partner.labels)
                pair = (partner, out.setdefault(key(labels), Series(labels, [None] * steps)))
            line = pair[1]
            if line.values[index] is not None:
                raise EvaluationError(
                    "vector cannot contain metrics with the same labelset "
                    + format_labels(line.labels)
                )
            line.values[index] = result
    return list(out.values())


def _only(partners: list[Series], index: int, sig: Signature, matching: Matching) -> Series | None:
    found = None
    for partner in partners:
        if partner.values[index] is not None:
            if found is not None:
                side = "left" if matching.card == "one-to-many" else "right"
                raise EvaluationError(
                    f"found duplicate series for the match group {format_labels(dict(sig))} "
                    f"on the {side} hand-side of the operation: many-to-many matching not "
                    "allowed: matching labels must be unique on one side"
                )
            found = partner
    return found


def result_labels(node: Binary, matching: Matching, mine: Labels, theirs: Labels) -> Labels:
    labels = dict(mine)
    if node.op not in COMPARISONS or node.bool:
        labels.pop(NAME_LABEL, None)
    if matching.card == "one-to-one":
        if matching.on:
            labels = {k: v for k, v in labels.items() if k in matching.labels}
        else:
            for label in matching.labels:
                labels.pop(label, None)
    for label in matching.include:
        if theirs.get(label, ""):
            labels[label] = theirs[label]
        else:
            labels.pop(label, None)
    return labels


def _set_operation(
    op: str, lhs: list[Series], rhs: list[Series], matching: Matching
) -> list[Series]:
    steps = len((lhs or rhs)[0].values) if lhs or rhs else 0
    present: list[set[Signature]] = [set() for _ in range(steps)]
    for s in rhs if op != "or" else lhs:
        sig = signature(s.labels, matching)
        for index, v in enumerate(s.values):
            if v is not None:
                present[index].add(sig)
    if op == "or":
        extra = [
            Series(
                s.labels,
                [
                    v if v is not None and signature(s.labels, matching) not in present[i] else None
                    for i, v in enumerate(s.values)
                ],
            )
            for s in rhs
        ]
        return lhs + [s for s in extra if any(v is not None for v in s.values)]
    wanted = op == "and"
    out = []
    for s in lhs:
        sig = signature(s.labels, matching)
        values = [
            v if v is not None and (sig in present[i]) == wanted else None
            for i, v in enumerate(s.values)
        ]
        if any(v is not None for v in values):
            out.append(Series(s.labels, values))
    return out
