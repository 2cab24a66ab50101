"""The selectors' and range functions' kernels on arrays: ``increase``, ``rate``,
``*_over_time`` ... of every series and window ``(t - d, t]`` at once, from the running totals
at the slice boundaries (a window's increase is a difference of two totals: exact, never
extrapolated; a sum of totals over a window a difference of their cumulative sums). Pure.

The evaluator (``engine``) picks each evaluation time's boundary or window; here every series
(a row of the ``Table``) is computed for all of them in a few array operations. Exact counts
(int64) stay integers until a value is scaled or divided; float totals (a test's gauges) are
summed left to right as Python's ``sum`` (``avg_over_time`` as ``fsum``), so answers are those
of a loop over the windows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import cast

from slicecount.errors import extra_imports
from slicecount.promql.arrays import Block, Floats, Ints, Mask, Table, rounded, two_sum
from slicecount.promql.values import Grid, Labels

with extra_imports("datasource", "the PromQL engine of the datasource"):
    import numpy as np

Kernel = Callable[[Table, Ints, Ints, int, int], Floats]
"""(table, each window's start and end index, span, precision) -> n x windows values."""


def columns(totals: Ints | Floats, at: Ints) -> Ints | Floats:
    """``totals[:, at]``: a view where ``at`` moves by an even step (a range query's times),
    else ``np.take``. numpy's fancy indexing of columns took 5-6 times as long, and a 24-hour
    panel's windows gather 720 columns of thousands of rows."""
    if len(at) > 1:
        step = int(at[1] - at[0])
        if step > 0 and bool((np.diff(at) == step).all()):
            return totals[:, int(at[0]) : int(at[-1]) + 1 : step]
    return cast("Ints | Floats", np.take(totals, at, axis=1))


def instant(table: Table, reads: Ints, valid: Mask, labels: list[Labels]) -> Block:
    """Each series' running total at the boundary index each time reads (``valid``: a time
    that reads one)."""
    width = table.totals.shape[1]
    at = np.where(valid, reads, 0)
    present = valid[None, :] & (at[None, :] < table.sizes[:, None])
    if not width:
        return Block(labels, np.zeros(present.shape), present)
    with np.errstate(over="ignore"):
        values = columns(table.totals, np.minimum(at, width - 1)) * table.scales[:, None]
    return Block(labels, _zero_absent(values, present), present)


def over_windows(
    table: Table, kernel: Kernel, starts: Ints, ends: Ints, valid: Mask, span: int, p: int
) -> tuple[Floats, Mask]:
    """A kernel's values of every series at every time (``valid``: a time with a window;
    a window ending past what a series holds has no sample)."""
    b, a = np.where(valid, starts, 0), np.where(valid, ends, 0)
    present = valid[None, :] & (a[None, :] < table.sizes[:, None])
    last = table.totals.shape[1] - 1
    if last < 0:  # nothing read
        return np.zeros(present.shape), present
    a = np.minimum(a, last)  # past every row's totals: absent, any index will do
    b = np.minimum(b, a - 1)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        values = kernel(table, b, a, span, p)
    return _zero_absent(values, present), present


def _zero_absent(values: Floats, present: Mask) -> Floats:
    if present.all():
        return values
    return np.where(present, values, 0.0)


def _differences(t: Table, b: Ints, a: Ints) -> Floats:
    """``total[end] - total[start]`` of each window, as floats (exact integers first)."""
    return (columns(t.totals, a) - columns(t.totals, b)).astype(np.float64)


def _scaled(t: Table, values: Floats) -> Floats:
    return values * t.scales[:, None]


def _increase(t: Table, b: Ints, a: Ints, span: int, p: int) -> Floats:
    return _scaled(t, _differences(t, b, a))


def _rate(t: Table, b: Ints, a: Ints, span: int, p: int) -> Floats:
    return _scaled(t, _differences(t, b, a)) / span


def elapsed_rate(grid: Grid) -> Kernel:
    """``rate`` over windows of a point's slices, each divided by the seconds it has lasted:
    a window holding now has lasted since its start (at least a second), not its span."""
    first, now = grid.first, grid.now

    def rate(t: Table, b: Ints, a: Ints, span: int, p: int) -> Floats:
        ends = np.minimum(now, first + a.astype(np.float64) * p)
        lasted = np.maximum(ends - (first + b.astype(np.float64) * p), 1.0)
        return _scaled(t, _differences(t, b, a)) / lasted[None, :]

    return rate


def _irate(t: Table, b: Ints, a: Ints, span: int, p: int) -> Floats:
    return _scaled(t, _differences(t, a - 1, a)) / p  # the last slice


def _samples(t: Table, b: Ints, a: Ints, fold: Callable[[Floats, Floats], Floats]) -> Floats:
    """``fold`` of the totals at the boundaries inside each window (one sample per slice),
    left to right: the first sample, then each next one where the window still holds it."""
    out = columns(t.totals, b + 1).astype(np.float64)
    for offset in range(2, int((a - b).max(initial=0)) + 1):
        inside = b + offset <= a
        x = columns(t.totals, np.where(inside, b + offset, a)).astype(np.float64)
        out = np.where(inside[None, :], fold(out, x), out)
    return out


def _window_sums(t: Table, b: Ints, a: Ints) -> Floats:
    """The sum of the totals inside each window (unscaled)."""
    if t.exact:  # a difference of cumulative sums of the totals: exact integers
        sums = np.zeros((t.totals.shape[0], t.totals.shape[1] + 1), dtype=np.int64)
        np.cumsum(t.totals, axis=1, out=sums[:, 1:])
        return (columns(sums, a + 1) - columns(sums, b + 1)).astype(np.float64)
    return 0.0 + _samples(t, b, a, np.add)  # Python's sum starts from 0


def _sum_over_time(t: Table, b: Ints, a: Ints, span: int, p: int) -> Floats:
    return _scaled(t, _window_sums(t, b, a))


def _avg_over_time(t: Table, b: Ints, a: Ints, span: int, p: int) -> Floats:
    count = (a - b).astype(np.float64)
    if t.exact:  # fsum of integers: their exact sum
        return _scaled(t, _window_sums(t, b, a) / count)
    total = columns(t.totals, b + 1).astype(np.float64)
    error, slack = np.zeros_like(total), np.zeros_like(total)
    for offset in range(2, int((a - b).max(initial=0)) + 1):  # two-sum: fsum's exact sum
        inside = b + offset <= a
        x = np.where(inside[None, :], columns(t.totals, np.where(inside, b + offset, a)), 0.0)
        total, lost = two_sum(total, x)
        error, missed = two_sum(error, lost)
        slack += np.abs(missed)
    sums, doubt = rounded(total, error, slack)
    for row, column in np.argwhere(doubt).tolist():  # near a rounding midpoint: fsum itself
        window = t.totals[row, b[column] + 1 : a[column] + 1].tolist()
        sums[row, column] = math.fsum(window)
    return _scaled(t, sums / count)


def _greater(out: Floats, x: Floats) -> Floats:
    return np.where(x > out, x, out)  # Python's max: a NaN first stays, a NaN later is skipped


def _less(out: Floats, x: Floats) -> Floats:
    return np.where(x < out, x, out)


KERNELS: dict[str, Kernel] = {
    "increase": _increase,
    "rate": _rate,
    "irate": _irate,
    "sum_over_time": _sum_over_time,
    "avg_over_time": _avg_over_time,
    "max_over_time": lambda t, b, a, span, p: _scaled(t, _samples(t, b, a, _greater)),
    "min_over_time": lambda t, b, a, span, p: _scaled(t, _samples(t, b, a, _less)),
    "count_over_time": lambda t, b, a, span, p: np.broadcast_to(
        (a - b).astype(np.float64), (t.totals.shape[0], len(a))
    ).copy(),
    "last_over_time": lambda t, b, a, span, p: _scaled(t, columns(t.totals, a).astype(np.float64)),
}
