"""The engine's data model on arrays (numpy): what a selector reads (``Table``: running totals
of n series at the slice boundaries, one row each) and what a vector node yields (``Block``:
n series x T evaluation times, values and a presence mask, since Prometheus tells "no
sample" from NaN). Pure.

Counts stay integers (int64) until PromQL yields floats: a running total, an increase and a
sum of counts are exact. ``Block`` is also a sequence of ``Series`` (built on access), so
code written for lists of series reads it unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from slicecount.core.memo import remembered
from slicecount.errors import extra_imports
from slicecount.promql.values import (
    EvaluationError,
    Labels,
    Raw,
    Series,
    Value,
    format_labels,
    remembered_key,
)

with extra_imports("datasource", "the PromQL engine of the datasource"):
    import numpy as np
    import numpy.typing as npt

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


class Block(Sequence[Series]):
    """A vector on the grid: ``labels`` of n series, ``values`` (n x T float64) and
    ``present`` (n x T bool: a sample at that time). Values where absent mean nothing."""

    __slots__ = ("labels", "present", "values")

    def __init__(self, labels: list[Labels], values: Floats, present: Mask) -> None:
        self.labels = labels
        self.values = values
        self.present = present

    @classmethod
    def empty(cls, steps: int) -> Block:
        return cls([], np.zeros((0, steps)), np.zeros((0, steps), dtype=bool))

    @classmethod
    def of(cls, series: Sequence[Series], steps: int) -> Block:
        """The block of series given as lists (None: no sample)."""
        if isinstance(series, Block):
            return series
        if not series:
            return cls.empty(steps)
        rows = [[0.0 if v is None else v for v in s.values] for s in series]
        present = [[v is not None for v in s.values] for s in series]
        return cls(
            [s.labels for s in series],
            np.array(rows, dtype=np.float64),
            np.array(present, dtype=bool),
        )

    @property
    def steps(self) -> int:
        return int(self.values.shape[1])

    def row(self, index: int) -> list[Value]:
        """The values of one series as a list, None where it has no sample."""
        values: list[Value] = self.values[index].tolist()
        mask = self.present[index]
        if mask.all():
            return values
        return [v if m else None for v, m in zip(values, mask.tolist(), strict=True)]

    def gaps(self) -> Floats:
        """The values with NaN where there is no sample (a graph draws both as a gap)."""
        return self.values if self.present.all() else np.where(self.present, self.values, np.nan)

    def series(self) -> list[Series]:
        return [Series(labels, self.row(i)) for i, labels in enumerate(self.labels)]

    def take(self, rows: Sequence[int] | Ints, labels: list[Labels] | None = None) -> Block:
        index = np.asarray(rows, dtype=np.int64)
        found = labels if labels is not None else [self.labels[i] for i in index.tolist()]
        return Block(found, self.values[index], self.present[index])

    def __len__(self) -> int:
        return len(self.labels)

    @overload
    def __getitem__(self, index: int) -> Series: ...
    @overload
    def __getitem__(self, index: slice) -> list[Series]: ...
    def __getitem__(self, index: int | slice) -> Series | list[Series]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        return Series(self.labels[index], self.row(index))

    def __iter__(self) -> Iterator[Series]:
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"Block({self.series()!r})"


def concat(blocks: Sequence[Block], steps: int) -> Block:
    found = [b for b in blocks if len(b)]
    if len(found) <= 1:
        return found[0] if found else Block.empty(steps)
    labels = [labels for b in found for labels in b.labels]
    values = np.concatenate([b.values for b in found])
    return Block(labels, values, np.concatenate([b.present for b in found]))


def _all_unique(labels: Sequence[Labels]) -> bool:
    return len({remembered_key(one) for one in labels}) == len(labels)


def check_unique(block: Block) -> Block:
    """Prometheus refuses a vector holding two samples with the same labels at one time;
    series with the same labels that never overlap become one."""
    if remembered("unique", block.labels, lambda: _all_unique(block.labels)):
        return block  # the usual case: nothing to merge
    keys = [remembered_key(labels) for labels in block.labels]
    first: dict[tuple[tuple[str, str], ...], int] = {}
    rows = [first.setdefault(k, i) for i, k in enumerate(keys)]
    kept = list(first.values())
    values, present = block.values[kept].copy(), block.present[kept].copy()
    at = {row: i for i, row in enumerate(kept)}
    for i, row in enumerate(rows):
        if row == i:
            continue
        target = at[row]
        if (present[target] & block.present[i]).any():
            raise EvaluationError(
                "vector cannot contain metrics with the same labelset "
                + format_labels(block.labels[i])
            )
        values[target] = np.where(block.present[i], block.values[i], values[target])
        present[target] |= block.present[i]
    return Block([block.labels[i] for i in kept], values, present)


class Table:
    """The stored series one selector reads: ``totals`` (n x L, int64 when exact counts,
    float64 otherwise) at the boundaries from ``Grid.first``; a row holds ``sizes[i]``
    boundaries (the rest is padding); ``scales`` turns micro-units into base units."""

    __slots__ = ("labels", "scales", "sizes", "totals")

    def __init__(
        self, labels: list[Labels], totals: Ints | Floats, sizes: Ints, scales: Floats
    ) -> None:
        self.labels = labels
        self.totals = totals
        self.sizes = sizes
        self.scales = scales

    @property
    def exact(self) -> bool:
        return bool(self.totals.dtype == np.int64)

    @classmethod
    def of_raws(cls, raws: Sequence[Raw]) -> Table:
        """The table of series given one by one (totals or slice counts as lists)."""
        rows = [np.asarray(raw.totals) for raw in raws]
        sizes = np.array([len(r) for r in rows], dtype=np.int64)
        width = int(sizes.max()) if len(rows) else 0
        exact = all(r.dtype.kind in "iu" or (r.dtype.kind == "f" and not r.size) for r in rows)
        totals: Ints | Floats = (
            np.zeros((len(rows), width), dtype=np.int64) if exact else np.zeros((len(rows), width))
        )
        for i, r in enumerate(rows):
            totals[i, : len(r)] = r
        scales = np.array([raw.scale for raw in raws], dtype=np.float64)
        return cls([raw.labels for raw in raws], totals, sizes, scales)

    @classmethod
    def of_counts(cls, labels: list[Labels], counts: Ints, scales: Floats) -> Table:
        """The table of slice counts (n x slices): running totals from 0 at the first."""
        totals = np.empty((counts.shape[0], counts.shape[1] + 1), dtype=np.int64)
        totals[:, 0] = 0  # (not np.zeros: filling a fresh array cost more than the sums)
        np.cumsum(counts, axis=1, out=totals[:, 1:])
        sizes = np.full(counts.shape[0], counts.shape[1] + 1, dtype=np.int64)
        return cls(labels, totals, sizes, scales)


Sums = tuple[Floats, Mask]
"""Compensated sums, and where they may not be ``math.fsum``'s (to compute again)."""


def two_sum(a: Floats, b: Floats) -> tuple[Floats, Floats]:
    """``a + b`` and the error of that addition, exactly (Knuth)."""
    s = a + b
    back = s - a
    return s, (a - (s - back)) + (b - back)


def exact_sums(columns: Iterator[tuple[Ints, Floats]], shape: tuple[int, int]) -> Sums:
    """Sums of rows of values into ``shape``, each row added to the row its index names:
    compensated (the error of every addition kept, and the error of adding those up), so a
    sum of floats is what ``math.fsum`` gives, whatever the order (``rounded`` says where it
    may not be)."""
    total, error, slack = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    with np.errstate(invalid="ignore", over="ignore"):
        for rows, x in columns:
            total[rows], lost = two_sum(total[rows], x)
            error[rows], missed = two_sum(error[rows], lost)
            slack[rows] += np.abs(missed)
    return rounded(total, error, slack)


def pairwise_sums(values: Floats) -> Sums:
    """Sums along axis 1 of groups x members x times, compensated as ``exact_sums``, added
    pairwise: log2(members) array operations, not one per member. Two members need none:
    ``fsum`` of two floats is their rounded sum."""
    if values.shape[1] <= 2:
        with np.errstate(invalid="ignore", over="ignore"):
            plain = values.sum(axis=1) + 0.0  # -0 is 0, as fsum's
        return plain, np.zeros(plain.shape, dtype=bool)
    total = values
    error = slack = None
    with np.errstate(invalid="ignore", over="ignore"):
        while total.shape[1] > 1:
            if total.shape[1] % 2:
                pad = np.zeros((total.shape[0], 1, total.shape[2]))
                total = np.concatenate((total, pad), 1)
                if error is not None and slack is not None:
                    error, slack = np.concatenate((error, pad), 1), np.concatenate((slack, pad), 1)
            total, lost = two_sum(total[:, 0::2], total[:, 1::2])
            if error is None or slack is None:  # the first level: its errors are exact
                error, slack = lost, np.zeros_like(lost)
                continue
            error, missed = two_sum(error[:, 0::2], error[:, 1::2])
            error, missed_too = two_sum(error, lost)
            slack = slack[:, 0::2] + slack[:, 1::2] + np.abs(missed) + np.abs(missed_too)
    assert error is not None and slack is not None  # three members or more: two levels
    return rounded(total[:, 0], error[:, 0], slack[:, 0])


def rounded(total: Floats, error: Floats, slack: Floats) -> Sums:
    """``total + error`` (the plain sum where that is not finite: an overflow, infinities),
    and where that rounding may differ from the exact sum's: where adding up the errors was
    not exact (``slack`` bounds what it missed) and could carry the exact sum across a
    rounding midpoint. Where it was exact, ``total + error`` is the exact sum rounded once."""
    with np.errstate(invalid="ignore", over="ignore"):
        out = total + error
        rest = error - (out - total)  # what rounding out left over, exactly
        half = np.spacing(np.abs(out)) / 2
        finite = np.isfinite(total) & np.isfinite(out)
        doubt = finite & (slack > 0) & (half - np.abs(rest) <= 2 * slack)
    return np.where(finite, out, total), doubt
