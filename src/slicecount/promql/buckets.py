"""``histogram_quantile`` on arrays: Prometheus' estimate from cumulative ``le`` buckets
(promql/quantile.go's bucketQuantile), for every label set and time at once. Pure.

Label sets whose buckets have the same bounds are computed together (a histogram's usually
all do); a time where only some of a label set's buckets have a sample, or a bound that is
NaN, takes ``functions.bucket_quantile``'s loop, which the array code follows step for step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from slicecount.core.memo import remembered
from slicecount.errors import extra_imports
from slicecount.promql.arrays import Block, Floats, Ints, Mask, check_unique
from slicecount.promql.ast import NAME_LABEL
from slicecount.promql.functions import LE, bucket_quantile
from slicecount.promql.values import Labels, key

with extra_imports("datasource", "the PromQL engine of the datasource"):
    import numpy as np

Layout = tuple[float, ...]
"""A label set's bucket bounds, sorted (with repeats: equal bounds are added together)."""


def histogram_quantile(qs: list[float], buckets: Block) -> Block:
    """The q-quantile (q per time) of each label set without ``le`` (the name included: two
    histograms differing only by name fail, as in Prometheus)."""
    sets = remembered("histograms", buckets.labels, lambda: _Histograms(buckets.labels))
    steps = buckets.steps
    values = np.zeros((len(sets.labels), steps))
    present = np.zeros((len(sets.labels), steps), dtype=bool)
    q = np.array(qs, dtype=np.float64)
    for group in sets.unordered:  # a NaN bound: no order, the loop's on the rows' one
        _by_loop(q, buckets, sets.members[group], values[group], present[group])
    for layout, groups, rows in sets.layouts:
        whole = buckets.present[rows].all(axis=1)  # (groups, steps)
        some = buckets.present[rows].any(axis=1)
        estimates = _quantiles(q, layout, buckets.values[rows])
        values[groups] = np.where(whole, estimates, 0.0)
        present[groups] = some
        for i, t in np.argwhere(some & ~whole).tolist():
            pairs = [
                (b, buckets.values[row, t])
                for b, row in sets.members[groups[i]]
                if buckets.present[row, t]
            ]
            values[groups[i], t] = bucket_quantile(qs[t], [(b, float(c)) for b, c in pairs])
    return check_unique(Block(list(sets.labels), values, present))


class _Histograms:
    """The label sets of some buckets (each without ``le`` and the name), each set's
    (bound, row) sorted by bound, and the sets grouped by their bounds. It depends on the
    labels alone, so it is remembered with them (``core.memo``)."""

    def __init__(self, found: Sequence[Labels]) -> None:
        index: dict[tuple[tuple[str, str], ...], int] = {}
        self.labels: list[Labels] = []
        self.members: list[list[tuple[float, int]]] = []
        for row, one in enumerate(found):
            try:
                bound = float(one.get(LE, ""))
            except ValueError:
                continue  # no or bad le label: not a bucket, skipped as Prometheus does
            signature = key({k: v for k, v in one.items() if k != LE})
            group = index.setdefault(signature, len(index))
            if group == len(self.labels):
                self.labels.append({k: v for k, v in one.items() if k not in (LE, NAME_LABEL)})
                self.members.append([])
            self.members[group].append((bound, row))
        self.unordered: list[int] = []
        by_layout: dict[Layout, list[int]] = {}
        for group, bounds in enumerate(self.members):
            if any(math.isnan(b) for b, _ in bounds):
                self.unordered.append(group)
                continue
            bounds.sort(key=lambda b: b[0])  # stable: equal bounds keep their order
            by_layout.setdefault(tuple(b for b, _ in bounds), []).append(group)
        self.layouts: list[tuple[Layout, list[int], Ints]] = [
            (
                layout,
                groups,
                np.array([[row for _, row in self.members[g]] for g in groups], dtype=np.int64),
            )
            for layout, groups in by_layout.items()
        ]


def _by_loop(
    q: Floats, buckets: Block, bounds: list[tuple[float, int]], out: Floats, present: Mask
) -> None:
    for t in range(buckets.steps):
        pairs = [(b, float(buckets.values[row, t])) for b, row in bounds if buckets.present[row, t]]
        if pairs:
            out[t] = bucket_quantile(float(q[t]), pairs)
            present[t] = True


def _quantiles(q: Floats, layout: Layout, counts: Floats) -> Floats:
    """bucketQuantile of groups x buckets x times counts (buckets sorted as ``layout``)."""
    bounds, coalesced = _coalesce(layout, counts)
    size = len(bounds)
    highest = np.full((coalesced.shape[0], coalesced.shape[2]), -np.inf)
    for i in range(size):  # ensure monotonic counts (a NaN count keeps the highest so far)
        column = coalesced[:, i, :]
        highest = np.where(column > highest, column, highest)
        coalesced[:, i, :] = highest
    shape = highest.shape
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if size < 2 or not math.isinf(bounds[-1]) or bounds[-1] < 0:
            out = np.full(shape, np.nan)
        else:
            out = _interpolate(q, np.array(bounds), coalesced)
        out = np.where(q > 1, np.inf, out)
        out = np.where(q < 0, -np.inf, out)
        return np.where(np.isnan(q), np.nan, out)


def _coalesce(layout: Layout, counts: Floats) -> tuple[list[float], Floats]:
    """Buckets with equal bounds added together, left to right."""
    bounds: list[float] = []
    sources: list[list[int]] = []
    for i, bound in enumerate(layout):
        if bounds and bounds[-1] == bound:
            sources[-1].append(i)
        else:
            bounds.append(bound)
            sources.append([i])
    if len(bounds) == len(layout):
        return bounds, counts.copy()
    out = np.empty((counts.shape[0], len(bounds), counts.shape[2]))
    with np.errstate(invalid="ignore", over="ignore"):
        for j, rows in enumerate(sources):
            total = counts[:, rows[0], :]
            for r in rows[1:]:
                total = total + counts[:, r, :]
            out[:, j, :] = total
    return bounds, out


def _interpolate(q: Floats, bounds: Floats, cumulative: Floats) -> Floats:
    """The estimate within the bucket the rank falls in (linear, from the bound below)."""
    size = len(bounds)
    observations = cumulative[:, -1, :]
    rank = q[None, :] * observations
    reached = cumulative >= rank[:, None, :]
    reached[:, -1, :] = True
    b: Ints = np.argmax(reached, axis=1)  # the first bucket holding the rank
    below = np.maximum(b - 1, 0)
    at_b = np.take_along_axis(cumulative, b[:, None, :], axis=1)[:, 0, :]
    at_below = np.take_along_axis(cumulative, below[:, None, :], axis=1)[:, 0, :]
    start = np.where(b > 0, bounds[below], 0.0)
    end = bounds[b]
    count = np.where(b > 0, at_b - at_below, at_b)
    rank = np.where(b > 0, rank - at_below, rank)
    out = start + (end - start) * (rank / count)
    out = np.where((b == 0) & (bounds[0] <= 0), bounds[0], out)
    out = np.where(b == size - 1, bounds[size - 2], out)
    return np.where(observations == 0, np.nan, out)
