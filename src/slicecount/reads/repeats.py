"""Answers remembered with the counts they were computed from, for the same query asked
again. Pure.

A live dashboard asks the same queries again and again: Grafana aligns a range query's start
and end to its step, so every refresh within a step (and every viewer's) sends the very same
expression over the very same times, and the next step's refresh the same times moved by a
step. Each request still discovers and reads as if alone (never a count older than it); only
then is the last answer of its expression looked up (``query/repeated.py`` says under what,
and what may be taken from it), with the counts it was computed from: taken whole when the
very same series were read over the very same slices with equal counts, value for value;
else the times both ask that read only slices holding equal counts in both (the times moved
on by a step, a late second arrived after the last refresh). An answer computed from the same
inputs is the same answer, so what is taken is exactly what computing would have given; only
the work is saved.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from slicecount.errors import extra_imports
from slicecount.promql.arrays import Ints

with extra_imports("datasource", "the datasource"):
    import numpy as np


@dataclass(frozen=True)
class Inputs:
    """What an answer is computed from: the series each selector matched (the discovery
    cache's lists, the same at every request until discovery finds another series), the ids
    read (a list never changed once planned), and their counts and sizes."""

    found: tuple[object, ...]
    ids: Sequence[str]
    counts: Ints
    sizes: Ints

    def same(self, other: Inputs) -> bool:
        return self._same_series(other) and (
            np.array_equal(self.sizes, other.sizes) and np.array_equal(self.counts, other.counts)
        )

    def equal_from(self, other: Inputs, columns: int) -> int | None:
        """How many of ``other``'s first slices hold what these hold from slice ``columns``
        on (``other`` read from that slice on), for every series; None when ``other`` did not
        read the same series, or a row of either is not whole."""
        width = self.counts.shape[1]
        if not (0 <= columns < width and self._same_series(other)):
            return None
        if not (np.all(self.sizes == width) and np.all(other.sizes == other.counts.shape[1])):
            return None
        both = min(width - columns, other.counts.shape[1])
        differ = self.counts[:, columns : columns + both] != other.counts[:, :both]
        first = np.flatnonzero(differ.any(axis=0))
        return int(first[0]) if first.size else both

    def _same_series(self, other: Inputs) -> bool:
        """The same series matched, the same ids read. A list made again from a discovery
        answer that changed elsewhere (a series of another metric: the catalogue is made
        anew, and with it every selector's list) is compared by value."""
        return (
            len(self.found) == len(other.found)
            and all(a is b or a == b for a, b in zip(self.found, other.found, strict=True))
            and self.ids == other.ids
        )


class Remembered:
    """A remembered answer: ``place`` (where it was computed: the caller's key of its times
    and slices), its inputs, the points computing it cost, and its encodings (``size``: their
    bytes; the counts' are held once for the answers that share them)."""

    __slots__ = ("answer", "cost", "encoded", "inputs", "place", "size")

    def __init__(self, place: Hashable, inputs: Inputs, answer: object, cost: int) -> None:
        self.place, self.inputs, self.answer, self.cost = place, inputs, answer, cost
        self.encoded: dict[Hashable, list[bytes]] = {}
        self.size = 0


class Repeats:
    """The last answer of each query (``key``: its expression and how it reads) with its
    place, inputs, cost and the bodies a surface encoded it into, within ``max_bytes`` of
    counts and bodies held (least recently asked out first). Heavy requests compute in worker
    threads: one lock."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.held = 0
        self.hits = 0  # answers taken again, whole or in part (for tests and profiles)
        self.times_taken = 0  # the times of those answers not computed again
        self._entries: OrderedDict[Hashable, Remembered] = OrderedDict()
        self._of_answer: dict[int, Remembered] = {}  # by id() of a remembered answer
        self._sharing: dict[int, int] = {}  # answers holding a copy of counts, by its id()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Answers held."""
        return len(self._entries)

    def last(self, key: Hashable) -> Remembered | None:
        """The last answer remembered under ``key``, or None."""
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(
        self, key: Hashable, place: Hashable, inputs: Inputs, answer: object, cost: int
    ) -> None:
        """Remember ``answer`` with a copy of its counts (a read's arrays are shared), the
        copy another answer holds when it is of the same series and equal (the p50, p95 and
        p99 panels of one histogram read the same buckets)."""
        if inputs.counts.nbytes + inputs.sizes.nbytes > self.max_bytes:
            return
        with self._lock:
            counts, sizes = self._copy(inputs)  # (the last answer's own, when still equal)
            self._drop(key)
            entry = Remembered(place, Inputs(inputs.found, inputs.ids, counts, sizes), answer, cost)
            self._entries[key] = entry
            self._of_answer[id(answer)] = entry
            self._bound()

    def _copy(self, inputs: Inputs) -> tuple[Ints, Ints]:
        """Counts and sizes equal to ``inputs``', held by another answer or copied."""
        for other in self._entries.values():
            held = other.inputs
            if held.ids is inputs.ids and held.counts.shape == inputs.counts.shape:
                if np.array_equal(held.sizes, inputs.sizes) and np.array_equal(
                    held.counts, inputs.counts
                ):
                    self._sharing[id(held.counts)] += 1
                    return held.counts, held.sizes
        counts, sizes = inputs.counts.copy(), inputs.sizes.copy()
        self._sharing[id(counts)] = 1
        self.held += counts.nbytes + sizes.nbytes
        return counts, sizes

    def encoded(
        self, answer: object, key: Hashable, encode: Callable[[], list[bytes]]
    ) -> list[bytes]:
        """``encode()``: a body of ``answer`` (``key``: what else it is made of), remembered
        with it when it is a remembered answer, so that a repeated answer is not encoded
        again either."""
        with self._lock:
            entry = self._of_answer.get(id(answer))
            body = entry.encoded.get(key) if entry is not None else None
        if body is not None:
            return body
        body = encode()
        if entry is None:
            return body
        with self._lock:
            size = sum(map(len, body))
            held = self._of_answer.get(id(answer)) is entry and key not in entry.encoded
            if held and entry.size + size + entry.inputs.counts.nbytes <= self.max_bytes:
                entry.encoded[key] = body
                entry.size += size
                self.held += size
                self._bound()
        return body

    def _bound(self) -> None:
        """Least recently asked out first (each entry alone fits: a put or a body that would
        not is not held)."""
        while self.held > self.max_bytes:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: Hashable) -> None:
        found = self._entries.pop(key, None)
        if found is None:
            return
        self.held -= found.size
        self._of_answer.pop(id(found.answer), None)
        counts = found.inputs.counts
        self._sharing[id(counts)] -= 1
        if not self._sharing[id(counts)]:
            del self._sharing[id(counts)]
            self.held -= counts.nbytes + found.inputs.sizes.nbytes
