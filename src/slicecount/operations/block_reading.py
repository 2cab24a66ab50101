"""Reading the blocks layout: a series' sealed slices (its block) plus its open ones. Pure.

The truth of a slice is what the block holds for it plus what the open hash holds for the
seconds inside it: a read always adds both, so a count is exact whether the cleaner has sealed
it or not, and a late write after sealing counts at once. The cleaner moves fields from the
hash into the block in one atomic step that changes the block's generation (bytes 4..7); a
read takes the block's head, the hash and the generation again in one pipeline, then the
frames it needs with the generation once more: a generation that moved in between means the
cleaner ran across the read, and that series is read again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from slicecount.core import blocks
from slicecount.errors import StoreError
from slicecount.operations.batches import Batch, Command, Context, Operation, ScriptCall, pairs

HEAD = 1024
"""Bytes of a block read with its open hash: the header of the default ladder's block is
about 350 bytes (5 sections, ~130 frames), so one round finds every frame."""
ATTEMPTS = 5
"""Reads of a series whose block the cleaner rewrote meanwhile (once a pass at most) before
the read gives up: two are all it ever takes but for a cleaner gone wild."""
GENERATION = (4, 7)
"""GETRANGE bounds of a block's generation (u32 little-endian; empty: no block)."""


class Snapshot(NamedTuple):
    """A series as one moment saw it: its open slices, its block's header and generation."""

    opened: dict[int, int]
    header: blocks.Header
    generation: bytes


def read(
    ctx: Context, series_ids: Sequence[str], precision: int, first: int, end: int
) -> Operation[dict[str, list[int | None]]]:
    """Counts of the slices of ``precision`` from start ``first`` to ``end`` (excluded) of each
    series: its block's frames that overlap the range plus its open slices; None where both
    are 0 (as the book's layout reads a slice without a field)."""
    found = yield from stored(ctx, series_ids, precision, first, end)
    return {s: _counts(found[s], precision, first, end) for s in series_ids}


def stored(
    ctx: Context, series_ids: Sequence[str], precision: int, first: int, end: int
) -> Operation[dict[str, blocks.Stored]]:
    """What each series holds for the slices of ``precision`` from ``first`` to ``end``: the
    bytes of its block's frames that overlap them and its open slices, as one moment saw
    them (``blocks.slices_in`` or the datasource's numpy ``slices_matrix`` make the counts)."""
    found: dict[str, blocks.Stored] = {}
    pending = list(dict.fromkeys(series_ids))
    for _ in range(ATTEMPTS):
        snapshots = yield from _snapshots(ctx, pending)
        located = {s: snap.header.frames(precision, first, end) for s, snap in snapshots.items()}
        wanted = [s for s, where in located.items() if where[3]]
        replies: list[Any] = []
        if wanted:
            batch: list[Command | ScriptCall] = []
            for series_id in wanted:
                block, (_, _, offset, length) = ctx.keys.block(series_id), located[series_id]
                batch += [("GETRANGE", block, offset, offset + length - 1)]
                batch += [("GETRANGE", block, *GENERATION)]
            replies = yield Batch(batch, raw=True)
        frames = dict(zip(wanted, zip(replies[::2], replies[1::2], strict=True), strict=True))
        moved = [s for s in pending if s not in snapshots]
        for series_id, snap in snapshots.items():
            data, generation = frames.get(series_id, (b"", snap.generation))
            if generation != snap.generation:
                moved.append(series_id)
                continue
            header = snap.header if snap.header.sections else None
            found[series_id] = blocks.Stored(header, data, located[series_id][0], snap.opened)
        if not moved:
            return found
        pending = moved
    raise _still_moving(pending)


def get(ctx: Context, series_id: str, precision: int) -> Operation[list[tuple[int, int]]]:
    """Every ``(slice start, count)`` of a series at ``precision`` with a count, oldest first:
    its whole block and its open slices."""
    block, opened = ctx.keys.block(series_id), ctx.keys.open(series_id)
    for _ in range(ATTEMPTS):
        data, flat, generation = yield Batch(
            [("GET", block), ("HGETALL", opened), ("GETRANGE", block, *GENERATION)], raw=True
        )
        if (data or b"")[4:8] != generation:
            continue  # compacted between the two: read both again
        try:
            counts = blocks.everything(data or b"").get(precision, {})
        except blocks.BlockError:
            counts = {}  # a foreign value under our key: no block
        for second, n in _open_fields(flat):
            start = second - second % precision
            counts[start] = counts.get(start, 0) + n
        return sorted((start, n) for start, n in counts.items() if n)
    raise _still_moving([series_id])


def _snapshots(ctx: Context, series_ids: list[str]) -> Operation[dict[str, Snapshot]]:
    """Each series' open hash and block header, consistent with each other (the generation
    read before and after the hash agree); a series whose block changed meanwhile is left
    out, to be read again."""
    keys = ctx.keys
    batch: list[Command | ScriptCall] = []
    for series_id in series_ids:
        block = keys.block(series_id)
        batch += [
            ("GETRANGE", block, 0, HEAD - 1),
            ("HGETALL", keys.open(series_id)),
            ("GETRANGE", block, *GENERATION),
        ]
    replies = yield Batch(batch, raw=True)
    snapshots: dict[str, Snapshot] = {}
    heads: dict[str, bytes] = {}
    for index, series_id in enumerate(series_ids):
        head, flat, generation = replies[3 * index : 3 * index + 3]
        if head[4:8] == generation:
            heads[series_id] = head
            snapshots[series_id] = Snapshot(dict(_open_fields(flat)), blocks.Header(), generation)
    asked = HEAD
    while heads:  # a header longer than HEAD (a long ladder) is read whole, then parsed
        longer: dict[str, int] = {}
        for series_id, head in heads.items():
            if head[4:8] != snapshots[series_id].generation:
                del snapshots[series_id]  # rewritten since the hash was read: read again
                continue
            try:
                need = blocks.header_size(head)
                if need > len(head) == asked:
                    longer[series_id] = need
                    continue
                header = blocks.parse_header(head)
            except blocks.BlockError:
                continue  # a foreign value under a block key (or cut short): no block
            snapshots[series_id] = snapshots[series_id]._replace(header=header)
        if not longer:
            break
        asked = max(longer.values())
        replies = yield Batch([("GETRANGE", keys.block(s), 0, asked - 1) for s in longer], raw=True)
        heads = dict(zip(longer, replies, strict=True))
    return snapshots


def _counts(found: blocks.Stored, precision: int, first: int, end: int) -> list[int | None]:
    counts = [0] * max(0, (end - first) // precision)
    if found.header is not None:
        try:
            counts = blocks.slices_in(
                found.header, precision, found.frames, found.first_index, first, end
            )
        except blocks.BlockError:
            pass  # a frame that does not decode: that block reads as empty
    for second, n in found.open.items():
        start = second - second % precision
        if first <= start < end:
            counts[(start - first) // precision] += n
    return [n or None for n in counts]


def _open_fields(flat: Iterable[Any]) -> Iterable[tuple[int, int]]:
    for field, count in pairs(list(flat or ())):
        try:
            yield int(field), int(count)
        except ValueError:
            continue  # a foreign field in our hash: not a slice, never a reason to fail a read


def _still_moving(series_ids: Sequence[str]) -> StoreError:
    return StoreError(
        f"the blocks of {len(series_ids)} series (e.g. {series_ids[0]!r}) were rewritten "
        f"under {ATTEMPTS} reads in a row"
    )
