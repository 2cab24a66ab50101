"""Moving counters written under one shard count to the configured one (``slicecount
reshard --from N``). Pure operations; the walk that drives them through a Store is
``slicecount.cleaner.reshard``.

The shard of a series is a hash of its id modulo the shard count, so a new count puts most
series under other keys: written counts would look lost. A move takes each counter of the old
layout to the new one, exactly once whatever fails, in three atomic steps (a cluster puts the
two layouts on different slots, so one step cannot do it all):

1. claim, in the old slot: the counts taken and a fresh token are remembered beside the counter
   (an intent); an intent already there (a run cut short) is finished instead, with its token;
2. land, in the new slot: the counts are added to the new counter, its registry member with
   them, unless the token's marker says they landed before (a lost reply, a rerun);
3. release, in the old slot: the counts taken come out of the old counter, which is forgotten
   when empty; counts a writer of the old layout added meanwhile stay for the next run.

Registry keys name only a shard's number, so before the move the new layout already sees the
series whose number is below the old count (their counters stay where they are when the number
is theirs in both layouts). Writers should run with the new count before the move (counts
they add to the old layout later are moved by running it again). Readers see a series' old
counts once it has moved.

In the blocks layout a series (member ``0:<series>``) moves whole, in the same three steps
(``move_series``): the claim takes its open hash and block out of the old layout into the
intent; the landing adds the open counts to the new open hash and merges the block into the
new one (decoded here, written by the script only if the new block's generation is still the
one read: a cleaner's compaction in between means merging again); the release drops the intent.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from slicecount.core import blocks, splices
from slicecount.core.frames import FRAME_SLICES
from slicecount.core.keys import EVERY_PRECISION, KeySpace
from slicecount.errors import ConfigurationError
from slicecount.operations.batches import Batch, Context, Operation, ScriptCall, pairs

LANDED_SECONDS = 7 * 86_400
"""How long a landed marker is kept: a move cut short and rerun within a week never doubles."""
PAGE = 500


@dataclass(frozen=True)
class Moved:
    """What moving one counter did."""

    slices: int  # slices taken from the old counter
    landed: bool  # False: the counts had landed in a run before (this one only released them)
    left: int  # slices the old counter still holds (written meanwhile: run again)


def old_layout(ctx: Context, shards: int) -> KeySpace:
    """The key layout of ``shards`` beside the configured one; ValueError when they are equal."""
    if shards < 1 or shards == ctx.settings.shards:
        raise ConfigurationError(
            f"--from must be a shard count >= 1 other than the configured "
            f"{ctx.settings.shards}, got {shards!r}"
        )
    return KeySpace(ctx.settings.prefix, shards)


def members(ctx: Context, old: KeySpace, shard: int, start: str) -> Operation[list[str]]:
    """Up to PAGE registry members of the old layout's ``shard`` from lex ``start``."""
    (found,) = yield Batch([("ZRANGEBYLEX", old.known(shard), start, "+", "LIMIT", 0, PAGE)])
    return list(found)


def move_counter(ctx: Context, old: KeySpace, shard: int, member: str) -> Operation[Moved | None]:
    """Move the counter of registry ``member`` of the old layout's ``shard`` (see above);
    None when both layouts name the same key (the series keeps its shard number)."""
    keys = ctx.keys
    precision, series_id = keys.parse_member(member)
    if precision == EVERY_PRECISION:
        return (yield from move_series(ctx, old, shard, series_id))
    source, intent, registry = (
        old.counter_for_member(shard, member),
        old.move_intent(shard, member),
        old.known(shard),
    )
    if source == keys.counter(precision, series_id):
        return None
    (flat,) = yield Batch([ScriptCall("move_claim", (source, intent), (secrets.token_hex(8),))])
    taken = dict(pairs(flat))
    token = taken.pop("token", None)
    landed = False
    if token is not None:
        target = keys.shard(series_id)
        counts = [item for pair in taken.items() for item in pair]
        call = ScriptCall(
            "move_land",
            (
                keys.move_landed(target, token),
                keys.counter(precision, series_id),
                keys.known(target),
            ),
            (member, LANDED_SECONDS, *counts),
        )
        (done,) = yield Batch([call])
        landed = done == 1
    negated = [item for s, n in taken.items() for item in (s, str(-int(n)))]
    release = ScriptCall("move_release", (source, intent, registry), (member, *negated))
    (left,) = yield Batch([release])
    return Moved(len(taken), landed, int(left))


def move_series(ctx: Context, old: KeySpace, shard: int, series_id: str) -> Operation[Moved | None]:
    """Move a blocks-layout series of the old layout's ``shard``: its open hash and its block
    (see above); None when both layouts name the same keys. ``slices`` counts the open fields
    and the block's nonzero slices, every precision."""
    keys = ctx.keys
    # the keys the registry of ``shard`` names: the new layout's own when that registry is
    # both layouts' (a shard number below both counts)
    member, source = keys.series_member(series_id), old.open(series_id, shard)
    if source == keys.open(series_id):
        return None
    old_block = old.block(series_id, shard)
    (held,) = yield Batch([("GET", old_block)], raw=True)
    _check_block(held or b"", old_block)  # a foreign value stays where it is (before the claim)
    intent = old.move_intent(shard, member)
    claim = ScriptCall("move_series_claim", (intent, source, old_block), (secrets.token_hex(8),))
    (flat,) = yield Batch([claim], raw=True)
    taken = dict(pairs(flat))
    token, block = taken.pop(b"token", b"").decode(), taken.pop(b"block", b"")
    opened = [(f.decode()[2:], n.decode()) for f, n in taken.items() if f.startswith(b"o:")]
    landed = False
    if token:
        landed = yield from _land(ctx, series_id, token, block, opened)
    release = ScriptCall(
        "move_series_release", (intent, source, old_block, old.known(shard)), (member, token)
    )
    (left,) = yield Batch([release])
    return Moved(len(opened) + _slices(block), landed, int(left))


def _land(
    ctx: Context, series_id: str, token: str, block: bytes, opened: list[tuple[str, str]]
) -> Operation[bool]:
    """Add the open counts and merge the block into the new layout, once per token."""
    keys = ctx.keys
    target, new_block = keys.shard(series_id), keys.block(series_id)
    script_keys = (
        keys.move_landed(target, token),
        keys.open(series_id),
        new_block,
        keys.known(target),
    )
    counts = [item for pair in opened for item in pair]
    while True:
        generation, merged = b"", b""
        if block:
            (current,) = yield Batch([("GET", new_block)], raw=True)
            current = current or b""
            _check_block(current, new_block)
            generation, merged = current[4:8], _merged(ctx, current, block)
        args = (keys.series_member(series_id), LANDED_SECONDS, generation, merged, *counts)
        (done,) = yield Batch([ScriptCall("move_series_land", script_keys, args)])
        if int(done) >= 0:
            return int(done) == 1


def _merged(ctx: Context, current: bytes, moved: bytes) -> bytes:
    """The block holding the slices of both (every precision of the ladder, summed)."""
    frames: dict[tuple[int, int], list[int]] = {}
    ladder = ctx.settings.precisions
    for data in (current, moved):
        for precision, slices in blocks.everything(data).items():
            period = precision * FRAME_SLICES
            for start, n in slices.items():
                values = frames.setdefault((precision, start - start % period), [0] * FRAME_SLICES)
                values[(start % period) // precision] += n
    header = blocks.parse_header(current)
    return splices.plan_splice(header, ladder, frames, {}).apply(current)


def _check_block(data: bytes, key: str) -> None:
    try:
        blocks.everything(data)
    except blocks.BlockError as exc:
        raise ConfigurationError(f"{key} does not hold a block ({exc}): not moved") from None


def _slices(block: bytes) -> int:
    return sum(len(slices) for slices in blocks.everything(block).values()) if block else 0


def move_annotations(ctx: Context, old: KeySpace) -> Operation[int]:
    """Copy the old layout's annotations (ZADD of the same members: twice is once), then drop
    them; how many."""
    source, target = old.annotations(), ctx.keys.annotations()
    if source == target:
        return 0
    (flat,) = yield Batch([("ZRANGE", source, 0, -1, "WITHSCORES")])
    scored = [item for member, score in pairs(flat) for item in (score, member)]
    if scored:
        yield Batch([("ZADD", target, *scored)])
        yield Batch([("DEL", source)])
    return len(scored) // 2
