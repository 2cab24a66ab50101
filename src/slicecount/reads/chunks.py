"""A read of many series' slices in chunks, a few under way at once, so that no reply holds
the event loop for long and Redis prepares one chunk while another is converted; in the
blocks layout each chunk's frames are decoded with numpy in a worker thread (zlib and numpy
let go of the GIL), a small one on the event loop. And the unions of unique series, cut into
calls of bounded work."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from slicecount.core.memo import remembered
from slicecount.errors import extra_imports
from slicecount.operations.unique_reading import Group
from slicecount.promql.arrays import Ints
from slicecount.reads.decoding import Matrix, add_open, frames_matrix, slices_matrix
from slicecount.reads.sealed import SealedFrames
from slicecount.store.asyncio import AsyncStore

with extra_imports("datasource", "the datasource"):
    import anyio.to_thread

with extra_imports("datasource", "the datasource"):
    import numpy as np


class Slices(NamedTuple):
    """Counts read as one array: ``counts[row[id]]`` holds the slices of series ``id``."""

    row: Mapping[str, int]
    counts: Ints


Read = Mapping[str, Sequence[int | None] | Ints] | Slices
"""What one read of slices gives: per series id, its count per slice."""


class SliceRange(NamedTuple):
    """The slices of ``precision`` from start ``first`` to start ``last``, summed from the
    stored slices of ``stored`` (the blocks layout reads a finer precision, of which
    ``precision`` is a multiple; the book's reads them as stored): what a read asks of every
    series, as Prometheus' ``SelectHints`` tell a storage the range of a select."""

    precision: int
    first: int
    last: int
    stored: int


def merged(parts: Sequence[Read]) -> Read:
    """Reads of chunks of the series as one read: lists by id, or 2-D rows stacked."""
    if len(parts) == 1:
        return parts[0]
    if parts and all(isinstance(p, Slices) for p in parts):
        rows: dict[str, int] = {}
        for part in parts:
            assert isinstance(part, Slices)
            rows.update({i: n + len(rows) for i, n in part.row.items()})
        stacked = np.concatenate([p.counts for p in parts if isinstance(p, Slices)])
        return Slices(rows, stacked)
    counts: dict[str, Sequence[int | None] | Ints] = {}
    for part in parts:
        assert not isinstance(part, Slices)
        counts.update(part)
    return counts


def chunks(ids: list[str], size: int) -> list[list[str]]:
    """``ids`` cut into reads of ``size``."""
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def row_index(ids: Sequence[str]) -> dict[str, int]:
    """Each id's row, remembered with the list (a plan's ids and a read's are one list at
    every request of a dashboard: ``planning``, ``block_reading``)."""
    return remembered("rows", [ids], lambda: {i: n for n, i in enumerate(ids)})


READ_CHUNK_POINTS = 16_384
"""Points asked of Redis in one read of the book's layout: its reply is parsed and converted
on the event loop, in about 10 ms (a 500 000-point read in one piece would hold it 400 ms)."""
BLOCK_CHUNK_SERIES = 2048
"""Series in one read of the blocks layout (32 script calls, one round trip): its reply is the
frames' compressed bytes (a few kB a series for a day of 5 s slices), decoded in a thread."""
INLINE_CELLS = 50_000
"""A read of the blocks layout decoding this many slices or fewer (series x columns) decodes
on the event loop, in a millisecond or two: a worker thread's two hops cost as much."""
BLOCK_CHUNK_CELLS = 2_000_000
"""Slices (series x columns) decoded by one read of the blocks layout at most: 16 MB of int64.
Cut by points as the book's, a day of 5 s slices was 7 series a read: 180 reads a panel."""
READS_IN_FLIGHT = 2
"""Chunks of one request under way at once: Redis prepares one while the other is converted."""
UNION_SLICES_PER_CALL = 20_000
"""Slices named in one ``count_unions`` call: its reply is small, but Redis merges each
union's HLLs in one go (~20 ms for this many), so no call holds a server for long."""


def start_reads(
    store: AsyncStore,
    ids: Sequence[str],
    precision: int,
    first: int,
    last: int,
    stored: int,
    gate: asyncio.Semaphore,
    sealed: SealedFrames | None = None,
) -> list[asyncio.Future[Read]]:
    """The reads of the slices of ``precision`` from start ``first`` to start ``last`` of
    ``ids``, a task per chunk, each holding ``gate`` while Redis answers it. ``stored``: the
    precision read (the blocks layout), of which ``precision`` is a multiple. ``sealed``: the
    frames held from earlier reads, used where the blocks did not change, and kept."""
    blocks = store.settings.layout == "blocks"
    if not blocks and stored != precision:
        raise ValueError(f"the book's layout reads slices of {precision} s as stored")
    end = last + precision
    if blocks:
        per_chunk = min(
            BLOCK_CHUNK_SERIES, max(1, BLOCK_CHUNK_CELLS // ((end - first) // precision))
        )
    else:
        per_chunk = max(1, READ_CHUNK_POINTS // ((end - first) // precision))

    async def read_chunk(part: list[str]) -> Read:
        async with gate:
            if not blocks:
                return await store.read(part, precision, first, last)
            held = sealed.lookup(part, stored, first, end) if sealed is not None else None
            generations = held.generations if held is not None else None
            found = await store.read_stored(part, stored, first, end - stored, generations)
        group = precision // stored
        window, cached = None, None
        if sealed is not None:
            found = sealed.completed(part, found, held, stored, first, end)
            if held is not None and found.frames is held.spans.frames:  # none read again
                window = sealed.window(held, stored, group, first, end)
                cached = sealed.decoded(held, window)

        def decode() -> tuple[Matrix, Matrix | None]:
            if window is None or held is None:
                return slices_matrix(found, stored, first, end, group), None
            # the frames as held: cut from their window, decoded once for many refreshes
            whole = cached
            if whole is None:
                whole = frames_matrix(held.spans, stored, window.lo, window.hi, group)
            at = (first - window.lo) // precision
            counts = whole[:, at : at + (end - first) // precision].copy()
            add_open(counts, found, first, precision)
            return counts, whole

        small = len(part) * ((end - first) // precision) <= INLINE_CELLS
        counts, whole = decode() if small else await anyio.to_thread.run_sync(decode)
        if sealed is not None and held is not None and window is not None and cached is None:
            assert whole is not None  # (decoded from the frames held: ``window`` is set)
            sealed.keep_decoded(part, held, window, whole)  # (on the loop: the cache's one thread)
        return Slices(row_index(found.ids), counts)

    return [asyncio.ensure_future(read_chunk(part)) for part in chunks(list(ids), per_chunk)]


def union_parts(groups: Sequence[Group], limit: int = UNION_SLICES_PER_CALL) -> list[list[Group]]:
    """``groups`` cut into calls of at most ``limit`` slices (a bigger union alone in its
    call)."""
    chunks: list[list[Group]] = [[]]
    size = 0
    for group in groups:
        slices = sum(len(starts) for _, starts in group)
        if chunks[-1] and size + slices > limit:
            chunks.append([])
            size = 0
        chunks[-1].append(group)
        size += slices
    return [c for c in chunks if c]
