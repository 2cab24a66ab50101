"""Reading the blocks layout: a series' sealed slices (its block) plus its open ones. Pure.

The truth of a slice is what the block holds for it plus what the open hash holds for the
seconds inside it: a read always adds both, so a count is exact whether the cleaner has sealed
it or not, and a late write after sealing counts at once. A range read is one script
(``read_blocks.lua``) per shard and SERIES_PER_CALL series: it reads each block's header, the
frames the range needs and the open hash in one atomic step, so what the cleaner moves between
them (also in one step) is seen on one side or the other, never both or neither. ``get``
reads a whole block and its hash in one pipeline, checking the block's generation (bytes
4..7) did not change in between.
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, repeat
from typing import Any

from slicecount.core import blocks
from slicecount.core.frames import FRAME_SLICES
from slicecount.core.memo import remembered
from slicecount.core.spans import HELD, META, Spans
from slicecount.errors import StoreError
from slicecount.operations.batches import Batch, Command, Context, Operation, ScriptCall, pairs

ATTEMPTS = 5
"""Reads of a series whose block the cleaner rewrote meanwhile (once a pass at most) before
``get`` gives up: two are all it ever takes but for a cleaner gone wild."""
GENERATION = (4, 7)
"""GETRANGE bounds of a block's generation (u32 little-endian; empty: no block)."""
SERIES_PER_CALL = 32
"""Series read by one ``read_blocks`` call: about 0.3 ms of Redis time (6-12 µs a series and
its frames), so a refresh's thousands of calls leave Redis to its writers often. With 64 a
call (0.4-0.8 ms alone) the dashboard benchmark saw 1-5 calls a run over 5 ms, waiting for a
core of a 2-core machine; with 32, 1 and 0, at the same refresh times."""
SLICES = FRAME_SLICES


def read(
    ctx: Context, series_ids: Sequence[str], precision: int, first: int, end: int
) -> Operation[dict[str, list[int | None]]]:
    """Counts of the slices of ``precision`` from start ``first`` to ``end`` (excluded) of each
    series: its block's frames that overlap the range plus its open slices; None where both
    are 0 (as the book's layout reads a slice without a field)."""
    found = (yield from stored(ctx, series_ids, precision, first, end)).each()
    return {s: _counts(found[s], precision, first, end) for s in series_ids}


def stored(
    ctx: Context,
    series_ids: Sequence[str],
    precision: int,
    first: int,
    end: int,
    held: Mapping[str, int] | None = None,
) -> Operation[Spans]:
    """What each series holds for the slices of ``precision`` from ``first`` to ``end``: the
    bytes of its block's frames that overlap them and its open slices there, as one moment
    saw them, packed (``spans.Spans``: ``each`` and ``blocks.slices_in``, or the datasource's
    numpy ``slices_matrix``, make the counts). One ``read_blocks`` script call per
    SERIES_PER_CALL series of a shard, all in one round trip. ``held``: per series, the
    generation of its block whose frames for this range the reader holds: a block still of
    that generation has its frames left unread (``spans.HELD``).

    A call whose series are all held reads their open hashes with plain HGETALLs and then
    their blocks' generations (``block_generations``): handing a hash's fields to a script
    cost Redis five times what sending them did, and the open hashes are most of a live
    refresh's read. A block still of the generation held after its hash was read was not
    rewritten since the frames held were read, so those frames and that hash are one
    moment's. A call with a block rewritten meanwhile (a cleaner's pass) is read again by
    the script."""
    ids, named = remembered(
        "read_blocks", [ctx.keys, *series_ids], lambda: _per_call(ctx, series_ids)
    )
    args: tuple[int, ...] = (precision, first, end, SLICES)
    calls: list[Command | ScriptCall] = []
    parts: list[tuple[tuple[str, ...], list[int]]] = []  # each call's keys and generations held
    at = 0
    for names in named:
        mine = ids[at : at + len(names) // 2]
        at += len(mine)
        generations = [held.get(s, 0) for s in mine] if held else []
        parts.append((names, generations))
        if generations and all(generations):
            calls += [("HGETALL", opened) for opened in names[1::2]]
            calls.append(ScriptCall("block_generations", names[::2], ()))
        else:
            calls.append(ScriptCall("read_blocks", names, (*args, *generations)))
    # bulk: a refused HGETALL (a foreign value under an open hash's key, which the script
    # reads as no fields) sends its call to the script; any other refusal raises
    replies = iter((yield Batch(calls, raw=True, bulk=True)))
    answers: list[Sequence[bytes] | None] = []
    again: list[Command | ScriptCall] = []
    for names, generations in parts:
        if not (generations and all(generations)):
            answers.append(_accepted(next(replies)))
            continue
        hashes = [next(replies) for _ in names[1::2]]
        now = [n for (n,) in GENERATIONS.iter_unpack(_accepted(next(replies)))]
        if now == generations and not any(isinstance(h, Exception) for h in hashes):
            answers.append(_held_reply(hashes, generations))
        else:
            answers.append(None)
            again.append(ScriptCall("read_blocks", names, (*args, *generations)))
    if again:
        read = iter((yield Batch(again, raw=True)))
        answers = [next(read) if answer is None else answer for answer in answers]
    return Spans.joined(ids, [answer for answer in answers if answer is not None])


GENERATIONS = struct.Struct("<I")
PLAIN_TEXT = b"0123456789 "
"""The bytes of plain open fields joined by spaces."""
PLAIN_DIGITS = 18
"""Open fields joined as read_blocks joins them: plain integers of up to 18 digits."""
AS_ZEROS = bytes.maketrans(b"123456789", b"0" * 9)
TOO_LONG = b"0" * (PLAIN_DIGITS + 1)
INTEGER = re.compile(rb"-?[0-9]+")
"""A field or count kept when the fields are not all plain (below 2**53, as Lua's numbers)."""


def _accepted(reply: Any) -> Any:
    """A reply of a bulk batch, or the StoreError its refusal is."""
    if isinstance(reply, Exception):
        transient = bool(getattr(reply, "transient", False))
        raise StoreError(f"redis refused a command: {reply}", permanent=not transient)
    return reply


def _held_reply(hashes: Sequence[Sequence[bytes]], generations: Sequence[int]) -> list[bytes]:
    """The four strings ``read_blocks`` returns for series whose frames are held (``Spans``),
    made from their open hashes as HGETALL sent them: the fields of them all checked and
    joined at once (a call's 32 hashes one by one cost a live refresh ~5 ms), or, when one
    is not plain, each hash's kept alone."""
    fields = list(chain.from_iterable(hashes))
    text = b" ".join(fields)
    if _plain(fields, text):
        pairs = [len(flat) // 2 for flat in hashes]
    else:
        kept = [_open_text(flat) for flat in hashes]
        pairs = [n for n, _ in kept]
        text = b" ".join(part for n, part in kept if n)
    meta = [n for row in zip(repeat(0), repeat(HELD), pairs, generations) for n in row]
    return [_metas(len(pairs)).pack(*meta), b"", b"", text]


@functools.lru_cache(maxsize=SERIES_PER_CALL + 1)
def _metas(series: int) -> struct.Struct:
    """``META`` for so many series end to end."""
    return struct.Struct("<" + META.format.lstrip("<") * series)


def _plain(fields: Sequence[bytes], text: bytes) -> bool:
    """Whether ``text``, the ``fields`` joined by spaces, is as ``read_blocks`` joins plain
    fields: each of 1 to 18 digits (no sign, no space inside). Checked on the text with
    bytes methods (a call's thousand fields one by one took ten times as long)."""
    if not fields:
        return True
    return (
        not text.translate(None, PLAIN_TEXT)  # digits and spaces only
        and text.count(b" ") == len(fields) - 1  # none inside a field
        and b"  " not in text  # no empty field
        and text[:1] != b" " != text[-1:]
        and TOO_LONG not in text.translate(AS_ZEROS)
    )


def _open_text(flat: Sequence[bytes]) -> tuple[int, bytes]:
    """An open hash's (second, count) pairs and their decimal text, "second count ...": its
    strings joined as they are, or (a foreign field, a count past 18 digits) the integers
    kept one by one, as ``read_blocks.lua`` keeps them."""
    if not flat:
        return 0, b""
    text = b" ".join(flat)
    if _plain(flat, text):
        return len(flat) // 2, text
    kept = [b"%d %d" % pair for pair in _open_fields(flat, below=2**53)]
    return len(kept), b" ".join(kept)


def _per_call(ctx: Context, series_ids: Sequence[str]) -> tuple[list[str], list[tuple[str, ...]]]:
    """The series in the order of their script calls, and each call's keys: the series of
    one shard (one slot on a cluster) together, at most SERIES_PER_CALL a call. It depends on
    the ids alone, so it is remembered with them (a dashboard reads the same series at every
    refresh, and its rows are then the same list: ``core.memo`` keys on it)."""
    keys = ctx.keys
    shards: dict[int, list[str]] = {}
    for series_id in dict.fromkeys(series_ids):
        shards.setdefault(keys.series_keys(series_id).shard, []).append(series_id)
    parts = [
        ids[at : at + SERIES_PER_CALL]
        for ids in shards.values()
        for at in range(0, len(ids), SERIES_PER_CALL)
    ]
    named = [tuple(n for s in part for n in keys.series_keys(s)[1:]) for part in parts]
    return [s for part in parts for s in part], named


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


def _counts(found: blocks.Stored, precision: int, first: int, end: int) -> list[int | None]:
    try:
        counts = blocks.slices_in(found, precision, first, end)
    except blocks.BlockError:  # a frame that does not decode: that block reads as empty
        counts = [0] * max(0, (end - first) // precision)
    for second, n in found.open.items():
        start = second - second % precision
        if first <= start < end:
            counts[(start - first) // precision] += n
    return [n or None for n in counts]


def _open_fields(flat: Iterable[Any], below: int = 2**63) -> Iterable[tuple[int, int]]:
    """An open hash's (second, count) pairs that are plain integers below ``below``: 64 bits,
    all Redis holds, or 2**53 where the script's numbers (Lua's doubles) must agree. A
    foreign field in our hash is never a reason to fail a read."""
    for field, count in pairs(list(flat or ())):
        if INTEGER.fullmatch(field) and INTEGER.fullmatch(count):
            second, n = int(field), int(count)
            if abs(second) < below > abs(n):
                yield second, n


def _still_moving(series_ids: Sequence[str]) -> StoreError:
    return StoreError(
        f"the blocks of {len(series_ids)} series (e.g. {series_ids[0]!r}) were rewritten "
        f"under {ATTEMPTS} reads in a row"
    )
