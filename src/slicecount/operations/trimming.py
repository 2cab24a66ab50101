"""The cleaner's Redis operations: trim a chunk, the lease, the cutoffs and sweeps, old
annotations and exemplars, quiet writers. Pure. Every script call declares each key it touches (on a
cluster: one slot)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from slicecount.core.exemplars import slot_of
from slicecount.errors import ConfigurationError
from slicecount.operations.batches import Batch, Context, Operation, ScriptCall, pairs

MODES = ("full", "cold", "incremental")
"""How a trim finds the slices to delete (see ``lua/trim.lua``): "full" lists every hash;
"cold" (no usable previous cutoff) deletes by name the run of slices right before the cutoff;
"incremental" deletes by name the slices that expired since the last pass."""
MAX_NAMED = 4000
"""Most slices one trim deletes by name in a hash (past it, listing is as cheap)."""
QUIET_WRITERS = 1000
"""Most quiet writers of a shard forgotten in one pass."""
EXEMPLARS_PER_CALL = 2000
"""Most exemplars one command of the cleaner removes (about a millisecond of Redis)."""


@dataclass(frozen=True)
class Trim:
    """How to trim one precision this pass."""

    precision: int
    mode: str  # one of MODES
    cutoff: int  # slices older than this go
    first: int  # incremental: the first slice that expired since the last pass
    horizon: int  # slices after this go: further ahead than a writer may write (max_future)


@dataclass(frozen=True)
class TrimChunk:
    """What one call of the trim script did, and the members of the next chunk."""

    following: list[str]  # the next chunk's members (empty: the walk is done)
    scanned: int
    deleted: int
    removed: int
    full: int
    bad: list[str] = field(default_factory=list)
    held: float = 0.0  # seconds the call held Redis (its server time, without the round trip)


def trim_chunk(
    ctx: Context, trim: Trim, members: Sequence[str], next_size: int, shard: int = 0
) -> Operation[TrimChunk]:
    """One atomic trim of the hashes of ``members`` (registry members of ``trim.precision`` on
    ``shard``, in lex order) that also reads the ``next_size`` members after the last one. A
    walk starts with no members. Slices before ``trim.cutoff`` or after ``trim.horizon`` go,
    emptied hashes leave the registry in the same step."""
    settings, keys = ctx.settings, ctx.keys
    retention = settings.retention_for(settings.check_precision(trim.precision))
    if trim.mode not in MODES or next_size < 0 or trim.horizon < trim.cutoff:
        raise ConfigurationError(
            f"trim needs mode {'|'.join(MODES)}, next_size >= 0 and horizon >= cutoff, got "
            f"{trim.mode!r}, {next_size!r}, {trim.horizon!r} < {trim.cutoff!r}"
        )
    if not members and not next_size:
        return TrimChunk([], 0, 0, 0, 0)
    low, high = keys.lex_range_precision(trim.precision)
    start = keys.lex_after(members[-1]) if members else low
    hashes = [keys.counter_for_member(shard, member) for member in members]
    call = ScriptCall(
        "trim",
        (keys.known(shard), *hashes),
        (
            trim.mode,
            trim.cutoff,
            retention,
            min(retention, MAX_NAMED),
            trim.first,
            trim.precision,
            trim.horizon,
            start,
            high,
            next_size,
            *members,
        ),
    )
    (reply,) = yield Batch([call])
    deleted, removed, full, bad, following, held = reply
    return TrimChunk(list(following), len(members), deleted, removed, full, list(bad), held / 1e6)


def acquire_lease(ctx: Context, pass_index: int, owner: str, ttl_ms: int) -> Operation[bool]:
    """SET NX PX: True for the one cleaner that gets to do pass ``pass_index``."""
    key = ctx.keys.cleaner_lease(pass_index)
    (reply,) = yield Batch([("SET", key, owner, "NX", "PX", ttl_ms)])
    return reply is not None


def cleaner_cutoffs(ctx: Context) -> Operation[dict[int, int]]:
    """precision -> the cutoff the last complete cleaner pass trimmed to."""
    (flat,) = yield Batch([("HGETALL", ctx.keys.cleaner_cutoffs())])
    return _per_precision(flat)


def cleaner_records(ctx: Context) -> Operation[tuple[dict[int, int], dict[int, int]]]:
    """What a pass starts from, in one round trip: precision -> the cutoff the last complete
    pass trimmed to, and precision -> the start of the pass whose sweep last completed."""
    keys = ctx.keys
    cutoffs, sweeps = yield Batch(
        [("HGETALL", keys.cleaner_cutoffs()), ("HGETALL", keys.cleaner_sweeps())]
    )
    return _per_precision(cutoffs), _per_precision(sweeps)


def _per_precision(flat: Sequence[object]) -> dict[int, int]:
    out = {}
    for precision, value in pairs(flat):
        try:
            out[int(precision)] = int(value)
        except ValueError:
            continue
    return out


def save_cleaner_cutoff(ctx: Context, precision: int, cutoff: int) -> Operation[None]:
    """Remember that a complete pass trimmed ``precision`` up to ``cutoff``."""
    yield Batch([("HSET", ctx.keys.cleaner_cutoffs(), precision, cutoff)])


def claim_sweep(
    ctx: Context, precision: int, last: int | None, owner: str, ttl_ms: int
) -> Operation[bool]:
    """SET NX PX: True for the one cleaner that sweeps ``precision`` after the sweep recorded
    at ``last``. Cleaners that read the same record race for the same claim; once a sweep is
    recorded the next one needs a new claim, so sweeps neither overlap nor repeat."""
    key = ctx.keys.cleaner_sweep_claim(precision, last)
    (reply,) = yield Batch([("SET", key, owner, "NX", "PX", ttl_ms)])
    return reply is not None


def release_sweep(ctx: Context, precision: int, last: int | None) -> Operation[None]:
    """Give up an interrupted sweep's claim, so that the next pass sweeps it (no other
    cleaner can hold that name before it expires, and it outlives a sweep)."""
    yield Batch([("DEL", ctx.keys.cleaner_sweep_claim(precision, last))])


def save_cleaner_sweep(ctx: Context, precision: int, started: int) -> Operation[None]:
    """Remember that the sweep of ``precision`` by the pass that started at ``started``
    completed."""
    yield Batch([("HSET", ctx.keys.cleaner_sweeps(), precision, started)])


def forget_writers(ctx: Context, before: float, shard: int = 0) -> Operation[int]:
    """Forget the writers of ``shard`` quiet since ``before`` (epoch seconds), and their marks
    (blocks layout); how many."""
    keys, quiet_since = ctx.keys, int(before)
    registry = keys.writers(shard)
    (quiet,) = yield Batch(
        [("ZRANGEBYSCORE", registry, "-inf", f"({quiet_since}", "LIMIT", 0, QUIET_WRITERS)]
    )
    if not quiet:
        return 0
    # the script reads each score again: a writer that wrote since this listing is kept
    written = tuple(keys.writer(writer, shard) for writer in quiet)
    call = ScriptCall("writers", (registry, keys.marks(shard), *written), (quiet_since, *quiet))
    (forgotten,) = yield Batch([call])
    return int(forgotten)


def forget_uniques(ctx: Context, now: float) -> Operation[int]:
    """Drop the unique series whose newest slice has expired by ``now`` from every unique
    registry (their keys expired by themselves); return how many members went."""
    cutoff = int(now)
    replies = yield Batch(
        [
            ("ZREMRANGEBYSCORE", registry, "-inf", cutoff)
            for registry in ctx.keys.unique_registries()
        ]
    )
    return sum(int(n) for n in replies)


def trim_annotations(ctx: Context, before: float) -> Operation[int]:
    """Drop annotations older than ``before`` (epoch seconds); return how many went."""
    before_ms = int(before * 1000)
    (removed,) = yield Batch(
        [("ZREMRANGEBYSCORE", ctx.keys.annotations(), "-inf", f"({before_ms}")]
    )
    return int(removed)


def trim_exemplars(ctx: Context, before: float) -> Operation[int]:
    """Drop every shard's exemplars of the minutes before the one of ``before`` (epoch
    seconds), at most ``EXEMPLARS_PER_CALL`` a command (each shard's probed first, all in
    one round trip); return how many went."""
    keys = ctx.keys
    low, high = keys.lex_range_before(slot_of(before))
    removed = 0
    shards = list(range(keys.shards))
    while shards:
        probe = ("LIMIT", EXEMPLARS_PER_CALL - 1, 1)  # the last member one command may take
        lasts = yield Batch([("ZRANGEBYLEX", keys.exemplars(s), low, high, *probe) for s in shards])
        cuts = zip(shards, [f"[{last[0]}" if last else high for last in lasts], strict=True)
        replies = yield Batch([("ZREMRANGEBYLEX", keys.exemplars(s), low, cut) for s, cut in cuts])
        removed += sum(int(n) for n in replies)
        shards = [s for s, last in zip(shards, lasts, strict=True) if last]
    return removed
