"""The cleaner's Redis operations: trim a chunk, the lease, the cutoffs, old annotations. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from slicecount.batches import Batch, Context, Operation, ScriptCall, pairs
from slicecount.errors import ConfigurationError

MODES = ("full", "incremental")
""""full": list every hash's fields; "incremental": delete the slices expired since by name."""


@dataclass(frozen=True)
class TrimChunk:
    """What one call of the trim script did."""

    next_start: str | None  # the lex cursor to continue from; None when the walk is done
    scanned: int
    deleted: int
    removed: int
    full: int
    bad: list[str] = field(default_factory=list)


def trim_chunk(
    ctx: Context,
    precision: int,
    start: str | None,
    chunk: int,
    mode: str,
    cutoff: int,
    first: int,
    horizon: int,
    shard: int = 0,
) -> Operation[TrimChunk]:
    """One atomic trim of up to ``chunk`` hashes of ``precision`` from lex cursor ``start``
    (the cleaner's step): slices before ``cutoff`` or after ``horizon`` go, emptied hashes leave
    the registry."""
    ctx.settings.check_precision(precision)
    if mode not in MODES or chunk < 1 or horizon < cutoff:
        raise ConfigurationError(
            f"trim needs mode full|incremental, chunk >= 1 and horizon >= cutoff, got {mode!r}, "
            f"{chunk!r}, {horizon!r} < {cutoff!r}"
        )
    keys = ctx.keys
    low, high = keys.lex_range_precision(precision)
    # a hash longer than retention holds slices from before the cutoff (a late write or a
    # backfill: HDEL by name would miss them) or ahead of the clock: list it in full
    most = ctx.settings.retention_for(precision)
    call = ScriptCall(
        "trim",
        (keys.known(shard),),
        (keys.counter_prefix(shard), start or low, high, chunk, mode, cutoff, most, first,
         precision, horizon),
    )  # fmt: skip
    (reply,) = yield Batch([call])
    last, scanned, deleted, removed, full, *bad = reply
    next_start = keys.lex_after(last) if last else None
    return TrimChunk(next_start, scanned, deleted, removed, full, list(bad))


def acquire_lease(ctx: Context, pass_index: int, owner: str, ttl_ms: int) -> Operation[bool]:
    """SET NX PX: True for the one cleaner that gets to do pass ``pass_index``."""
    key = ctx.keys.cleaner_lease(pass_index)
    (reply,) = yield Batch([("SET", key, owner, "NX", "PX", ttl_ms)])
    return reply is not None


def cleaner_cutoffs(ctx: Context) -> Operation[dict[int, int]]:
    """precision -> the cutoff the last complete cleaner pass trimmed to."""
    (flat,) = yield Batch([("HGETALL", ctx.keys.cleaner_cutoffs())])
    out = {}
    for precision, cutoff in pairs(flat):
        try:
            out[int(precision)] = int(cutoff)
        except ValueError:
            continue
    return out


def save_cleaner_cutoff(ctx: Context, precision: int, cutoff: int) -> Operation[None]:
    """Remember that a complete pass trimmed ``precision`` up to ``cutoff``."""
    yield Batch([("HSET", ctx.keys.cleaner_cutoffs(), precision, cutoff)])


def forget_writers(ctx: Context, before: float, shard: int = 0) -> Operation[int]:
    """Forget the writers of ``shard`` quiet since ``before`` (epoch seconds); how many."""
    keys = ctx.keys
    call = ScriptCall("writers", (keys.writers(shard),), (int(before), keys.writer("", shard)))
    (forgotten,) = yield Batch([call])
    return int(forgotten)


def trim_annotations(ctx: Context, before: float) -> Operation[int]:
    """Drop annotations older than ``before`` (epoch seconds); return how many went."""
    before_ms = int(before * 1000)
    (removed,) = yield Batch(
        [("ZREMRANGEBYSCORE", ctx.keys.annotations(), "-inf", f"({before_ms}")]
    )
    return int(removed)
