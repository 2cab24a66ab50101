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
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from slicecount.core.keys import KeySpace
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
    """The key layout of ``shards`` beside the configured one; ValueError when they are equal,
    or in the blocks layout (a block is no sum of increments that a move can add up exactly
    once in another slot: it would need the cleaner's compaction on both sides)."""
    if ctx.settings.layout != "book":
        raise ConfigurationError(
            f"reshard supports the book layout only, not layout={ctx.settings.layout!r}: "
            "keep the shard count of a blocks-layout store"
        )
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
    source, intent, registry = (
        old.counter_for_member(shard, member), old.move_intent(shard, member), old.known(shard)
    )  # fmt: skip
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
            (keys.move_landed(target, token), keys.counter(precision, series_id),
             keys.known(target)),
            (member, LANDED_SECONDS, *counts),
        )  # fmt: skip
        (done,) = yield Batch([call])
        landed = done == 1
    negated = [item for s, n in taken.items() for item in (s, str(-int(n)))]
    release = ScriptCall("move_release", (source, intent, registry), (member, *negated))
    (left,) = yield Batch([release])
    return Moved(len(taken), landed, int(left))


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
