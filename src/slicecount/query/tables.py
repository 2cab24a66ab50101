"""The read slices as arrays: the counts of every stored series a query reads (one int64 row
each), and the tables its selectors read, a derived series (a histogram's cumulative bucket)
being the sum of its stored parts. Pure.

The Reader hands the counts per series id as lists (None: a slice with no field), as an
int64 array per id, or as one 2-D array with the row of each id (``Slices``): all three
become the same rows here, so the storage may change how it reads without the engine
knowing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple, TypeVar

from slicecount.core.memo import remembered
from slicecount.errors import extra_imports
from slicecount.promql.arrays import Floats, Ints, Table
from slicecount.promql.values import Labels
from slicecount.query.catalogue import Derived
from slicecount.reads.chunks import Read, Slices, row_index

with extra_imports("datasource", "the datasource"):
    import numpy as np


K = TypeVar("K")
EXACT = 2.0**53
"""Counts below this convert through float64 exactly."""


class Rows(NamedTuple):
    """The counts of the series a query reads (``counts[row_of[id]]``) and how many slices
    each holds (a series read short has no sample past its end)."""

    row_of: dict[str, int]
    counts: Ints
    sizes: Ints


def rows(read: Read, ids: Sequence[str], slices: int) -> Rows:
    """The counts of ``ids`` (zeros for a series or a slice never counted)."""
    index = row_index(ids)
    if isinstance(read, Slices):
        return _of_slices(read, index, slices)
    found = [read.get(i) for i in ids]
    if slices and all(row is not None and len(row) == slices for row in found):
        whole = _whole(found, slices)  # every series read in full: the usual case
        if whole is not None:
            return Rows(index, whole, np.full(len(ids), slices, dtype=np.int64))
    counts = np.zeros((len(ids), slices), dtype=np.int64)
    sizes = np.full(len(ids), slices, dtype=np.int64)
    for n, row in enumerate(found):
        if row is None or not len(row):
            continue  # never read, or nothing counted: zeros
        if not isinstance(row, np.ndarray) and None in row:
            row = [c or 0 for c in row]  # slices with no field
        size = min(len(row), slices)
        counts[n, :size] = row[:size]  # type: ignore[assignment]  # ints, None gone
        sizes[n] = size
    return Rows(index, counts, sizes)


def _of_slices(read: Slices, index: dict[str, int], slices: int) -> Rows:
    where = remembered(
        "where", [read.row, index], lambda: np.array([read.row.get(i, -1) for i in index])
    )
    width = read.counts.shape[1] if read.counts.ndim == 2 else 0
    if width == slices and len(where) == len(read.counts):
        if np.array_equal(where, np.arange(len(where))):  # the read's own rows: no copy
            return Rows(index, read.counts, np.full(len(index), slices, dtype=np.int64))
    counts = np.zeros((len(index), slices), dtype=np.int64)
    some = where >= 0
    if width and some.any():
        counts[some, : min(width, slices)] = read.counts[where[some], :slices]
    sizes = np.full(len(index), min(width, slices) if width else slices, dtype=np.int64)
    sizes[~some] = slices
    return Rows(index, counts, sizes)


def _whole(found: list[Sequence[int | None] | Ints | None], slices: int) -> Ints | None:
    """The rows as one array, converted in C; None when a count is too large to convert
    exactly. A slice with no field (None) goes through float64 (NaN, then 0)."""
    try:  # no None: every slice counted (a busy series), the usual case
        return np.array(found, dtype=np.int64).reshape(len(found), slices)
    except OverflowError:
        return None
    except TypeError:
        pass
    table = np.array(found, dtype=np.float64).reshape(len(found), slices)
    np.nan_to_num(table, copy=False, nan=0.0)
    if np.abs(table).max(initial=0.0) >= EXACT:
        return None
    return table.astype(np.int64)


def tables(found: Mapping[K, Sequence[Derived]], read: Rows) -> dict[K, Table]:
    """Each selector's table: one row per derived series, the sum of its parts' counts."""
    slices = read.counts.shape[1]
    if all(_single(derived) for derived in found.values()):  # counters: a row each
        return {
            s: _table(d, read.counts, read.sizes, _rows_of(d, read.row_of))
            for s, d in found.items()
        }
    lists = list(found.values())  # the discovery cache's lists: the same at every request
    trie = remembered("prefixes", lists, lambda: _Prefixes(lists))
    parts = np.array([read.row_of[part] for part in trie.parts], dtype=np.int64)
    every = np.zeros((trie.nodes, slices), dtype=np.int64)
    sizes = np.full(trie.nodes, slices, dtype=np.int64)
    every[: len(parts)], sizes[: len(parts)] = read.counts[parts], read.sizes[parts]
    for target, below, last in trie.levels:
        every[target] = np.take(every, below, axis=0) + np.take(every, last, axis=0)
        sizes[target] = np.minimum(sizes[below], sizes[last])
    return {
        s: _table(d, every, sizes, at)
        for (s, d), at in zip(found.items(), trie.node_of, strict=True)
    }


class _Prefixes:
    """How the derived series of some selectors are made of stored ones. A histogram's
    cumulative buckets are the prefixes of one list of parts, so each is the one below plus
    one series: every distinct prefix is made once (a trie of them), a prefix length at a
    time, each length one array addition for every label set. Nodes: the parts, then a zero
    (a bucket below every stored one), then the prefixes. It depends on the derived series
    alone, so it is remembered with them (``core.memo``): a dashboard's histograms are
    walked once, not at every refresh."""

    def __init__(self, found: list[Sequence[Derived]]) -> None:
        part_at: dict[str, int] = {}
        for derived in found:
            for d in derived:
                for part in d.parts:
                    part_at.setdefault(part, len(part_at))
        zero = len(part_at)
        made: dict[tuple[int, str], int] = {}  # (node of a prefix, next part) -> node
        levels: list[list[tuple[int, int, int]]] = []  # per length: (node, below, part)
        self.node_of: list[list[int]] = []  # per selector: each derived series' node
        for derived in found:
            at: list[int] = []
            for d in derived:
                node = part_at[d.parts[0]] if d.parts else zero
                for depth, part in enumerate(d.parts[1:]):
                    below, node = node, made.get((node, part), -1)
                    if node < 0:
                        node = made[below, part] = zero + 1 + len(made)
                        if depth == len(levels):
                            levels.append([])
                        levels[depth].append((node, below, part_at[part]))
                at.append(node)
            self.node_of.append(at)
        self.parts = list(part_at)
        self.nodes = zero + 1 + len(made)
        self.levels = [np.array(level, dtype=np.int64).T for level in levels]


def _single(derived: Sequence[Derived]) -> bool:
    """Whether every derived series is one stored series (counters, not buckets)."""
    return remembered("single", [derived], lambda: all(len(d.parts) == 1 for d in derived))


def _rows_of(derived: Sequence[Derived], row_of: dict[str, int]) -> Ints:
    """The row of each derived series' one part (both remembered lists: the same at every
    request of a dashboard, so this is worked out once)."""
    return remembered(
        "rows of",
        [derived, row_of],
        lambda: np.array([row_of[d.parts[0]] for d in derived], dtype=np.int64),
    )


def _table(derived: Sequence[Derived], every: Ints, sizes: Ints, rows: Ints | list[int]) -> Table:
    picked = np.asarray(rows, dtype=np.int64)
    labels, scales = remembered("labels", [derived], lambda: _labels(derived))
    table = Table.of_counts(labels, np.take(every, picked, axis=0), scales)
    table.sizes = np.minimum(table.sizes, sizes[picked] + 1)
    return table


def _labels(derived: Sequence[Derived]) -> tuple[list[Labels], Floats]:
    """The label sets of the derived series (one list at every request: what is worked out
    from them is remembered with it) and their scales."""
    return [d.labels for d in derived], np.array([d.scale for d in derived], dtype=np.float64)


class Tables(Mapping[K, Table]):
    """Each selector's table, built when the engine first asks for it (not at all for a
    selector under an aggregation that came ready)."""

    def __init__(self, found: Mapping[K, Sequence[Derived]], read: Rows) -> None:
        self.found, self.read = found, read
        self.built: dict[K, Table] = {}

    def __getitem__(self, selector: K) -> Table:
        built = self.built.get(selector)
        if built is None:
            built = self.built[selector] = tables({selector: self.found[selector]}, self.read)[
                selector
            ]
        return built

    def __iter__(self) -> Iterator[K]:
        return iter(self.found)

    def __len__(self) -> int:
        return len(self.found)
