"""A write prepared: a buffer of counts as chunks, one shard each, every chunk one transaction
(``writing.write_chunk`` applies it). Pure.

Counts of the same slice are summed and zero sums left out; a sum past 64 bits is left out and
counted. In the book's layout a series is one HINCRBY per precision (``keys.layout``); in the
blocks layout one, into its open hash at the finest precision (``keys.open_layout``).

Exemplars go in the chunk of their series' shard, after its increments: each replaces what its
(series, minute) held (``ZREMRANGEBYLEX`` and ``ZADD`` on the shard's sorted set), then the set
is cut to ``max_exemplars``, oldest first, and its expiry pushed on (a set no one wrote to for
``exemplar_retention`` holds nothing younger). Plain commands: a chunk applied once applies them
once, and a copy sent again is dropped whole as its counts are.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from slicecount.core import exemplars as exemplar_codec
from slicecount.core.exemplars import Exemplar, slot_of
from slicecount.core.histogram import SUM_SUFFIX
from slicecount.core.key_layouts import Layout
from slicecount.core.keys import KeySpace
from slicecount.operations.batches import Batch, Command, Context
from slicecount.operations.checks import INT64_MAX, INT64_MIN

logger = logging.getLogger("slicecount")

CHUNK_INCREMENTS = 50_000
"""HINCRBYs per transaction: big enough to amortise, small enough not to stall Redis (about
40 ms of server time)."""
Buffer = Mapping[int, Mapping[str, int]]
"""What a Recorder buffers: epoch second -> series id -> count."""
ExemplarBuffer = Sequence[tuple[str, Exemplar]]
"""What a Recorder keeps of exemplars: (bucket series id, exemplar), a minute's last of each."""


@dataclass
class Chunk:
    """One transaction's worth of a write, all in one shard: the registry members to add and
    the increments, one HINCRBY per (precision, series, slice)."""

    shard: int
    members: dict[str, list[Any]] = field(default_factory=dict)  # registry -> 0, member, ...
    commands: list[Command] = field(default_factory=list)  # the HINCRBYs
    events: int = 0
    """Events it counts (for a log line, should it be lost): each series' n once, whatever
    its precisions, and no histogram sum (micro-units)."""
    oldest: int | None = None
    """The oldest second it counts (the blocks layout's mark: ``write_chunk``)."""
    samples: list[Command] = field(default_factory=list)
    """The exemplars' commands, after the increments (``prepare``)."""

    @property
    def increments(self) -> int:
        return len(self.commands)

    @property
    def counting(self) -> int:
        """How many of its transaction's first replies are the registry's and the counts'
        (the exemplars' come after them)."""
        return len(self.members) + len(self.commands)

    def add(self, registry: str, member: str, key: str, pairs: list[tuple[int, int]]) -> None:
        """One hash: its registry member and its (slice start, n) increments."""
        self.members.setdefault(registry, []).extend((0, member))
        self.commands += [("HINCRBY", key, start, n) for start, n in pairs]
        oldest = min(start for start, _ in pairs)
        if self.oldest is None or oldest < self.oldest:
            self.oldest = oldest

    def add_series(self, layout: Layout, second: int, n: int) -> None:
        """One series counted at one second: a hash and one increment per precision (the
        usual flush; written out for speed)."""
        members = self.members.setdefault(layout.registry, [])
        commands = self.commands
        for precision, member, key in layout.counters:
            members += (0, member)
            commands.append(("HINCRBY", key, second - second % precision, n))

    def transaction(self, *after: Command) -> Batch:
        """MULTI, the members (ZADD NX per registry), the increments, ``after``, EXEC."""
        zadds: list[Command] = [("ZADD", r, "NX", *pairs) for r, pairs in self.members.items()]
        return Batch([*zadds, *self.commands, *self.samples, *after], transaction=True, bulk=True)


class _Chunks:
    """Chunks being filled, one open per shard."""

    def __init__(self) -> None:
        self.open: dict[int, Chunk] = {}
        self.done: list[Chunk] = []

    def of(self, shard: int) -> Chunk:
        chunk = self.open.get(shard)
        if chunk is None:
            chunk = self.open[shard] = Chunk(shard)
        return chunk

    def close_if_full(self, chunk: Chunk) -> None:
        if chunk.increments >= CHUNK_INCREMENTS:
            self.done.append(self.open.pop(chunk.shard))

    def all(self) -> list[Chunk]:
        return self.done + list(self.open.values())


class Prepared(NamedTuple):
    """A write ready to send: its chunks, and the increments left out because they do not fit
    in 64 bits (a sum of many huge counts)."""

    chunks: list[Chunk]
    out_of_range: int
    failed: int = 0  # entries left out by prepare_each()


def layouts(ctx: Context) -> Callable[[str, tuple[int, ...]], Layout]:
    """Where the write path counts a series: ``keys.layout`` (the book's hash per precision)
    or ``keys.open_layout`` (the blocks layout's open hash), chosen once per flush."""
    keys: KeySpace = ctx.keys
    return keys.open_layout if ctx.settings.layout == "blocks" else keys.layout


def prepare(ctx: Context, buffer: Buffer, exemplars: ExemplarBuffer | None = None) -> Prepared:
    """A Recorder's buffer (or a checked batch) as chunks: counts of the same slice summed,
    zero sums left out, one chunk per shard and ``CHUNK_INCREMENTS``; ``exemplars`` in the
    chunks of their shards."""
    precisions = ctx.settings.precisions
    layout_of = layouts(ctx)
    chunks = _Chunks()
    out_of_range = 0
    if len(buffer) == 1:  # the usual flush: one second, nothing to sum
        ((second, bucket),) = buffer.items()
        for series_id, n in bucket.items():
            if not n:
                continue
            if not INT64_MIN <= n <= INT64_MAX:
                out_of_range += len(layout_of(series_id, precisions).counters)
                continue
            layout = layout_of(series_id, precisions)
            chunk = chunks.of(layout.shard)
            chunk.add_series(layout, second, n)
            chunk.events += _events(series_id, n)
            chunks.close_if_full(chunk)
        for chunk in chunks.open.values():
            chunk.oldest = second
        for chunk in chunks.done:
            chunk.oldest = second
        _add_exemplars(ctx, chunks, exemplars)
        return Prepared(chunks.all(), out_of_range)
    for shard, registry, member, key, slices, events in _summed(ctx, buffer):
        fitting = [(s, n) for s, n in slices.items() if n and INT64_MIN <= n <= INT64_MAX]
        out_of_range += sum(1 for n in slices.values() if not INT64_MIN <= n <= INT64_MAX)
        if fitting:
            chunk = chunks.of(shard)
            chunk.add(registry, member, key, fitting)
            chunk.events += events
            chunks.close_if_full(chunk)
    _add_exemplars(ctx, chunks, exemplars)
    return Prepared(chunks.all(), out_of_range)


def _add_exemplars(ctx: Context, chunks: _Chunks, exemplars: ExemplarBuffer | None) -> None:
    """Each exemplar into its shard's open chunk (one made if the counts left none; two
    commands weigh one increment towards ``CHUNK_INCREMENTS``), then each such chunk's set
    cut to the bound and its expiry pushed on."""
    bound = ctx.settings.max_exemplars
    if not exemplars or bound <= 0:
        return
    keys = ctx.keys
    touched: list[Chunk] = []
    for series_id, exemplar in exemplars:
        shard = keys.shard(series_id)
        chunk = chunks.of(shard)
        if not chunk.samples:
            touched.append(chunk)
        key = keys.exemplars(shard)
        prefix = keys.exemplar_slot(slot_of(exemplar.time), series_id)
        low, high = keys.lex_range_slot(prefix)
        chunk.samples.append(("ZREMRANGEBYLEX", key, low, high))
        chunk.samples.append(("ZADD", key, 0, prefix + exemplar_codec.encode(exemplar)))
        if chunk.increments + len(chunk.samples) // 2 >= CHUNK_INCREMENTS:
            chunks.done.append(chunks.open.pop(shard))
    retention = ctx.settings.exemplar_retention
    for chunk in touched:
        key = keys.exemplars(chunk.shard)
        chunk.samples.append(("ZREMRANGEBYRANK", key, 0, -bound - 1))
        chunk.samples.append(("PEXPIRE", key, retention * 1000))


def prepare_safely(
    ctx: Context, buffer: Buffer, exemplars: ExemplarBuffer | None = None
) -> Prepared:
    """``prepare()``, or if that ever fails (a bug: the Recorder checks every entry), the same
    entry by entry, so that one bad entry costs only itself (``failed`` counts them; the
    exemplars are left out then: samples, not counts)."""
    try:
        return prepare(ctx, buffer, exemplars)
    except Exception:
        logger.exception("slicecount could not prepare a flush; isolating the bad entries")
        return prepare_each(ctx, buffer)


def prepare_each(ctx: Context, buffer: Buffer) -> Prepared:
    """``prepare()`` of the entries that can be prepared, the others left out (and counted):
    the path a flush takes if preparing it whole ever fails, so one bad entry never costs the
    others."""
    good: dict[int, dict[str, int]] = {}
    failed = 0
    for second, bucket in buffer.items():
        for series_id, n in bucket.items():
            try:
                prepare(ctx, {second: {series_id: n}})
            except Exception:
                failed += 1
                continue
            good.setdefault(second, {})[series_id] = n
    chunks, out_of_range, _ = prepare(ctx, good)
    return Prepared(chunks, out_of_range, failed)


def _summed(
    ctx: Context, buffer: Buffer
) -> Iterable[tuple[int, str, str, str, dict[int, int], int]]:
    """(shard, registry, member, hash, {slice start: n}, events) of every counter a buffer of
    several seconds touches (a series' events go with its finest precision's counter)."""
    precisions, layout_of = ctx.settings.precisions, layouts(ctx)
    sums: dict[str, tuple[int, str, str, dict[int, int]]] = {}
    events: dict[str, int] = {}
    for second, bucket in buffer.items():
        for series_id, n in bucket.items():
            registry, counters, shard = layout_of(series_id, precisions)
            for precision, member, counter in counters:
                entry = sums.get(counter)
                if entry is None:
                    entry = sums[counter] = (shard, registry, member, {})
                slices = entry[3]
                start = second - second % precision
                slices[start] = slices.get(start, 0) + n
            finest = counters[0][2]
            events[finest] = events.get(finest, 0) + _events(series_id, n)
    for counter, (shard, registry, member, slices) in sums.items():
        yield shard, registry, member, counter, slices, events.get(counter, 0)


def _events(series_id: str, n: int) -> int:
    """The events ``n`` stands for: none for a histogram's sum (micro-units, not events)."""
    return 0 if series_id.partition("{")[0].endswith(SUM_SUFFIX) else n
