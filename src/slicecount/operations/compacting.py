"""The blocks layout's compaction: sealed open slices moved into their series' block. Pure.

Writers add to a small hash per series (``open:``, finest slice start -> count); the cleaner
moves the fields older than the shard's sealed point (``cleaner/schedule.py: sealed_point``) into
the series' block (``core/blocks.py``), every precision at once, and drops the block's frames
past retention. ``lua/compact.lua`` rewrites each series in one atomic step that takes the
moved counts out of the hash as they enter the block, so readers, who always add block and
hash, never see a count twice or miss one. The block's generation is the step's
compare-and-set: a plan made on a block another cleaner has rewritten since is refused, and
the next pass plans again. Only the frames a move touches are read and decoded.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from slicecount.core import blocks, splices
from slicecount.core.blocks import BlockError, Header
from slicecount.core.frames import FRAME_SLICES, decode_frame
from slicecount.core.keys import EVERY_PRECISION
from slicecount.core.slices import oldest_kept
from slicecount.operations.batches import Batch, Context, Operation, ScriptCall, pairs

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
EDGE_MARGIN = 60
"""Seconds before retention's edge that a pass keeps (frames dropped whole, the frame at the
edge cut, ``_at_the_edge``): a reader whose clock runs behind the cleaner's still finds every
slice its precision choice asks for."""
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
    # (less a margin: a reader whose clock runs behind this one's finds what it asks for)
    keep_from = {
        p: oldest_kept(p, ctx.settings.retention_for(p), now) - EDGE_MARGIN for p in ladder
    }
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


# -- what a compaction plans on, read from Redis: a page's open hashes and blocks in one
# snapshot, the rest of the headers longer than the snapshot read, and the frames its moves
# touch beyond it -------------------------------------------------------------------------


PREFIX_BYTES = 4096
"""What the snapshot reads of each block: the whole of most blocks (2 h of a busy series take
~800 bytes), so the frames a move touches are there already; the header of one of up to ~2000
frames."""
MAX_FIELDS = 500
"""Most fields of one series moved by one call (after an outage a hash may hold a day of
seconds: the rest moves by the next call, so no call holds Redis long)."""


@dataclass
class Notes:
    """What the reads found beside the data: foreign keys, blocks changed under the plan."""

    bad: list[str]
    conflicts: int = 0


@dataclass
class SeriesRead:
    """One series being planned: what its open hash and its block hold."""

    member: str
    open_key: str
    block_key: str
    fields: list[tuple[bytes, bytes, int, int]] = field(default_factory=list)
    prefix: bytes = b""
    header: Header = field(default_factory=Header)
    open_count: int = 0  # fields in the hash, sealed or not
    more: bool = False  # sealed fields left for a later call (MAX_FIELDS)
    bad: bool = False  # foreign data under one of its keys: left alone


def read_page(
    found: Sequence[SeriesRead], sealed: int, notes: Notes
) -> Operation[list[SeriesRead]]:
    """Read the series of a page in one snapshot (MULTI): each open hash and each block's
    first ``PREFIX_BYTES``, so that the generation read with the fields is the one the plan
    expects (a later read could see another cleaner's move); then the rest of longer headers.
    The series that can be planned, their sealed fields kept."""
    reads: list[Any] = []
    for series in found:
        reads += [("HGETALL", series.open_key), ("GETRANGE", series.block_key, 0, PREFIX_BYTES - 1)]
    replies = yield Batch(reads, transaction=True, bulk=True, raw=True)
    kept: list[SeriesRead] = []
    for k, series in enumerate(found):
        flat, prefix = replies[2 * k], replies[2 * k + 1]
        if isinstance(flat, Exception) or isinstance(prefix, Exception):
            notes.bad.append(f"{series.open_key} or {series.block_key}: not a hash and a string")
        else:
            _read_fields(series, flat, sealed, notes)
            series.prefix = bytes(prefix)
            kept.append(series)
    yield from _read_headers(kept, notes)
    return [series for series in kept if not series.bad]


def _read_fields(series: SeriesRead, flat: Sequence[bytes], sealed: int, notes: Notes) -> None:
    """Keep the sealed fields of an HGETALL reply, oldest first (``MAX_FIELDS`` of them)."""
    for name, value in pairs(flat):
        series.open_count += 1
        try:
            second, n = int(name), int(value)
        except ValueError:
            if len(notes.bad) < 10:
                notes.bad.append(f"{series.open_key} field {name!r}")
            continue
        if second < sealed:
            series.fields.append((name, value, second, n))
    series.fields.sort(key=lambda f: f[2])
    if len(series.fields) > MAX_FIELDS:
        del series.fields[MAX_FIELDS:]
        series.more = True


def _read_headers(found: Sequence[SeriesRead], notes: Notes) -> Operation[None]:
    """Parse each block's header, reading the rest of the headers longer than the prefix."""
    asked = dict.fromkeys((s.block_key for s in found), PREFIX_BYTES)
    # the generation of the snapshot the fields were read with: a header read later that
    # differs belongs to another cleaner's rewrite (the plan would add the fields again)
    snapshot = {s.block_key: _generation(s.prefix) for s in found}
    pending = list(found)
    while pending:
        again: list[SeriesRead] = []
        for series in pending:
            try:
                need = blocks.header_size(series.prefix) if series.prefix else 0
                if need > len(series.prefix) == asked[series.block_key]:
                    asked[series.block_key] = need  # a long header: read the rest of it
                    again.append(series)
                    continue
                series.header = blocks.parse_header(series.prefix)
                if series.header.generation != snapshot[series.block_key]:
                    series.bad = True  # not foreign: changed, so retried next pass
                    notes.conflicts += 1
            except BlockError as exc:
                series.bad = True
                notes.bad.append(f"{series.block_key} ({exc})")
        if not again:
            return
        replies = yield Batch(
            [("GETRANGE", s.block_key, 0, asked[s.block_key] - 1) for s in again], raw=True
        )
        for series, prefix in zip(again, replies, strict=True):
            series.prefix = bytes(prefix)
        pending = again


def _generation(prefix: bytes) -> int:
    """The generation in a block's first bytes (0: no block, or too short to be one)."""
    return blocks.HEADER.unpack_from(prefix)[3] if len(prefix) >= blocks.HEADER.size else 0


def read_frames(
    found: Sequence[SeriesRead], ladder: Sequence[int], keep_from: dict[int, int], notes: Notes
) -> Operation[dict[str, dict[tuple[int, int], list[int]]]]:
    """block key -> the frames each series' move changes, decoded (only those), with the
    sealed counts added; only the series with something to do are in it."""
    oldest = min(keep_from.values())
    wanted: list[tuple[SeriesRead, int, int, int, int]] = []  # series, precision, start, at, len
    plans: dict[str, dict[tuple[int, int], list[int]]] = {}
    for series in found:
        frames: dict[tuple[int, int], list[int]] = {}
        for p in ladder:
            period = p * FRAME_SLICES
            for start in {s - s % period for *_, s, _ in series.fields if s >= oldest}:
                if start + period <= keep_from[p]:
                    continue  # a frame past this precision's retention: nothing to add
                _, n, offset, length = series.header.frames(p, start, start + 1)
                frames[(p, start)] = [0] * FRAME_SLICES
                if not (n and length):
                    continue
                if offset + length <= len(series.prefix):  # read with the snapshot already
                    try:
                        data = series.prefix[offset : offset + length]
                        frames[(p, start)] = decode_frame(data)
                    except BlockError:
                        frames.clear()  # foreign bytes past a valid header: left alone
                        series.bad = True
                        notes.bad.append(f"{series.block_key} (a frame does not decode)")
                        break
                else:
                    wanted.append((series, p, start, offset, length))
            if series.bad:
                break
        if series.bad:
            continue
        empty = not series.prefix and not series.open_count  # its member goes
        if series.fields or empty or _expiring(series.header, ladder, keep_from):
            plans[series.block_key] = frames
            for p, start, offset, length in _at_the_edge(series.header, ladder, keep_from):
                if (p, start) in frames:
                    continue  # counts added to it: cut below with them
                if offset + length <= len(series.prefix):
                    try:
                        _cut_edge(frames, p, start, keep_from[p], series.prefix, offset, length)
                    except BlockError:
                        pass  # foreign bytes: the frame is kept as it is
                else:
                    wanted.append((series, p, start, offset, length))
    replies: list[Any] = []
    if wanted:
        replies = yield Batch(
            [("GETRANGE", w[0].block_key, w[3], w[3] + w[4] - 1) for w in wanted], raw=True
        )
    for (series, p, start, _, length), data in zip(wanted, replies, strict=True):
        if series.block_key not in plans:
            continue
        frames = plans[series.block_key]
        try:
            if len(data) != length:
                raise BlockError(f"a frame of {length} bytes read as {len(data)}")
            if (p, start) in frames:
                frames[(p, start)] = decode_frame(bytes(data))
            else:  # an edge frame (``_at_the_edge``): in the plan only if it changes
                try:
                    _cut_edge(frames, p, start, keep_from[p], bytes(data), 0, length)
                except BlockError:
                    pass  # foreign bytes: the frame is kept as it is, the counts sealed
        except BlockError:  # the block changed under the plan: its script would refuse it
            del plans[series.block_key]
            notes.conflicts += 1
    for series in found:
        if series.block_key not in plans:
            continue
        for p in ladder:
            period = p * FRAME_SLICES
            counts: dict[int, int] = {}
            for *_, second, n in series.fields:
                start = second - second % period
                if second >= oldest and start + period > keep_from[p]:
                    counts[second] = counts.get(second, 0) + n
            splices.add_counts(plans[series.block_key], [p], counts)
        for (p, start), values in plans[series.block_key].items():
            cut = (keep_from[p] - start) // p
            if 0 < cut < FRAME_SLICES:  # the frame at the retention edge: nothing past it
                values[:cut] = [0] * cut
    return plans


def _at_the_edge(
    header: Header, ladder: Iterable[int], keep_from: dict[int, int]
) -> Iterable[tuple[int, int, int, int]]:
    """The oldest frame of each precision when retention ends inside it (its precision, start,
    offset and length): a block being rewritten anyway has it cut there, so that a frame kept
    whole until its last slice expires does not keep up to a frame of expired slices (the
    1 s section held 10 to 22 minutes for 10 of retention)."""
    for p in ladder:
        section = header.section(p)
        if not (section and section.lengths) or section.lengths[0] == 0:
            continue
        start = section.first
        if start < keep_from[p] < start + section.period:
            _, _, offset, length = header.frames(p, start, start + 1)
            yield p, start, offset, length


def _cut_edge(
    frames: dict[tuple[int, int], list[int]],
    precision: int,
    start: int,
    keep_from: int,
    data: bytes,
    offset: int,
    length: int,
) -> None:
    """The frame at the retention edge into the plan, if it holds counts before the edge (it
    is cut with the others): one cut already is left as it is."""
    values = decode_frame(data[offset : offset + length])
    if any(values[: (keep_from - start) // precision]):
        frames[(precision, start)] = values


def _expiring(header: Header, ladder: Iterable[int], keep_from: dict[int, int]) -> bool:
    """Whether a block holds frames past retention, or a precision no longer in the ladder."""
    if any(s.precision not in keep_from and s.lengths for s in header.sections):
        return True
    for p in ladder:
        section = header.section(p)
        if section and section.lengths and section.first + section.period <= keep_from[p]:
            return True
    return False
