"""A query evaluated once per distinct reading of its times, not once per time. Pure.

A time reads the slice boundary that ends the slice holding it (minus each selector's
offset), so a step finer than the precision makes many times read the same boundaries: a
"last 24 hours" graph at a 2-minute step over 1-hour slices has 721 times and 25 readings,
a "last hour" at 15 s over 1-minute slices 241 and 61. Every value of a query is a function
of the boundaries it reads, except what reads the time itself (``time()``, ``timestamp()``):
such a query is evaluated at every time; any other is evaluated at one time of each reading
and its answers spread back to every time. Functions, aggregations and operators then work
(and are charged) once per reading, as the window functions already did.
"""

from __future__ import annotations

from dataclasses import replace

from slicecount.promql.arrays import Block
from slicecount.promql.ast import Call, Node, VectorSelector, walk
from slicecount.promql.engine import Result, as_scalar, as_vector
from slicecount.promql.values import Grid, Series

READS_THE_TIME = frozenset({"time", "timestamp"})
"""Functions whose value depends on the evaluation time itself, not only on what it reads."""


def collapse(grid: Grid, node: Node) -> tuple[Grid, list[int]] | None:
    """The grid of one time per distinct reading, and for each time of ``grid`` the index of
    its reading; None when each time must be evaluated (a time read by the query, a simPod
    grid, whose points each read their own slices) or every time reads differently."""
    if grid.partial:
        return None
    items = walk(node)
    if any(isinstance(item, Call) and item.func in READS_THE_TIME for item in items):
        return None
    offsets = sorted({item.offset for item in items if isinstance(item, VectorSelector)})
    reads = list(zip(*(grid.reads(offset) for offset in offsets), strict=True))
    index: dict[tuple[int | None, ...], int] = {}
    where = [index.setdefault(read, len(index)) for read in reads]
    if len(index) == len(grid.times) or not offsets:
        return None
    times = [0.0] * len(index)
    for t, reading in zip(reversed(grid.times), reversed(where), strict=True):
        times[reading] = t  # the first time of each reading
    return replace(grid, times=tuple(times)), where


def expand(result: Result, where: list[int]) -> Result:
    """A result on the collapsed grid, at every time of the full one."""
    if isinstance(result, str):
        return result
    if isinstance(result, Block):  # the engine's vector: each time's column taken
        return Block(result.labels, result.values[:, where], result.present[:, where])
    if all(isinstance(s, Series) for s in result):  # a vector (perhaps empty)
        return [Series(s.labels, [s.values[i] for i in where]) for s in as_vector(result)]
    scalar = as_scalar(result)  # a float per time
    return [scalar[i] for i in where]
