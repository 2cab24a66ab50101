"""The range functions' kernels: ``increase``, ``rate``, ``*_over_time`` ... of every window
``(t - d, t]`` of a series, computed from its running totals at the slice boundaries (a window's
increase is a difference of two totals: exact, never extrapolated). Pure.

The evaluator (``engine``) picks the windows of each evaluation time; here they are computed
once per distinct window (``dedupe``, ``spread``) and, when they follow one another at a
constant stride, as differences of whole slices of the totals (``StridedWindows``).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import TypeVar

from slicecount.promql.values import Grid, Value

T = TypeVar("T")


def dedupe(items: Sequence[T | None]) -> tuple[list[T], list[int]]:
    """The distinct non-None items in order, and for each item its index among them (-1 for
    None): a value computed once per distinct item is spread back with ``spread``."""
    if None not in items and len(set(items)) == len(items):  # each time its own: in C
        return list(items), list(range(len(items)))  # type: ignore[arg-type]  # no None
    index: dict[T, int] = {}
    where = [-1 if item is None else index.setdefault(item, len(index)) for item in items]
    return list(index), where


def spread(found: list[Value], where: list[int]) -> list[Value]:
    """Each time's value from the distinct ones (-1: no sample)."""
    found.append(None)  # found[-1]
    return list(map(found.__getitem__, where))


Windows = Sequence[tuple[int, int]]
WindowFunction = Callable[[Sequence[int], Windows, int, int, float], list[float]]
"""(totals, each window's (start, end) index, span, precision, scale) -> a value per window."""


class StridedWindows(list[tuple[int, int]]):
    """Windows (start, end index) that know, when they follow one another at a constant
    stride (a range query's, a panel's), the slices of the totals holding their starts and
    their ends: the differences of every series are then taken in C, not pair by pair."""

    def __init__(self, windows: list[tuple[int, int]]) -> None:
        super().__init__(windows)
        self.bounds: tuple[slice, slice] | None = None
        self.each_slice = False  # one slice each, one after the other: the counts themselves
        if len(windows) > 1:
            (b, a), (b1, _) = windows[0], windows[1]
            stride, n = b1 - b, len(windows)
            if stride > 0:
                starts = range(b, b + n * stride, stride)
                ends = range(a, a + n * stride, stride)
                if list(zip(starts, ends, strict=True)) == windows:
                    self.bounds = slice(b, starts[-1] + 1, stride), slice(a, ends[-1] + 1, stride)
                    self.each_slice = stride == 1 and a - b == 1


def _differences(t: Sequence[int], ws: Windows) -> list[int]:
    """``t[end] - t[start]`` of each window."""
    bounds = ws.bounds if isinstance(ws, StridedWindows) else None
    if bounds is not None:
        return list(map(operator.sub, t[bounds[1]], t[bounds[0]]))
    return [t[a] - t[b] for b, a in ws]


def _sample_values(totals: Sequence[int], b: int, a: int) -> Sequence[int]:
    return totals[b + 1 : a + 1]  # the boundaries inside (t - d, t]: one sample per slice


def _increase(t: Sequence[int], ws: Windows, span: int, p: int, k: float) -> list[float]:
    if k == 1.0:  # counts stay ints: the simPod frames write them without a conversion
        return _differences(t, ws)  # type: ignore[return-value]  # ints are floats to mypy
    return [d * k for d in _differences(t, ws)]


def elapsed_rate(grid: Grid) -> WindowFunction:
    """``rate`` over windows of a point's slices, each divided by the seconds it has lasted:
    a window holding now has lasted since its start (at least a second), not its span."""
    first, now = grid.first, grid.now

    def rate(t: Sequence[int], ws: Windows, span: int, p: int, k: float) -> list[float]:
        return [
            d * k / max(min(now, first + a * p) - (first + b * p), 1.0)
            for d, (b, a) in zip(_differences(t, ws), ws, strict=True)
        ]

    return rate


WINDOW_FUNCTIONS: dict[str, WindowFunction] = {
    "increase": _increase,
    "rate": lambda t, ws, span, p, k: [d * k / span for d in _differences(t, ws)],
    "irate": lambda t, ws, span, p, k: [(t[a] - t[a - 1]) * k / p for b, a in ws],  # last slice
    "sum_over_time": lambda t, ws, span, p, k: [sum(_sample_values(t, b, a)) * k for b, a in ws],
    "avg_over_time": lambda t, ws, span, p, k: [
        math.fsum(_sample_values(t, b, a)) / (a - b) * k for b, a in ws
    ],
    "max_over_time": lambda t, ws, span, p, k: [max(_sample_values(t, b, a)) * k for b, a in ws],
    "min_over_time": lambda t, ws, span, p, k: [min(_sample_values(t, b, a)) * k for b, a in ws],
    "count_over_time": lambda t, ws, span, p, k: [float(a - b) for b, a in ws],
    "last_over_time": lambda t, ws, span, p, k: [t[a] * k for b, a in ws],
}
