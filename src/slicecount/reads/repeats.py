"""Answers remembered with the counts they were computed from, for the same query asked
again. Pure.

A live dashboard asks the same queries again and again: Grafana aligns a range query's start
and end to its step, so every refresh within a step (and every viewer's) sends the very same
expression over the very same times, and its answer changes only when the counts it reads
change. Each request still discovers and reads as if alone (never a count older than it):
only then is its answer looked up, by the expression, the grid (``engine.settled``: the
answer does not depend on now) and the slices read, and taken when the series discovered
are the very same objects and the counts read equal, value for value, those it was computed
from. Computing from the same inputs gives the same answer, so a remembered one is exactly
what computing would have given; only the work is saved (the quantile panels' shared
aggregations, most of a live refresh's evaluation).
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
    cache's lists, compared by identity), the ids read (a list never changed once planned),
    and their counts and sizes."""

    found: tuple[object, ...]
    ids: Sequence[str]
    counts: Ints
    sizes: Ints

    def same(self, other: Inputs) -> bool:
        return (
            len(self.found) == len(other.found)
            and all(a is b for a, b in zip(self.found, other.found, strict=True))
            and self.ids == other.ids
            and np.array_equal(self.sizes, other.sizes)
            and np.array_equal(self.counts, other.counts)
        )


class _Entry:
    """A remembered answer: its inputs, the points computing it cost, and its encodings."""

    __slots__ = ("answer", "cost", "encoded", "inputs", "size")

    def __init__(self, inputs: Inputs, answer: object, cost: int) -> None:
        self.inputs, self.answer, self.cost = inputs, answer, cost
        self.encoded: dict[Hashable, list[bytes]] = {}
        self.size = inputs.counts.nbytes + inputs.sizes.nbytes


class Repeats:
    """The last answer of each query (``key``: its expression, grid and slices read) with its
    inputs, the points computing it cost and the bodies a surface encoded it into, within
    ``max_bytes`` of counts and bodies held (least recently asked out first). Heavy requests
    compute in worker threads: one lock."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.held = 0
        self.hits = 0  # answers given again (what a test or a profile looks at)
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._of_answer: dict[int, _Entry] = {}  # by id() of a remembered answer
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Answers held."""
        return len(self._entries)

    def get(self, key: Hashable, inputs: Inputs) -> tuple[object, int] | None:
        """(the answer, the points it cost) computed from the same inputs, or None."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
        if not found.inputs.same(inputs):
            return None
        self.hits += 1
        return found.answer, found.cost

    def put(self, key: Hashable, inputs: Inputs, answer: object, cost: int) -> None:
        """Remember ``answer`` with a copy of its counts (a read's arrays are shared)."""
        if inputs.counts.nbytes + inputs.sizes.nbytes > self.max_bytes:
            return
        kept = Inputs(inputs.found, inputs.ids, inputs.counts.copy(), inputs.sizes.copy())
        entry = _Entry(kept, answer, cost)
        with self._lock:
            self._drop(key)
            self._entries[key] = entry
            self._of_answer[id(answer)] = entry
            self.held += entry.size
            self._bound()

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
            if held and entry.size + size <= self.max_bytes:
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
        if found is not None:
            self.held -= found.size
            self._of_answer.pop(id(found.answer), None)
