"""The cleaner's Redis operations, as sans-I/O generators (executed by the stores). Pure."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from slicecount.keys import KeySpace
from slicecount.operations import Batch, ScriptCall


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
    keys: KeySpace,
    shard: int,
    precision: int,
    start: str | None,
    chunk: int,
    mode: str,
    cutoff: int,
    retention: int,
    first: int,
) -> Generator[Batch, list[Any], TrimChunk]:
    """Trim up to ``chunk`` hashes of ``precision`` from lex cursor ``start`` in one call."""
    low, high = keys.lex_range_precision(precision)
    call = ScriptCall(
        "trim",
        (keys.known(shard),),
        (keys.counter_prefix(shard), start or low, high, chunk, mode, cutoff, retention, first,
         precision),
    )  # fmt: skip
    (reply,) = yield Batch([call])
    last, scanned, deleted, removed, full, *bad = reply
    return TrimChunk("(" + last if last else None, scanned, deleted, removed, full, list(bad))


def acquire_lease(
    keys: KeySpace, pass_index: int, owner: str, ttl_ms: int
) -> Generator[Batch, list[Any], bool]:
    """SET NX PX: True for the one cleaner that gets to do pass ``pass_index``."""
    (reply,) = yield Batch([("SET", keys.cleaner_lease(pass_index), owner, "NX", "PX", ttl_ms)])
    return bool(reply)


def cutoffs(keys: KeySpace) -> Generator[Batch, list[Any], dict[int, int]]:
    """precision -> cutoff of the last complete pass."""
    (data,) = yield Batch([("HGETALL", keys.cleaner_cutoffs())])
    out = {}
    for precision, cutoff in data.items():
        try:
            out[int(precision)] = int(cutoff)
        except ValueError:
            continue
    return out


def save_cutoff(keys: KeySpace, precision: int, cutoff: int) -> Generator[Batch, list[Any], None]:
    yield Batch([("HSET", keys.cleaner_cutoffs(), precision, cutoff)])


def trim_annotations(keys: KeySpace, before_ms: int) -> Generator[Batch, list[Any], int]:
    """Drop annotations older than ``before_ms``; return how many went."""
    (removed,) = yield Batch([("ZREMRANGEBYSCORE", keys.annotations(), "-inf", f"({before_ms}")])
    return int(removed)
