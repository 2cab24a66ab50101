"""The read operations (and ``delete``, which finds what it removes the same way). Pure.

Series are discovered through the registry by lexicographic range, never by scanning keys;
slices are read with one pipelined HMGET of exactly the fields wanted. In the blocks layout a
series has one registry member for every precision (``0:<series>``) and its slices are read
by ``block_reading``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from slicecount.core.blocks import NOTHING_STORED
from slicecount.core.keys import EVERY_PRECISION
from slicecount.core.series import Labels, encode, metric_name, validate_name
from slicecount.core.slices import slice_starts
from slicecount.core.spans import Spans
from slicecount.errors import ConfigurationError
from slicecount.operations import block_reading
from slicecount.operations.batches import Batch, Context, Operation, pairs

PAGE = 10_000
"""Registry members fetched per ZRANGEBYLEX when listing every series of a precision."""
SCAN_COUNT = 1000
"""COUNT hint for ZSCAN walks."""


def get(
    ctx: Context, name: str, precision: int, labels: Labels | None = None
) -> Operation[list[tuple[int, int]]]:
    """Every ``(slice start, count)`` of a series at ``precision``, oldest first (the book's
    get_counter)."""
    ctx.settings.check_precision(precision)
    series_id = encode(name, labels)
    if _blocks(ctx):
        return (yield from block_reading.get(ctx, series_id, precision))
    (flat,) = yield Batch([("HGETALL", ctx.keys.counter(precision, series_id))])
    return sorted(_int_pairs(pairs(flat)))


def _blocks(ctx: Context) -> bool:
    return ctx.settings.layout == "blocks"


def _listed(ctx: Context, precision: int) -> int:
    """The precision of the registry members that list series at ``precision``: itself, or
    in the blocks layout the one member of every precision."""
    ctx.settings.check_precision(precision)
    return EVERY_PRECISION if _blocks(ctx) else precision


def _int_pairs(data: Iterable[tuple[str, str]]) -> Iterable[tuple[int, int]]:
    for start, count in data:
        try:
            yield int(start), int(count)
        except ValueError:
            continue  # a foreign field in our hash: not a slice, never a reason to fail a read


def series(ctx: Context, name: str, precision: int) -> Operation[list[str]]:
    """The series ids of metric ``name`` that exist at ``precision`` (ZRANGEBYLEX, no scan)."""
    listed = _listed(ctx, precision)
    keys = ctx.keys
    low, high = keys.lex_range_labelled(listed, validate_name(name))
    plain = keys.member(listed, name)
    batch = Batch()
    for registry in keys.registries():
        batch.commands.append(("ZSCORE", registry, plain))
        batch.commands.append(("ZRANGEBYLEX", registry, low, high))
    replies = yield batch
    found: set[str] = set()
    for score, members in zip(replies[::2], replies[1::2], strict=True):
        if score is not None:
            found.add(name)
        found.update(keys.series_listed(members, listed))
    return sorted(found)


def all_series(ctx: Context, precision: int) -> Operation[list[str]]:
    """Every series id that exists at ``precision``, paging through each registry by lex."""
    keys = ctx.keys
    listed = _listed(ctx, precision)
    low, high = keys.lex_range_precision(listed)
    found: list[str] = []
    for registry in keys.registries():
        start = low
        while True:
            (members,) = yield Batch([("ZRANGEBYLEX", registry, start, high, "LIMIT", 0, PAGE)])
            found.extend(keys.series_listed(members, listed))
            if len(members) < PAGE:
                break
            start = keys.lex_after(members[-1])
    return sorted(found)


def names(ctx: Context, precision: int) -> Operation[list[str]]:
    """The metric names that have a series at ``precision``."""
    found = yield from all_series(ctx, precision)
    return sorted({metric_name(series_id) for series_id in found})


def read(
    ctx: Context, series_ids: Sequence[str], precision: int, start: float, end: float
) -> Operation[dict[str, list[int | None]]]:
    """Counts of each series for every slice from ``start`` to ``end`` (None: no field), in
    one pipelined HMGET per series (the blocks layout: ``block_reading``)."""
    ids, starts = _checked(ctx, series_ids, precision, start, end)
    if not starts or not ids:
        return {s: [] for s in ids}
    if _blocks(ctx):
        last = starts[-1] + precision
        return (yield from block_reading.read(ctx, ids, precision, starts[0], last))
    # as text once for every series: packing 1 000 ints per HMGET costs twice as much
    fields = [str(s) for s in starts]
    keys = ctx.keys
    replies = yield Batch([("HMGET", keys.counter(precision, s), *fields) for s in ids])
    return {s: _counts(values) for s, values in zip(ids, replies, strict=True)}


def read_stored(
    ctx: Context,
    series_ids: Sequence[str],
    precision: int,
    start: float,
    end: float,
    held: Mapping[str, int] | None = None,
) -> Operation[Spans]:
    """Blocks layout: what each series holds for the slices from the one holding ``start`` to
    the one holding ``end`` (its block's frames there and its open slices), packed for a
    decoder of many series at once (the datasource's numpy ``slices_matrix``; the series in
    ``ids`` order, each once); ``read`` in one. ``held``: the generation of each series' block
    whose frames the caller holds (``block_reading.stored``)."""
    ids, starts = _checked(ctx, series_ids, precision, start, end)
    if not _blocks(ctx):
        raise ConfigurationError("read_stored reads the blocks layout; the book's is read()")
    if not starts or not ids:
        return Spans.of(dict.fromkeys(ids, NOTHING_STORED))
    last = starts[-1] + precision
    return (yield from block_reading.stored(ctx, ids, precision, starts[0], last, held))


def _checked(
    ctx: Context, series_ids: Sequence[str], precision: int, start: float, end: float
) -> tuple[list[str], range]:
    """The ids and the slice starts of a read, once its arguments are checked."""
    ctx.settings.check_precision(precision)
    if isinstance(series_ids, str):
        raise ConfigurationError(f"series_ids must be a list of ids, got the string {series_ids!r}")
    if not 0 <= start <= end:
        raise ConfigurationError(f"read range must have 0 <= start <= end, got {start!r}..{end!r}")
    return list(series_ids), slice_starts(precision, start, end)


def _counts(values: list[str | None]) -> list[int | None]:
    """HMGET's values as counts, None where a slice has no field (or a foreign value)."""
    try:
        # a busy series: every slice present, converted in C (None raises TypeError)
        return list(map(int, values))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        pass
    try:
        return [None if v is None else int(v) for v in values]
    except ValueError:  # a foreign value in our hash: that slice reads as missing
        return [_to_int(v) for v in values]


def _to_int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def delete(ctx: Context, name: str, labels: Labels | None = None) -> Operation[int]:
    """Remove a metric (or one labelled series of it) at every precision found in the
    registry, keys and members together; return how many keys were removed (the book's
    hashes, one per precision; the blocks layout's open hash and block)."""
    keys = ctx.keys
    series_id = encode(name, labels) if labels else None
    validate_name(name)
    removed = 0
    for shard, registry in enumerate(keys.registries()):
        for pattern in keys.member_globs(name, series_id):
            cursor: int | str = 0
            while True:
                ((cursor, flat),) = yield Batch(
                    [("ZSCAN", registry, cursor, "MATCH", pattern, "COUNT", SCAN_COUNT)]
                )
                members = [m for m, _ in pairs(flat) if _is_exact(ctx, m, name, series_id)]
                if members:
                    replies = yield Batch(
                        [("DEL", *_keys_of(ctx, shard, members)), ("ZREM", registry, *members)],
                        transaction=True,
                    )
                    removed += int(replies[0])
                if int(cursor) == 0:
                    break
    return removed


def _keys_of(ctx: Context, shard: int, members: list[str]) -> list[str]:
    """The keys registry members name: the book's hash of one precision, or the blocks
    layout's open hash and block of a series (member ``0:<series>``)."""
    keys, found = ctx.keys, []
    for member in members:
        precision, series_id = keys.parse_member(member)
        if precision == EVERY_PRECISION:
            found += [keys.open(series_id), keys.block(series_id)]
        else:
            found.append(keys.counter_for_member(shard, member))
    return found


def _is_exact(ctx: Context, member: str, name: str, series_id: str | None) -> bool:
    # MATCH globs are coarse ("*:a" also matches "1:b:a"): confirm on the parsed member.
    try:
        found = ctx.keys.parse_member(member).series_id
    except ValueError:
        return False
    return found == series_id if series_id is not None else metric_name(found) == name
