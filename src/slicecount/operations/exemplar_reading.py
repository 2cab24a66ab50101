"""Reading exemplars back: those of some bucket series over a time range. Pure.

A shard's exemplars sort by slot (the epoch minute), so a range is one ``ZRANGEBYLEX`` per
shard the series live on, all in one round trip; the members of other series are passed over
by their digest (``keys.exemplar_slot``).
"""

from __future__ import annotations

from collections.abc import Sequence

from slicecount.core import exemplars as exemplar_codec
from slicecount.core.exemplars import Exemplar, slot_of
from slicecount.errors import ConfigurationError
from slicecount.operations.batches import Batch, Context, Operation


def read_exemplars(
    ctx: Context, series_ids: Sequence[str], start: float, end: float
) -> Operation[dict[str, list[Exemplar]]]:
    """series id -> its exemplars from ``start`` to ``end`` (epoch seconds, both included),
    oldest first; a series without any is left out. What does not decode (written by
    something else) is skipped."""
    if end < start:
        raise ConfigurationError(f"end {end!r} is before start {start!r}")
    if not series_ids or ctx.settings.max_exemplars <= 0:
        return {}
    keys = ctx.keys
    wanted: dict[int, dict[str, str]] = {}  # shard -> digest -> series id
    for series_id in series_ids:
        wanted.setdefault(keys.shard(series_id), {})[keys.exemplar_digest(series_id)] = series_id
    low, high = keys.lex_range_slots(max(slot_of(start), 0), slot_of(end))
    shards = list(wanted)
    replies = yield Batch([("ZRANGEBYLEX", keys.exemplars(s), low, high) for s in shards])
    found: dict[str, list[Exemplar]] = {}
    first, last = round(start * 1000), round(end * 1000)
    member_parts, decode = keys.parse_exemplar_member, exemplar_codec.decode
    for shard, members in zip(shards, replies, strict=True):
        digests = wanted[shard]
        for member in members:
            try:
                slot, digest, rest = member_parts(member)
                owner = digests.get(digest)
                if owner is None:
                    continue
                exemplar = decode(slot, rest)
            except ValueError:
                continue
            if first <= round(exemplar.time * 1000) <= last:
                found.setdefault(owner, []).append(exemplar)
    for exemplars in found.values():
        exemplars.sort(key=lambda e: e.time)
    return found
