"""The write operations: the book's update_counter and the Recorder's batched flush. Pure.

A write is prepared into chunks, one shard each (``chunking.py``), and every chunk is one
MULTI/EXEC: ``ZADD NX`` of the registry members and ``HINCRBY`` of the slices in one atomic
step, so a cleaner can never forget a hash that a write is filling. A chunk may carry a writer
id and batch number: then Redis applies it at most once, however often it is sent (see
``write_chunk``).

In the blocks layout (``Settings.layout``) a series is one counter: its open hash, one
HINCRBY per second at the finest precision under one registry member (``keys.open_layout``);
the cleaner seals the slices into blocks of every precision. A writer's chunk there also says
the oldest second that writer may still send to the shard (its mark): what the cleaner waits
for before it seals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from slicecount.core.series import Labels, encode, parse, shown
from slicecount.errors import ConfigurationError, StoreError
from slicecount.operations.batches import Batch, Command, Context, Operation
from slicecount.operations.checks import check_count, check_time
from slicecount.operations.chunking import Buffer, Chunk, prepare

WRITER_MEMORY = 7 * 86_400
"""Seconds the cleaner keeps a quiet writer's last batch number: a batch in doubt for longer
than this (Redis unreachable from its writer for a week) could apply twice."""


class Written(NamedTuple):
    """What one chunk did: applied before (a resend: nothing written now), and the commands
    Redis refused inside it (the refusals of a first copy whose reply was lost are unknown):
    its counts', and its exemplars' (samples: no count lost)."""

    duplicate: bool
    refused: int
    samples_refused: int = 0


def write_chunk(
    ctx: Context,
    chunk: Chunk,
    writer: str | None = None,
    seq: int | None = None,
    mark: int | None = None,
) -> Operation[Written]:
    """Apply one chunk in one MULTI/EXEC; with ``writer`` and ``seq``, at most once.

    The writer's key holds its last applied batch number. It is WATCHed and read in a round
    trip of its own, then the transaction sets it: a copy of this chunk still in flight from
    a lost reply either ran before (the read sees the number: nothing to do), or runs after
    (its own WATCH, set before it was sent, sees the key changed: Redis drops it), or lands
    between our WATCH and EXEC (ours is dropped, and the read again sees it applied).

    In the blocks layout the transaction also sets the writer's mark on the shard: the oldest
    second it may still send there, ``mark`` (what the writer still holds back: the chunks
    behind this one, its buffer) or this chunk's oldest second, whichever is older.
    """
    if writer is None or seq is None:
        replies = yield chunk.transaction()
        return _written(chunk, replies)
    keys = ctx.keys
    writer_key, writers = keys.writer(writer, chunk.shard), keys.writers(chunk.shard)
    while True:
        _, last = yield Batch([("WATCH", writer_key), ("GET", writer_key)])
        if last is not None and not last.isdigit():
            raise StoreError(
                f"{writer_key} holds {shown(last)}, not a batch number", permanent=True
            )
        if last is not None and int(last) >= seq:
            yield Batch([("UNWATCH",)])
            return Written(True, 0)
        note: tuple[Command, ...] = (
            ("SET", writer_key, seq),
            ("ZADD", writers, int(ctx.clock()), writer),
        )
        oldest = _mark(chunk.oldest, mark)
        if ctx.settings.layout == "blocks" and oldest is not None:
            note += (("ZADD", keys.marks(chunk.shard), oldest, writer),)
        replies = yield chunk.transaction(*note)
        if replies:  # empty: a copy of this chunk changed the key meanwhile; look again
            return _written(chunk, replies[: -len(note)])


def _written(chunk: Chunk, replies: list[Any]) -> Written:
    """What an applied chunk's replies say (the note after them left out)."""
    counting = chunk.counting
    return Written(False, _refused(replies[:counting]), _refused(replies[counting:]))


def _mark(oldest: int | None, held: int | None) -> int | None:
    if oldest is None or held is None:
        return held if oldest is None else oldest
    return min(oldest, held)


def _refused(replies: list[Any]) -> int:
    # Every write replies with an integer; anything else is an error Redis returned.
    return sum(reply.__class__ is not int for reply in replies)


def _write(ctx: Context, buffer: Buffer) -> Operation[int]:
    prepared = prepare(ctx, buffer)
    refused = prepared.out_of_range
    for chunk in prepared.chunks:
        written = yield from write_chunk(ctx, chunk)
        refused += written.refused
    return refused


def incr(
    ctx: Context, name: str, n: int = 1, labels: Labels | None = None, now: float | None = None
) -> Operation[None]:
    """Add ``n`` to a series at every precision now (the book's update_counter)."""
    series_id = encode(name, labels)
    check_count(n)
    second = int(check_time(ctx, ctx.clock() if now is None else now))
    if (yield from _write(ctx, {second: {series_id: n}})):
        raise StoreError(f"redis refused to count {series_id!r} (a key of another type?)")


def apply(ctx: Context, batch: Mapping[str, Mapping[int, int]]) -> Operation[int]:
    """Write ``{series id: {epoch second: count}}``; return how many increments were refused
    (by Redis, or past 64 bits once summed): 0 when all is well."""
    buffer: dict[int, dict[str, int]] = {}
    for series_id, seconds in batch.items():
        if not isinstance(series_id, str):
            raise ConfigurationError(
                f"batch key must be a series id string, got {shown(series_id)}"
            )
        name, labels = parse(series_id)
        if encode(name, labels) != series_id:
            raise ConfigurationError(f"{shown(series_id)} is not a canonical series id")
        for second, n in seconds.items():
            if isinstance(second, bool) or not isinstance(second, int):
                raise ConfigurationError(
                    f"batch time for {shown(series_id)} must be an epoch second, got {second!r}"
                )
            check_time(ctx, second, f"batch time for {shown(series_id)}")
            bucket = buffer.setdefault(second, {})
            bucket[series_id] = bucket.get(series_id, 0) + check_count(n)
    return (yield from _write(ctx, buffer))
