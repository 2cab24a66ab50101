"""Operators value by value on arrays: a vector and a scalar, unary minus, and two vectors
matched one to one (each side's match groups unique, the usual ``a / b``). Pure.

Arithmetic is IEEE's, which is Go's (``x / 0`` is ±Inf, ``0 / 0`` NaN); what arrays do not
cover (``%`` and ``^``, many-to-one matching, series that collide) runs ``binary``'s loop on
the blocks' series.
"""

from __future__ import annotations

from collections.abc import Callable

from slicecount.errors import extra_imports
from slicecount.promql import binary
from slicecount.promql.arrays import Block, Floats, Mask, check_unique
from slicecount.promql.ast import Binary
from slicecount.promql.typecheck import COMPARISONS
from slicecount.promql.values import Labels, key, without_name

with extra_imports("datasource", "the PromQL engine of the datasource"):
    import numpy as np

ARITHMETIC: dict[str, Callable[[Floats, Floats], Floats]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.divide,
}
COMPARE = binary.COMPARE  # the same operators: on arrays they give a mask


def vectorised(op: str) -> bool:
    return op in ARITHMETIC or op in COMPARE


def negate(block: Block) -> Block:
    labels = [without_name(labels) for labels in block.labels]
    return check_unique(Block(labels, -block.values, block.present))


def _apply(
    op: str, left: Floats, right: Floats, mine: Floats, as_bool: bool, present: Mask
) -> tuple[Floats, Mask]:
    """(values, present) of ``left op right``; a comparison filters ``mine`` (or, with
    ``bool``, gives 1 or 0)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if op in COMPARE:
            holds: Mask = COMPARE[op](left, right)
            if as_bool:
                return holds.astype(np.float64), present
            return mine, present & holds
        return ARITHMETIC[op](left, right), present


def with_scalar(op: str, block: Block, number: list[float], swap: bool, as_bool: bool) -> Block:
    """A vector and a scalar (``swap``: the scalar is on the left). A comparison without
    ``bool`` filters and keeps the vector's value and name; anything else drops the name."""
    if not vectorised(op):
        return Block.of(binary.with_scalar(op, block.series(), number, swap, as_bool), block.steps)
    n = np.broadcast_to(np.array(number, dtype=np.float64)[None, :], block.values.shape)
    left, right = (n, block.values) if swap else (block.values, n)
    values, present = _apply(op, left, right, block.values, as_bool, block.present)
    comparison = op in COMPARE
    if comparison and not as_bool:
        return Block(block.labels, values, present)
    labels = [without_name(labels) for labels in block.labels]
    return check_unique(Block(labels, values, present))


def vectors(node: Binary, lhs: Block, rhs: Block) -> Block | None:
    """Two vectors matched one to one, when every match group is unique on each side and
    the results' labels too; None otherwise (the loop then decides, errors included)."""
    matching = node.matching
    if matching is None or matching.card != "one-to-one" or not vectorised(node.op):
        return None
    if matching.include:
        return None
    left_sigs = [binary.signature(labels, matching) for labels in lhs.labels]
    right_sigs = [binary.signature(labels, matching) for labels in rhs.labels]
    if len(set(left_sigs)) != len(left_sigs) or len(set(right_sigs)) != len(right_sigs):
        return None
    partner = {sig: i for i, sig in enumerate(right_sigs)}
    pairs = [(i, partner[sig]) for i, sig in enumerate(left_sigs) if sig in partner]
    labels: list[Labels] = [
        binary.result_labels(node, matching, lhs.labels[i], rhs.labels[j]) for i, j in pairs
    ]
    if len({key(found) for found in labels}) != len(labels):
        return None
    mine = np.array([i for i, _ in pairs], dtype=np.int64)
    theirs = np.array([j for _, j in pairs], dtype=np.int64)
    left, right = lhs.values[mine], rhs.values[theirs]
    both = lhs.present[mine] & rhs.present[theirs]
    values, present = _apply(node.op, left, right, left, node.bool, both)
    if node.op in COMPARISONS and not node.bool:
        values = left
    keep = present.any(axis=1)  # the loop makes a series only where a pair has a sample
    rows = np.flatnonzero(keep)
    return Block([labels[r] for r in rows.tolist()], values[rows], present[rows])
