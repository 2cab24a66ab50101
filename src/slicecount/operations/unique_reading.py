"""Reading unique series back: distinct counts per slice, exact lists, unions. Pure.

A slice's count follows THE COUNT RULE: its exact SET's size when 0 < size <= the cap, else
its HyperLogLog's PFCOUNT. Several slices or series combine as the union of their HLLs (a sum
of distinct counts counts a value seen in two slices twice). On a cluster each series lives in
its shard's slot, so a union across shards is merged per shard (PFMERGE into a scratch key),
carried to one slot as HLL strings (GET, then SET) and counted there.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from slicecount.config import Settings
from slicecount.core.key_layouts import UniqueSlot
from slicecount.core.series import Labels, encode, parse, shown, validate_name
from slicecount.core.slices import oldest_kept, slice_starts
from slicecount.errors import ConfigurationError
from slicecount.operations.batches import Batch, Command, Context, Operation, ScriptCall

PAGE = 10_000
"""Registry members fetched per ZRANGEBYSCORE when listing unique series."""
CARRY_AS_THEY_ARE = 8
"""Up to this many HLLs of one shard are carried as they are to the slot counting a union
across shards; more are PFMERGEd there first. A small HLL is sparse (a few hundred bytes)
and PFMERGE writes a dense 12 kB one in about a millisecond; many dense HLLs of one shard
travel lighter merged. On a 3-master cluster (64 shards), 10 unions of 100 series: 32 ms
(sparse) / 215 ms (dense) at 8, 290 / 280 ms merging from 2 keys; one union of 100 series
x 10 slices: 67 / 113 ms at 8, 39 / 186 ms never merging, 56 / 87 ms from 2 keys."""
SCRATCH_TTL_MS = 60_000
"""A carried HLL outlives its union by this at most, should the DEL never run."""


class SliceMembers(NamedTuple):
    """The exact list of one slice: its values, sorted; ``complete`` is False for a slice
    over the cap (some values only) or one written without exact mode (no values)."""

    start: int
    values: list[str]
    complete: bool


def kept_precisions(settings: Settings) -> tuple[int, ...]:
    """The precisions unique counts are kept at."""
    return settings.unique_precisions


def unique_precision(ctx: Context, precision: object) -> int:
    """``precision`` if unique counts are kept at it, else ConfigurationError naming it."""
    checked = ctx.settings.check_precision(precision)
    kept = kept_precisions(ctx.settings)
    if checked not in kept:
        raise ConfigurationError(
            f"precision {checked} keeps no unique counts: expected one of {kept}"
        )
    return checked


def window(ctx: Context, precision: int) -> range:
    """The slices a unique series may still hold: retention before now to max_future after."""
    now = ctx.clock()
    oldest = max(0, oldest_kept(precision, ctx.settings.unique_retention_for(precision), now))
    return slice_starts(precision, oldest, now + ctx.settings.max_future)


def is_complete(cardinality: int, estimate: int, cap: int) -> bool:
    """True when a slice's SET lists all its values: it holds 1..cap of them and its HLL
    (which has every value) saw no more than the HLL's own error allows. Values written
    without ``exact=True`` reach the HLL only: then the SET is a part."""
    return 0 < cardinality <= cap and estimate <= cardinality + 2 + cardinality // 33


def count_rule(cardinality: int, estimate: int, cap: int) -> int:
    """A slice's count: exact from its SET when it is complete, else the HLL's."""
    return cardinality if is_complete(cardinality, estimate, cap) else estimate


def _slot(ctx: Context, series_id: str, precision: int) -> UniqueSlot:
    return ctx.keys.unique_layout(series_id, (precision,)).slots[0]


def get_unique(
    ctx: Context, name: str, precision: int, labels: Labels | None = None
) -> Operation[list[tuple[int, int]]]:
    """Every ``(slice start, distinct count)`` of a unique series at ``precision`` with a count,
    oldest first (the unique twin of ``get``)."""
    p = unique_precision(ctx, precision)
    slot = _slot(ctx, encode(name, labels), p)
    starts = window(ctx, p)
    commands: list[Command | ScriptCall] = []
    for start in starts:
        commands += [("SCARD", slot.members(start)), ("PFCOUNT", slot.hll(start))]
    replies = yield Batch(commands)
    cap = ctx.settings.unique_exact_cap
    counts = [
        count_rule(int(n), int(e), cap) for n, e in zip(replies[::2], replies[1::2], strict=True)
    ]
    return [(s, c) for s, c in zip(starts, counts, strict=True) if c > 0]


def members(
    ctx: Context, name: str, precision: int, labels: Labels | None, start: float, end: float
) -> Operation[list[SliceMembers]]:
    """The exact lists of the slices from ``start`` to ``end`` that hold data (slices past
    retention hold none and are not asked for)."""
    p = unique_precision(ctx, precision)
    slot = _slot(ctx, encode(name, labels), p)
    for bound in (start, end):
        if isinstance(bound, bool) or not isinstance(bound, int | float) or not bound >= 0:
            raise ConfigurationError(f"members range bound must be a time >= 0, got {bound!r}")
    if start > end:
        raise ConfigurationError(f"members range must have start <= end, got {start}..{end}")
    kept, asked = window(ctx, p), slice_starts(p, start, end)
    # both ranges step by p from multiples of p: intersected without walking either
    starts = range(max(kept.start, asked.start), min(kept.stop, asked.stop), p)
    if not starts:
        return []
    commands: list[Command | ScriptCall] = []
    for s in starts:
        commands += [("SMEMBERS", slot.members(s)), ("PFCOUNT", slot.hll(s))]
    replies = yield Batch(commands)
    cap = ctx.settings.unique_exact_cap
    found = []
    for s, values, estimate in zip(starts, replies[::2], replies[1::2], strict=True):
        if values:
            complete = is_complete(len(values), int(estimate), cap)
            found.append(SliceMembers(s, sorted(values), complete))
        elif int(estimate):
            found.append(SliceMembers(s, [], False))
    return found


Group = Sequence[tuple[str, Sequence[int]]]


class _Union(NamedTuple):
    """One group's keys: its HLLs by shard, and (SET, HLL) when it is one slice."""

    by_shard: dict[int, list[str]]
    single: tuple[str, str] | None


def count_unions(ctx: Context, precision: int, groups: Sequence[Group]) -> Operation[list[int]]:
    """The distinct count of each group's union of slices (one slice of one series: THE COUNT
    RULE). One round trip for every group, plus one when some union spans shards."""
    p = unique_precision(ctx, precision)
    unions = [_union(ctx, p, group) for group in _sequence(groups, "groups")]
    token = secrets.token_hex(8)
    first: list[Command | ScriptCall] = []
    # per group: where its replies are; a union across shards: its GETs and its target shard
    places: list[tuple[str, list[int], int]] = []
    for index, union in enumerate(unions):
        at = len(first)
        if union.single is not None:
            members_key, hll = union.single
            first += [("SCARD", members_key), ("PFCOUNT", hll)]
            places.append(("rule", [at], 0))
        elif len(union.by_shard) == 1:
            (keys,) = union.by_shard.values()
            first.append(("PFCOUNT", *keys))  # one slot: Redis merges them itself
            places.append(("count", [at], 0))
        elif union.by_shard:
            gets: list[int] = []
            for shard, keys in union.by_shard.items():
                if len(keys) <= CARRY_AS_THEY_ARE:
                    gets += range(len(first), len(first) + len(keys))
                    first += [("GET", key) for key in keys]
                    continue
                merged = ctx.keys.scratch(shard, f"{token}:{index}")
                gets.append(len(first) + 1)
                first += [("PFMERGE", merged, *keys), ("GET", merged), ("DEL", merged)]
            places.append(("carry", gets, next(iter(union.by_shard))))
        else:
            places.append(("empty", [], 0))
    if not first:
        return [0] * len(unions)
    carrying = any(kind == "carry" for kind, _, _ in places)
    replies = yield Batch(first, raw=carrying)  # HLL strings are binary: no decoding
    cap = ctx.settings.unique_exact_cap
    counts = [0] * len(unions)
    second: list[Command | ScriptCall] = []
    counted_at: dict[int, int] = {}  # group -> its PFCOUNT in ``second``
    for index, (kind, where, shard) in enumerate(places):
        if kind == "rule":
            counts[index] = count_rule(int(replies[where[0]]), int(replies[where[0] + 1]), cap)
        elif kind == "count":
            counts[index] = int(replies[where[0]])
        elif kind == "carry":
            blobs = [replies[i] for i in where if replies[i] is not None]
            names = [ctx.keys.scratch(shard, f"{token}:{index}:{i}") for i in range(len(blobs))]
            if not names:
                continue  # no slice of the union exists: 0
            second += [
                ("SET", n, b, "PX", SCRATCH_TTL_MS) for n, b in zip(names, blobs, strict=True)
            ]
            counted_at[index] = len(second)
            second += [("PFCOUNT", *names), ("DEL", *names)]
    if second:
        combined = yield Batch(second)
        for index, at in counted_at.items():
            counts[index] = int(combined[at])
    return counts


def _sequence(value: object, what: str) -> Sequence[Any]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ConfigurationError(f"{what} must be a sequence, got {shown(value)}")
    return value


def _union(ctx: Context, precision: int, group: object) -> _Union:
    """A group's HLL keys by shard, each once."""
    by_shard: dict[int, dict[str, str]] = {}  # shard -> HLL -> its SET
    for entry in _sequence(group, "a group"):
        if not isinstance(entry, tuple | list) or len(entry) != 2:
            raise ConfigurationError(f"expected (series_id, slice_starts), got {shown(entry)}")
        series_id, starts = entry
        _check_series_id(series_id)
        slot = _slot(ctx, series_id, precision)
        keys = by_shard.setdefault(ctx.keys.shard(series_id), {})
        for start in _sequence(starts, f"the slice starts of {series_id!r}"):
            if isinstance(start, bool) or not isinstance(start, int) or start < 0:
                raise ConfigurationError(f"slice start must be an int >= 0, got {shown(start)}")
            if start % precision:
                raise ConfigurationError(
                    f"slice start {start} is not a multiple of the precision {precision}"
                )
            keys[slot.hll(start)] = slot.members(start)
    flat = [(hll, set_) for keys in by_shard.values() for hll, set_ in keys.items()]
    single = (flat[0][1], flat[0][0]) if len(flat) == 1 else None
    return _Union({shard: list(keys) for shard, keys in by_shard.items() if keys}, single)


def _check_series_id(series_id: object) -> None:
    if not isinstance(series_id, str):
        raise ConfigurationError(f"series id must be a string, got {shown(series_id)}")
    try:
        parse(series_id)
    except ValueError as exc:
        raise ConfigurationError(f"bad series id {shown(series_id)}: {exc}") from None


def unique_series(ctx: Context, name: str, precision: int) -> Operation[list[str]]:
    """The ids of the unique series of metric ``name`` at ``precision`` (stale ones skipped)."""
    validate_name(name)
    found = yield from all_unique_series(ctx, precision)
    return [s for s in found if s == name or s.startswith(name + "{")]


def all_unique_series(ctx: Context, precision: int) -> Operation[list[str]]:
    """Every unique series id at ``precision`` whose registry member is not stale."""
    p = unique_precision(ctx, precision)
    prefix = f"{p}:"
    low = f"({ctx.clock()}"  # a member whose score (expiry) <= now is stale
    registries = ctx.keys.unique_registries()
    found: set[str] = set()
    offset = 0
    while registries:
        replies = yield Batch(
            [("ZRANGEBYSCORE", r, low, "+inf", "LIMIT", offset, PAGE) for r in registries]
        )
        for page in replies:
            found.update(_ids(m for m in page if m.startswith(prefix)))
        registries = [r for r, page in zip(registries, replies, strict=True) if len(page) == PAGE]
        offset += PAGE
    return sorted(found)


def _ids(members_: Iterable[str]) -> Iterable[str]:
    for member in members_:
        _, _, series_id = member.partition(":")
        if series_id:
            yield series_id
