"""The write operations: the book's update_counter and the Recorder's batched flush. Pure.

Every write is ``ZADD NX`` of the registry member and ``HINCRBY`` of the slice, in one
MULTI/EXEC: a cleaner can never forget a hash that a write is filling.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from slicecount.batches import Batch, Command, Context, Operation
from slicecount.errors import ConfigurationError, StoreError
from slicecount.series import Labels, encode

APPLY_CHUNK_COMMANDS = 50_000
"""HINCRBYs per MULTI/EXEC when writing a batch: big enough to amortise, small enough not to
stall Redis (about 10 ms of server time)."""

Buffer = Mapping[int, Mapping[str, int]]
"""What a Recorder buffers: epoch second -> series id -> count."""


def check_count(n: object) -> int:
    """Counts are integers (HINCRBY); reject anything else naming the value."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise ConfigurationError(f"count must be an integer, got {n!r}")
    return n


def check_time(when: object, what: str = "now") -> float:
    """An epoch time in seconds, else ConfigurationError naming it."""
    if isinstance(when, bool) or not isinstance(when, int | float) or not when >= 0:
        raise ConfigurationError(f"{what} must be an epoch time in seconds, got {when!r}")
    return when


def incr(
    ctx: Context, name: str, n: int = 1, labels: Labels | None = None, now: float | None = None
) -> Operation[None]:
    """Add ``n`` to a series at every precision now (the book's update_counter)."""
    series_id = encode(name, labels)
    check_count(n)
    second = int(check_time(ctx.clock() if now is None else now))
    if (yield from _write(ctx, {second: {series_id: n}})):
        raise StoreError(f"redis refused to count {series_id!r} (a key of another type?)")


def apply(ctx: Context, batch: Mapping[str, Mapping[int, int]]) -> Operation[int]:
    """Write ``{series id: {epoch second: count}}``; return how many commands Redis refused
    (0 when all is well)."""
    buffer: dict[int, dict[str, int]] = {}
    for series_id, seconds in batch.items():
        if not isinstance(series_id, str):
            raise ConfigurationError(f"batch key must be a series id string, got {series_id!r}")
        for second, n in seconds.items():
            if isinstance(second, bool) or not isinstance(second, int) or second < 0:
                raise ConfigurationError(
                    f"batch time for {series_id!r} must be an epoch second, got {second!r}"
                )
            bucket = buffer.setdefault(second, {})
            bucket[series_id] = bucket.get(series_id, 0) + check_count(n)
    return (yield from _write(ctx, buffer))


def write_buffer(ctx: Context, buffer: Buffer) -> Operation[int]:
    """Write a Recorder's buffer as it is (trusted: the Recorder checked every entry);
    return how many commands Redis refused."""
    return (yield from _write(ctx, buffer))


def _write(ctx: Context, buffer: Buffer) -> Operation[int]:
    refused = 0
    for chunk in _chunks(ctx, buffer):
        replies = yield chunk
        # Every write replies with an integer; anything else is an error Redis returned.
        refused += sum(reply.__class__ is not int for reply in replies)
    return refused


def _chunks(ctx: Context, buffer: Buffer) -> Iterator[Batch]:
    """MULTI/EXEC batches: one multi-member ``ZADD NX`` per registry, then one HINCRBY per
    (precision, series, slice), counts of the same slice summed first."""
    keys, precisions = ctx.keys, ctx.settings.precisions
    members: dict[str, list[Any]] = {}
    increments: list[Command] = []
    if len(buffer) == 1:  # the usual flush: nothing to sum, one HINCRBY per counter
        ((second, bucket),) = buffer.items()
        for series_id, n in bucket.items():
            if not n:
                continue
            registry, counters = keys.layout(series_id, precisions)
            listed = members.setdefault(registry, [])
            for precision, member, counter in counters:
                listed += (0, member)
                increments.append(("HINCRBY", counter, second - second % precision, n))
            if len(increments) >= APPLY_CHUNK_COMMANDS:
                yield _batch(members, increments)
                members, increments = {}, []
    else:
        for registry, member, counter, slices in _summed(ctx, buffer):
            members.setdefault(registry, []).extend((0, member))
            increments += [("HINCRBY", counter, start, n) for start, n in slices.items()]
            if len(increments) >= APPLY_CHUNK_COMMANDS:
                yield _batch(members, increments)
                members, increments = {}, []
    if increments:
        yield _batch(members, increments)


def _summed(ctx: Context, buffer: Buffer) -> Iterator[tuple[str, str, str, dict[int, int]]]:
    """(registry, member, hash, {slice start: n}) of every counter with a non-zero slice."""
    keys, precisions = ctx.keys, ctx.settings.precisions
    sums: dict[str, tuple[str, str, dict[int, int]]] = {}
    for second, bucket in buffer.items():
        for series_id, n in bucket.items():
            registry, counters = keys.layout(series_id, precisions)
            for precision, member, counter in counters:
                entry = sums.get(counter)
                if entry is None:
                    entry = sums[counter] = (registry, member, {})
                slices = entry[2]
                start = second - second % precision
                slices[start] = slices.get(start, 0) + n
    for counter, (registry, member, slices) in sums.items():
        nonzero = {start: n for start, n in slices.items() if n}
        if nonzero:
            yield registry, member, counter, nonzero


def _batch(members: Mapping[str, list[Any]], increments: list[Command]) -> Batch:
    zadds: list[Command] = [("ZADD", registry, "NX", *pairs) for registry, pairs in members.items()]
    return Batch([*zadds, *increments], transaction=True, bulk=True)
