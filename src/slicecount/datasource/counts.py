"""The read slices as arrays: the counts of every stored series a query reads (one int64 row
each), and the tables its selectors read, a derived series (a histogram's cumulative bucket)
being the sum of its stored parts. Pure.

The Reader hands the counts per series id as lists (None: a slice with no field), as an
int64 array per id, or as one 2-D array with the row of each id (``Slices``): all three
become the same rows here, so the storage may change how it reads without the engine
knowing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, TypeVar

from slicecount.datasource.prometheus.names import Derived
from slicecount.promql.arrays import Ints, Table

try:
    import numpy as np
except ModuleNotFoundError as exc:  # pragma: no cover - the engine's import says it first
    from slicecount.errors import MissingExtra

    raise MissingExtra("datasource", exc, "the datasource") from exc


K = TypeVar("K")


class Slices(NamedTuple):
    """Counts read as one array: ``counts[row[id]]`` holds the slices of series ``id``."""

    row: Mapping[str, int]
    counts: Ints


Read = Mapping[str, Sequence[int | None] | Ints] | Slices
"""What one read of slices gives: per series id, its count per slice."""


class Rows(NamedTuple):
    """The counts of the series a query reads (``counts[row_of[id]]``) and how many slices
    each holds (a series read short has no sample past its end)."""

    row_of: dict[str, int]
    counts: Ints
    sizes: Ints


def rows(read: Read, ids: Sequence[str], slices: int) -> Rows:
    """The counts of ``ids`` (zeros for a series or a slice never counted)."""
    index = {i: n for n, i in enumerate(ids)}
    if isinstance(read, Slices):
        found = [read.row.get(i, -1) for i in ids]
        where = np.array(found, dtype=np.int64)
        width = read.counts.shape[1] if read.counts.ndim == 2 else 0
        counts = np.zeros((len(ids), slices), dtype=np.int64)
        some = where >= 0
        if width and some.any():
            counts[some, : min(width, slices)] = read.counts[where[some], :slices]
        sizes = np.full(len(ids), min(width, slices) if width else slices, dtype=np.int64)
        sizes[~some] = slices
        return Rows(index, counts, sizes)
    counts = np.zeros((len(ids), slices), dtype=np.int64)
    sizes = np.full(len(ids), slices, dtype=np.int64)
    for n, i in enumerate(ids):
        row = read.get(i)
        if row is None or not len(row):
            continue  # never read, or nothing counted: zeros
        if not isinstance(row, np.ndarray) and None in row:
            row = [c or 0 for c in row]  # slices with no field
        size = min(len(row), slices)
        counts[n, :size] = row[:size]  # type: ignore[assignment]  # ints, None gone
        sizes[n] = size
    return Rows(index, counts, sizes)


def tables(found: Mapping[K, Sequence[Derived]], read: Rows) -> dict[K, Table]:
    """Each selector's table: one row per derived series, the sum of its parts' counts.

    A histogram's cumulative buckets are the prefixes of one list of parts, so each is the
    one below plus one series: the sums are made a prefix length at a time, each length one
    array addition for every label set."""
    levels: dict[int, dict[tuple[str, ...], None]] = {}
    for derived in found.values():
        for d in derived:
            for length in range(2, len(d.parts) + 1):
                levels.setdefault(length, {})[d.parts[:length]] = None
    stored, slices = read.counts.shape
    made: dict[tuple[str, ...], int] = {(): stored}  # a bucket below every stored one: zero
    every = np.zeros((stored + 1 + sum(map(len, levels.values())), slices), dtype=np.int64)
    sizes = np.full(every.shape[0], slices, dtype=np.int64)
    every[:stored], sizes[:stored] = read.counts, read.sizes
    total = stored + 1
    for length in sorted(levels):
        level = list(levels[length])
        below = np.array([_row(p[:-1], made, read.row_of) for p in level], dtype=np.int64)
        last = np.array([read.row_of[p[-1]] for p in level], dtype=np.int64)
        np.add(every[below], every[last], out=every[total : total + len(level)])
        sizes[total : total + len(level)] = np.minimum(sizes[below], sizes[last])
        made.update(zip(level, range(total, total + len(level)), strict=True))
        total += len(level)
    out: dict[K, Table] = {}
    for selector, derived in found.items():
        at = np.array([_row(d.parts, made, read.row_of) for d in derived], dtype=np.int64)
        scales = np.array([d.scale for d in derived], dtype=np.float64)
        table = Table.of_counts([d.labels for d in derived], every[at], scales)
        table.sizes = np.minimum(table.sizes, sizes[at] + 1)
        out[selector] = table
    return out


def _row(parts: tuple[str, ...], made: Mapping[tuple[str, ...], int],
         index: Mapping[str, int]) -> int:  # fmt: skip
    return index[parts[0]] if len(parts) == 1 else made[parts]  # () too: the zero row
