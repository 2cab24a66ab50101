"""Helpers of the blocks layout's cleaner tests: settings, writes as the write path makes them
(an open field per series and finest slice, the registry member in the same MULTI), and the
truth as readers see it (block + open hash, at every precision)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import redis

from slicecount.cleaner.compaction import Compaction, Compactor
from slicecount.config import Settings
from slicecount.core import blocks
from slicecount.core.keys import KeySpace
from slicecount.operations.batches import Batch, Operation, pairs
from slicecount.store import Store

LADDER = (1, 5, 60, 3600)
RETENTION = {1: 600, 5: 34560, 60: 44640, 3600: 9600}


def blocks_settings(redis_url: str, **changes: Any) -> Settings:
    """Settings of the blocks layout, on a ladder of four precisions."""
    base = Settings(redis_url=redis_url, layout="blocks", precisions=LADDER, retention=RETENTION)
    return base.with_changes(**changes) if changes else base


def write_open(
    client: redis.Redis | redis.RedisCluster,
    settings: Settings,
    series: str,
    counts: Mapping[int, int],
) -> None:
    """What the blocks layout's write path does: HINCRBY open:<digest> <finest slice> n and
    ZADD known NX 0 0:<series>, in one MULTI."""
    keys, finest = KeySpace(settings.prefix, settings.shards), settings.precisions[0]
    pipe = client.pipeline(transaction=True)
    pipe.zadd(keys.known_for(series), {keys.series_member(series): 0}, nx=True)
    for second, n in counts.items():
        if n:  # the write path leaves zero sums out
            pipe.hincrby(keys.open(series), str(second - second % finest), n)
    pipe.execute()


def open_write(store: Store, series: str, counts: Mapping[int, int]) -> Operation[list[Any]]:
    """``write_open`` as an operation the store runs (through a Sentinel or on a cluster,
    wherever the store's client finds the primary of the series' slot)."""
    keys, finest = store.keys, store.settings.precisions[0]
    commands: list[Any] = [("ZADD", keys.known_for(series), "NX", 0, keys.series_member(series))]
    commands += [("HINCRBY", keys.open(series), t - t % finest, n) for t, n in counts.items() if n]
    replies = yield Batch(commands, transaction=True)
    return replies


def stored(store: Store, series: str) -> dict[int, dict[int, int]]:
    """precision -> slice start -> count, as a reader sees it: the block's slices plus the
    open fields summed into each precision's slices (zeros left out; a foreign field counts
    nothing)."""
    keys, precisions = store.keys, store.settings.precisions
    data, flat = store.run(_read(keys.block(series), keys.open(series)))
    found = blocks.everything(data or b"")
    out = {p: dict(found.get(p, {})) for p in precisions}
    for name, value in pairs(flat):
        try:
            second, n = int(name), int(value)
        except ValueError:
            continue
        for p in precisions:
            start = second - second % p
            out[p][start] = out[p].get(start, 0) + n
    return {p: {s: n for s, n in slices.items() if n} for p, slices in out.items()}


def open_fields(store: Store, series: str) -> int:
    """How many fields the series' open hash holds."""
    return int(store.run(_hlen(store.keys.open(series))))


def _hlen(key: str) -> Operation[Any]:
    (size,) = yield Batch([("HLEN", key)])
    return size


def _read(block: str, open_: str) -> Operation[list[Any]]:
    replies = yield Batch([("GET", block), ("HGETALL", open_)], raw=True)
    return replies


def expected(settings: Settings, counts: Mapping[int, int]) -> dict[int, dict[int, int]]:
    """precision -> slice start -> count of what was written."""
    out: dict[int, dict[int, int]] = {p: {} for p in settings.precisions}
    for second, n in counts.items():
        for p in settings.precisions:
            start = second - second % p
            out[p][start] = out[p].get(start, 0) + n
    return {p: {s: n for s, n in slices.items() if n} for p, slices in out.items()}


def racing_cleaner(
    settings: Settings, clock: list[int], stop: threading.Event, passes: list[Compaction]
) -> None:
    """A cleaner of its own passing at ``clock[0]`` again and again until ``stop`` is set,
    each pass's outcome kept in ``passes`` (run it in threads, beside others)."""
    with Store(settings) as own:
        compactor = Compactor(own)
        while not stop.is_set():
            done = compactor.run(clock[0])
            assert done is not None
            passes.append(done)
