"""Writing unique values: distinct counts per slice (the redis_counters gem's unique lists). Pure.

Each (precision, series, slice) is a HyperLogLog (``key_layouts.UniqueSlot.hll``) expiring with the
precision's retention, so the cleaner never touches it. A flush sends, per slice, one PFADD of
every value buffered for it and one EXPIREAT; exact mode and first-seen counting need a decision
inside Redis (the SET's cap, the count to write) and go through ``lua/unique_add.lua``. Every
write is idempotent (adding a value twice changes nothing), so a batch whose outcome is unknown
is simply sent again: no writer numbers, no transaction.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Iterable, Mapping
from typing import NamedTuple

from slicecount.core.hll import Sketch
from slicecount.core.key_layouts import UniqueSlot
from slicecount.core.series import Labels, encode
from slicecount.errors import ConfigurationError
from slicecount.operations.batches import Batch, Command, Context, Operation, ScriptCall
from slicecount.operations.checks import check_time, value_error

SKETCH_MIN_VALUES = 3000
"""Values of one slice from which a flush sends them as a sketch built here (hll.py: the HLL
Redis would build, ~12 kB, merged with PFMERGE) instead of a PFADD of every one. Measured
(bench_unique_encoding.py): from ~3 000 values, when the sketch is dense, it costs Redis
0.03-0.41x the CPU of the PFADD and 1.0-1.3x the client's; below, PFMERGE into a sparse key
costs Redis more than PFADD does."""
SCRATCH_MS = 60_000
"""Life of a sketch's scratch key should its DEL never come (a connection lost between)."""
BATCH_VALUES = 20_000
"""Values sent per batch (a few ms of server time): a flush of many values never stalls Redis."""


UniqueKey = tuple[str, bool, bool]
"""What values are buffered under: the series id, exact mode, first-seen counting (a plain
tuple: the Recorder builds one per value)."""


UniqueBuffer = Mapping[int, Mapping[UniqueKey, Collection[str]]]
"""Epoch second -> series and mode -> the distinct values seen in that second."""


class UniqueWritten(NamedTuple):
    """What a write did: the exact slices it found over their cap (``"<prec>:<series>"``)."""

    over_cap: list[str]


def prepare_uniques(ctx: Context, buffer: UniqueBuffer) -> list[Batch]:
    """A buffer as batches: the values of each slice (one per precision) merged over the
    seconds they were seen in, at most ``BATCH_VALUES`` values a batch; each registry's stale
    members dropped once."""
    keys, settings = ctx.keys, ctx.settings
    precisions = settings.unique_precisions
    # blocks: a first-seen count goes to the open hash of the finest precision, always
    blocks = settings.layout == "blocks"
    finest = precisions[0] if blocks or settings.precisions[0] < precisions[0] else None
    # (key, precision, slice start, second): the second only where a first-seen count goes
    # into finer slices (at the second its values came), else -1
    slices: dict[tuple[UniqueKey, int, int, int], set[str]] = {}
    for second, bucket in buffer.items():
        for key, values in bucket.items():
            for precision in precisions:
                start = second - second % precision
                at = second if key[2] and precision == finest else -1
                found = slices.get((key, precision, start, at))
                if found is None:
                    slices[(key, precision, start, at)] = set(values)
                else:
                    found.update(values)
    now = int(ctx.clock())
    sketches = _Sketches(ctx)
    batches: list[Batch] = []
    batch, size, registries = Batch(), 0, set()
    for (key, precision, start, at), values in sorted(slices.items()):
        layout = keys.unique_layout(key[0], (precision,))
        slot = layout.slots[0]
        expire_at = start + precision * settings.unique_retention_for(precision)
        if expire_at <= now:
            continue  # already past retention: it would expire as it lands
        if layout.registry not in registries:
            registries.add(layout.registry)
            batch.commands.append(("ZREMRANGEBYSCORE", layout.registry, "-inf", now))
        where = (start, at, expire_at)
        if not key[1] and not key[2] and len(values) >= SKETCH_MIN_VALUES:
            batch.commands += sketches.commands(key[0], layout.registry, slot, where, values)
        else:
            batch.commands += _commands(ctx, key, layout.registry, slot, where, values)
        size += len(values)
        if size >= BATCH_VALUES:
            batches.append(batch)
            batch, size = Batch(), 0
    if batch.commands:
        batches.append(batch)
    return batches


def _commands(
    ctx: Context,
    key: UniqueKey,
    registry: str,
    slot: UniqueSlot,
    where: tuple[int, int, int],
    values: Iterable[str],
) -> list[Command | ScriptCall]:
    series_id, exact, first_seen = key
    start, at, expire_at = where
    blocks = ctx.settings.layout == "blocks"
    first_seen = first_seen and (at >= 0 or not blocks)  # blocks: the finest unique only
    hll = slot.hll(start)
    if not exact and not first_seen:  # the common case: plain commands, no script
        return [
            ("ZADD", registry, "GT", expire_at, slot.member),
            ("PFADD", hll, *values),
            ("EXPIREAT", hll, expire_at),
        ]
    keys = ctx.keys
    shard = keys.shard(series_id)
    cap = ctx.settings.unique_exact_cap if exact else 0
    if blocks:  # the values first seen here, at their second, into the series' open hash
        opened, finest = keys.open(series_id), ctx.settings.precisions[0]
        fine = (1, at - at % finest, keys.series_member(series_id)) if first_seen else (0,)
        return [
            ScriptCall(
                "unique_add",
                (hll, slot.members(start), registry, opened, keys.known(shard), opened),
                (cap, expire_at, slot.member, start, 2 if first_seen else 0, *fine, *values),
            )
        ]
    # a first-seen count at the finest unique precision also goes into the finer slices
    finer = [p for p in ctx.settings.precisions if p < slot.precision] if at >= 0 else []
    fine_members = [keys.member(p, series_id) for p in finer]
    script_keys = (
        hll,
        slot.members(start),
        registry,
        keys.counter_for_member(shard, slot.member),
        keys.known(shard),
        *(keys.counter_for_member(shard, m) for m in fine_members),
    )
    fine_args = [x for p, m in zip(finer, fine_members, strict=True) for x in (at - at % p, m)]
    args = (
        cap,
        expire_at,
        slot.member,
        start,
        1 if first_seen else 0,
        len(finer),
        *fine_args,
        *values,
    )
    return [ScriptCall("unique_add", script_keys, args)]


class _Sketches:
    """Big slices sent as sketches, each built once (one flush's precisions usually share one
    set of values: the second's)."""

    def __init__(self, ctx: Context) -> None:
        self.keys = ctx.keys
        self.token = secrets.token_hex(8)
        self.built: dict[frozenset[str], bytes] = {}

    def commands(
        self,
        series_id: str,
        registry: str,
        slot: UniqueSlot,
        where: tuple[int, int, int],
        values: Collection[str],
    ) -> list[Command]:
        """The registry member, then the sketch SET into a scratch key in the series' slot,
        PFMERGEd into the slice's HLL, and the scratch key deleted (idempotent, as PFADD)."""
        start, _, expire_at = where
        distinct = frozenset(values)
        blob = self.built.get(distinct)
        if blob is None:
            blob = self.built[distinct] = Sketch(distinct).encode()
        scratch = self.keys.scratch(self.keys.shard(series_id), f"{self.token}:{len(self.built)}")
        hll = slot.hll(start)
        return [
            ("ZADD", registry, "GT", expire_at, slot.member),
            ("SET", scratch, blob, "PX", SCRATCH_MS),
            ("PFMERGE", hll, scratch),
            ("DEL", scratch),
            ("EXPIREAT", hll, expire_at),
        ]


def write_uniques(ctx: Context, buffer: UniqueBuffer) -> Operation[UniqueWritten]:
    """Send a buffer's values; the exact slices found over their cap come back."""
    over_cap: list[str] = []
    for batch in prepare_uniques(ctx, buffer):
        replies = yield batch
        over_cap += _over_cap(batch, replies)
    return UniqueWritten(over_cap)


def _over_cap(batch: Batch, replies: list[object]) -> list[str]:
    return [
        str(call.args[2])
        for call, reply in zip(batch.commands, replies, strict=True)
        if isinstance(call, ScriptCall) and reply == 1
    ]


def add_unique(
    ctx: Context,
    name: str,
    values: Iterable[str],
    labels: Labels | None = None,
    *,
    exact: bool = False,
    first_seen: bool = False,
    now: float | None = None,
) -> Operation[UniqueWritten]:
    """Add ``values`` to a unique series now (or at ``now``) at every unique precision, in
    the calling round trips (the unique twin of ``incr``)."""
    series_id = encode(name, labels)
    if isinstance(values, str):
        raise ConfigurationError(f"values must be a collection of strings, got {values!r}")
    distinct: set[str] = set()
    for value in values:
        error = value_error(value)
        if error is not None:
            raise error
        distinct.add(value)
    second = int(check_time(ctx, ctx.clock() if now is None else now))
    if not distinct:
        return UniqueWritten([])
    key = (series_id, bool(exact), bool(first_seen))
    return (yield from write_uniques(ctx, {second: {key: distinct}}))
