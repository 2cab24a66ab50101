"""The blocks layout's compaction: sealed open slices moved into their series' block. Pure.

Writers add to a small hash per series (``open:``, finest slice start -> count); the cleaner
moves the fields older than the shard's sealed point (``cleaner/plan.py: sealed_point``) into
the series' block (``core/blocks.py``), every precision at once, and drops the block's frames
past retention. ``lua/compact.lua`` rewrites each series in one atomic step that takes the
moved counts out of the hash as they enter the block, so readers, who always add block and
hash, never see a count twice or miss one. The block's generation is the step's
compare-and-set: a plan made on a block another cleaner has rewritten since is refused, and
the next pass plans again. Only the frames a move touches are read and decoded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slicecount.core import blocks, splices
from slicecount.core.keys import EVERY_PRECISION
from slicecount.core.slices import oldest_kept
from slicecount.operations.batches import Batch, Context, Operation, ScriptCall, pairs
from slicecount.operations.compaction_reads import Notes, SeriesRead, read_frames, read_page

SEAL_GRACE = 10
"""Seconds behind the clock before which a slice is sealed when no writer's mark holds it."""
WRITER_LIVE = 30
"""Seconds a writer's mark holds sealing back after its last write (a writer quiet that long
is not holding anything back; its late writes, if any, stay open until the next pass)."""
SERIES_UNITS = 8
"""What rewriting a series costs the script beside its fields, in fields' worth (its GET,
SET, HLEN and the calls around them), measured on the seeded traffic."""
BYTES_PER_UNIT = 512
"""Bytes of block written that cost the script about one field's worth."""
FIRST_BUDGET = 1000
"""Units of one script call before the cleaner has learnt their cost (about 1 ms)."""


@dataclass
class Compacted:
    """What compacting some series did."""

    scanned: int = 0
    compacted: int = 0  # series rewritten
    moved: int = 0  # open fields moved into blocks
    expired: int = 0  # open fields dropped: older than every precision's retention
    written: int = 0  # bytes of the blocks written
    conflicts: int = 0  # series skipped: the block changed since it was read
    removed: int = 0  # series left with nothing: registry member removed
    unfinished: list[str] = field(default_factory=list)  # members with more to move
    bad: list[str] = field(default_factory=list)  # keys of foreign data, left alone
    holds: list[tuple[int, float]] = field(default_factory=list)  # per call: units, seconds
    calls: int = 0

    @property
    def held(self) -> float:
        """Seconds the longest call held Redis (the script's own server time)."""
        return max((seconds for _, seconds in self.holds), default=0.0)


def writer_marks(
    ctx: Context, shard: int, now: float
) -> Operation[tuple[dict[str, float], dict[str, float]]]:
    """(writer -> its mark, writer -> its last write) of the writers of ``shard`` that wrote in
    the last ``WRITER_LIVE`` seconds: what ``sealed_point`` needs."""
    keys = ctx.keys
    live_since = int(now) - WRITER_LIVE
    (flat,) = yield Batch(
        [("ZRANGEBYSCORE", keys.writers(shard), live_since, "+inf", "WITHSCORES")]
    )
    live = {str(writer): float(score) for writer, score in pairs(flat)}
    if not live:
        return {}, live
    scores = yield Batch([("ZSCORE", keys.marks(shard), writer) for writer in live])
    marks = {w: float(s) for w, s in zip(live, scores, strict=True) if s is not None}
    return marks, live


def series_page(ctx: Context, shard: int, after: str | None, size: int) -> Operation[list[str]]:
    """The next ``size`` blocks-layout members (``0:<series>``) of ``shard``'s registry after
    ``after`` (None: from the first)."""
    keys = ctx.keys
    low, high = keys.lex_range_precision(EVERY_PRECISION)
    start = low if after is None else keys.lex_after(after)
    (page,) = yield Batch([("ZRANGEBYLEX", keys.known(shard), start, high, "LIMIT", 0, size)])
    return [str(member) for member in page]


def compact(
    ctx: Context,
    shard: int,
    members: Sequence[str],
    sealed: int,
    now: float,
    budget: int = FIRST_BUDGET,
) -> Operation[Compacted]:
    """Move the open fields before ``sealed`` of the series ``members`` (registry members of
    ``shard``) into their blocks, dropping what is past retention at ``now``: one snapshot
    read, then script calls of at most ``budget`` units each (a series costs
    ``SERIES_UNITS``, one a field it moves, one per ``BYTES_PER_UNIT`` of block it writes)."""
    keys, ladder = ctx.keys, ctx.settings.precisions
    keep_from = {p: oldest_kept(p, ctx.settings.retention_for(p), now) for p in ladder}
    done = Compacted(scanned=len(members))
    found: list[SeriesRead] = []
    for member in members:
        try:
            precision, series_id = keys.parse_member(member)
        except ValueError:
            precision, series_id = -1, ""
        if precision != EVERY_PRECISION or keys.shard(series_id) != shard:
            # not ours, or left by another shard count (``slicecount reshard`` moves those)
            done.bad.append(f"{keys.known(shard)} member {member!r}")
            continue
        found.append(SeriesRead(member, keys.open(series_id), keys.block(series_id)))
    if not found:
        return done
    notes = Notes(done.bad)
    kept = yield from read_page(found, sealed, notes)
    frames = yield from read_frames(kept, ladder, keep_from, notes)
    done.conflicts += notes.conflicts
    planned = [
        _plan(s, ladder, frames[s.block_key], keep_from) for s in kept if s.block_key in frames
    ]
    for call in _calls(planned, budget):
        keys_of_call = [keys.known(shard)]
        args: list[Any] = []
        for one in call:
            keys_of_call += [one.series.open_key, one.series.block_key]
            args += one.args
        (reply,) = yield Batch([ScriptCall("compact", tuple(keys_of_call), tuple(args))])
        outcomes, removed, written, held = reply
        done.calls += 1
        done.removed += removed
        done.written += written
        done.holds.append((sum(one.units for one in call), held / 1e6))
        for one, outcome in zip(call, outcomes, strict=True):
            _count(done, one.series, outcome, min(keep_from.values()))
    return done


@dataclass
class _Planned:
    """One series' rewrite: its script arguments and its cost in units (``budget``)."""

    series: SeriesRead
    args: list[Any]
    units: int


def _plan(
    series: SeriesRead,
    ladder: Sequence[int],
    frames: dict[tuple[int, int], list[int]],
    keep_from: dict[int, int],
) -> _Planned:
    splice = splices.plan_splice(series.header, ladder, frames, keep_from)
    packed = splice.pieces[0]
    assert isinstance(packed, bytes)  # a splice starts with its new header
    pieces = [] if blocks.is_empty(blocks.parse_header(packed)) else splice.pieces
    args: list[Any] = [series.member, splice.expected, len(pieces)]
    size = 0
    for piece in pieces:
        args += ["", piece] if isinstance(piece, bytes) else list(piece)
        size += len(piece) if isinstance(piece, bytes) else piece[1]
    args.append(len(series.fields))
    for name, value, _, _ in series.fields:
        args += [name, value]
    return _Planned(series, args, SERIES_UNITS + len(series.fields) + size // BYTES_PER_UNIT)


def _calls(planned: Sequence[_Planned], budget: int) -> list[list[_Planned]]:
    """The rewrites grouped into script calls of at most ``budget`` units (one at least)."""
    calls: list[list[_Planned]] = []
    units = budget
    for one in planned:
        if units + one.units > budget:
            calls.append([])
            units = 0
        calls[-1].append(one)
        units += one.units
    return calls


def _count(done: Compacted, series: SeriesRead, outcome: int, oldest: int) -> None:
    """What the script did to one series, in the figures."""
    if outcome == 1:
        done.compacted += 1
        expired = sum(1 for *_, second, _ in series.fields if second < oldest)
        done.expired += expired
        done.moved += len(series.fields) - expired
        if series.more:
            done.unfinished.append(series.member)
    elif outcome == 0:
        done.conflicts += 1
    else:
        done.bad.append(f"{series.block_key} or {series.open_key}: changed type")
