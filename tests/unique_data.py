"""Unique-series test data written straight to Redis, as the contract lays it out (the keys
come from the store's own ``keys``): an HLL per slice, a capped SET in exact mode, both
expiring after retention, and a registry member scored by that expiry."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from slicecount.config import Settings
from slicecount.core.keys import KeySpace


def current(precision: int = 86_400) -> int:
    """A time close to now (keys written for it must not expire at once), on a slice start."""
    return int(time.time()) // precision * precision


def expiry(settings: Settings, precision: int, start: int) -> int:
    return start + precision * settings.retention_for(precision)


def write_slice(
    client: Any,
    settings: Settings,
    series_id: str,
    precision: int,
    start: int,
    values: Iterable[str],
    *,
    exact: bool = False,
) -> None:
    """Add ``values`` to one slice of a unique series, as the write path does."""
    keys = KeySpace(settings.prefix, settings.shards)
    slot = keys.unique_layout(series_id, (precision,)).slots[0]
    chosen = list(dict.fromkeys(values))
    until = expiry(settings, precision, start)
    for i in range(0, len(chosen), 5000):
        client.pfadd(slot.hll(start), *chosen[i : i + 5000])
    client.expireat(slot.hll(start), until)
    if exact:
        listed = set(client.smembers(slot.members(start)))
        room = settings.unique_exact_cap + 1 - len(listed)  # stop at cap + 1: "over the cap"
        fresh = [v for v in chosen if v not in listed][: max(0, room)]
        if fresh:
            client.sadd(slot.members(start), *fresh)
        client.expireat(slot.members(start), until)
    registry = keys.unique_layout(series_id, (precision,)).registry
    client.zadd(registry, {slot.member: until}, gt=True)
