"""Every store operation as a sans-I/O generator of Redis command batches. Pure.

An operation yields ``Batch`` objects and receives each batch's replies; its return value is the
operation's result. ``store.Store`` and ``store_async.AsyncStore`` only execute batches, so the
sync and asyncio twins cannot drift apart: keys, slice math and reply decoding live here once.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slicecount.config import Settings
from slicecount.keys import KeySpace
from slicecount.series import metric_name
from slicecount.slices import slice_start, slice_starts

Command = tuple[Any, ...]

APPLY_CHUNK_COMMANDS = 50_000
"""HINCRBYs per MULTI/EXEC when writing a batch: big enough to amortise, small enough not to
stall Redis (about 10 ms of server time)."""
SCAN_COUNT = 1000
"""COUNT hint for ZSCAN walks."""


@dataclass(frozen=True)
class ScriptCall:
    """A call of one of the package's Lua scripts (sent as EVALSHA)."""

    name: str
    keys: tuple[str, ...]
    args: tuple[Any, ...]


@dataclass
class Batch:
    """Commands sent in one round trip, inside MULTI/EXEC when ``transaction`` is set. A batch
    holding a script call holds only that call (so it can be re-sent after NOSCRIPT)."""

    commands: list[Any] = field(default_factory=list)
    transaction: bool = False
    # A bulk write: sent as one packed buffer, and replies that are errors come back as exception
    # objects instead of being raised (a refused command inside EXEC does not undo the others, so
    # the caller must not retry the batch).
    bulk: bool = False


Operation = Generator[Batch, list[Any], Any]


def run_sync(operation: Operation, execute: Any) -> Any:
    """Drive ``operation`` with a blocking ``execute(batch) -> replies``."""
    try:
        batch = next(operation)
        while True:
            batch = operation.send(execute(batch))
    except StopIteration as done:
        return done.value


def incr(
    settings: Settings, keys: KeySpace, series_id: str, n: int, now: float
) -> Generator[Batch, list[Any], None]:
    """The book's update_counter: ZADD NX and HINCRBY for every precision, one transaction."""
    batch = Batch(transaction=True)
    registry = keys.known_for(series_id)
    for precision in settings.precisions:
        batch.commands.append(("ZADD", registry, "NX", 0, keys.member(precision, series_id)))
        batch.commands.append(
            ("HINCRBY", keys.counter(precision, series_id), slice_start(now, precision), n)
        )
    yield batch


def aggregate(seconds: Mapping[int, int], precision: int) -> dict[int, int]:
    """{second -> n} summed into {slice start -> n} at ``precision``, zero sums left out."""
    slices: dict[int, int] = {}
    for second, n in seconds.items():
        start = second - second % precision
        slices[start] = slices.get(start, 0) + n
    return {start: n for start, n in slices.items() if n}


def apply(
    settings: Settings, keys: KeySpace, batch: Mapping[str, Mapping[int, int]]
) -> Generator[Batch, list[Any], int]:
    """Write an aggregated batch; return how many commands Redis refused (0 when all is well).

    One HINCRBY per (precision, series, slice) and one multi-member ``ZADD NX`` per registry, in
    MULTI/EXEC chunks; a series' registry members and increments always share one transaction,
    so a cleaner can never forget a hash that this write is filling.
    """
    refused = 0
    for chunk in _apply_chunks(keys, settings.precisions, batch):
        replies = yield chunk
        # Every write replies with an integer; anything else is an error Redis returned.
        refused += sum(reply.__class__ is not int for reply in replies)
    return refused


def _apply_chunks(
    keys: KeySpace, precisions: tuple[int, ...], batch: Mapping[str, Mapping[int, int]]
) -> Iterable[Batch]:
    members: dict[str, list[Any]] = defaultdict(list)
    increments: list[Command] = []
    for series_id, seconds in batch.items():
        registry_key, layout = keys.layout(series_id, precisions)
        registry = members[registry_key]
        if len(seconds) == 1:  # the common case after a 1 s flush: nothing to sum
            ((second, n),) = seconds.items()
            if not n:
                continue
            for precision, member, counter in layout:
                registry += (0, member)
                increments.append(("HINCRBY", counter, second - second % precision, n))
        else:
            for precision, member, counter in layout:
                slices = aggregate(seconds, precision)
                if slices:
                    registry += (0, member)
                    increments += [("HINCRBY", counter, s, n) for s, n in slices.items()]
        if len(increments) >= APPLY_CHUNK_COMMANDS:
            yield _apply_batch(members, increments)
            members, increments = defaultdict(list), []
    if increments:
        yield _apply_batch(members, increments)


def _apply_batch(members: Mapping[str, list[Any]], increments: list[Command]) -> Batch:
    zadds: list[Command] = [
        ("ZADD", registry, "NX", *pairs) for registry, pairs in members.items() if pairs
    ]
    return Batch(zadds + increments, transaction=True, bulk=True)


def get(
    keys: KeySpace, series_id: str, precision: int
) -> Generator[Batch, list[Any], list[tuple[int, int]]]:
    """The book's get_counter: every (slice, count) of one hash, oldest first."""
    (data,) = yield Batch([("HGETALL", keys.counter(precision, series_id))])
    return sorted(_int_pairs(data))


def _int_pairs(data: Mapping[str, str]) -> Iterable[tuple[int, int]]:
    for start, count in data.items():
        try:
            yield int(start), int(count)
        except ValueError:
            continue  # a foreign field in our hash: not a slice, never a reason to fail a read


def series(keys: KeySpace, name: str, precision: int) -> Generator[Batch, list[Any], list[str]]:
    """Every series of metric ``name`` at ``precision``, via ZRANGEBYLEX (no scan)."""
    batch = Batch()
    low, high = keys.lex_range_labelled(precision, name)
    plain = keys.member(precision, name)
    for registry in keys.registries():
        batch.commands.append(("ZSCORE", registry, plain))
        batch.commands.append(("ZRANGEBYLEX", registry, low, high))
    replies = yield batch
    found: set[str] = set()
    for score, members in zip(replies[::2], replies[1::2], strict=True):
        if score is not None:
            found.add(name)
        found.update(keys.parse_member(m)[1] for m in members)
    return sorted(found)


def all_series(
    keys: KeySpace, precision: int, page: int = 10_000
) -> Generator[Batch, list[Any], list[str]]:
    """Every series id at ``precision``, paging through the registry by lex (no SCAN)."""
    low, high = keys.lex_range_precision(precision)
    found: list[str] = []
    for registry in keys.registries():
        start = low
        while True:
            (members,) = yield Batch([("ZRANGEBYLEX", registry, start, high, "LIMIT", 0, page)])
            found.extend(keys.parse_member(m)[1] for m in members)
            if len(members) < page:
                break
            start = "(" + members[-1]
    return sorted(found)


def names(
    keys: KeySpace, precision: int, page: int = 10_000
) -> Generator[Batch, list[Any], list[str]]:
    """Every metric name with a series at ``precision``."""
    found = yield from all_series(keys, precision, page)
    return sorted({metric_name(series_id) for series_id in found})


def read(
    keys: KeySpace,
    series_ids: Sequence[str],
    precision: int,
    start: float,
    end: float,
) -> Generator[Batch, list[Any], dict[str, list[int | None]]]:
    """Pipelined HMGET of exactly the slices from ``start`` to ``end``; None where absent."""
    fields = list(slice_starts(precision, start, end))
    if not fields or not series_ids:
        return {s: [] for s in series_ids}
    replies = yield Batch([("HMGET", keys.counter(precision, s), *fields) for s in series_ids])
    return {s: [_to_int(v) for v in values] for s, values in zip(series_ids, replies, strict=True)}


def _to_int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _glob_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


def delete(keys: KeySpace, name: str, series_id: str | None) -> Generator[Batch, list[Any], int]:
    """Remove the hashes and registry members of one series (or every series of ``name``) at
    every precision found in the registry; return how many hashes were removed."""
    patterns = (
        [f"*:{_glob_escape(series_id)}"] if series_id is not None else [f"*:{name}", f"*:{name}{{*"]
    )
    removed = 0
    for shard, registry in enumerate(keys.registries()):
        for pattern in patterns:
            cursor: int | str = 0
            while True:
                ((cursor, found),) = yield Batch(
                    [("ZSCAN", registry, cursor, "MATCH", pattern, "COUNT", SCAN_COUNT)]
                )
                members = [m for m, _ in found if _is_exact(keys, m, name, series_id)]
                if members:
                    replies = yield Batch(
                        [
                            ("DEL", *(keys.counter_for_member(shard, m) for m in members)),
                            ("ZREM", registry, *members),
                        ],
                        transaction=True,
                    )
                    removed += int(replies[0])
                if int(cursor) == 0:
                    break
    return removed


def _is_exact(keys: KeySpace, member: str, name: str, series_id: str | None) -> bool:
    # MATCH globs are coarse ("*:a" also matches "1:b:a"): confirm on the parsed member.
    try:
        _, found = keys.parse_member(member)
    except ValueError:
        return False
    return found == series_id if series_id is not None else metric_name(found) == name


def add_annotation(
    keys: KeySpace, annotation: Mapping[str, Any]
) -> Generator[Batch, list[Any], None]:
    """Add one annotation (a JSON object with time in epoch ms) to the annotations ZSET."""
    member = json.dumps(annotation, sort_keys=True, separators=(",", ":"))
    yield Batch([("ZADD", keys.annotations(), annotation["time"], member)])


def list_annotations(
    keys: KeySpace, start_ms: int, end_ms: int, limit: int
) -> Generator[Batch, list[Any], list[dict[str, Any]]]:
    """Annotations whose time lies in [start_ms, end_ms], oldest first, at most ``limit``."""
    (members,) = yield Batch(
        [("ZRANGEBYSCORE", keys.annotations(), start_ms, end_ms, "LIMIT", 0, limit)]
    )
    out = []
    for member in members:
        try:
            item = json.loads(member)
        except ValueError:
            continue  # not written by slicecount: skip rather than fail the panel
        if isinstance(item, dict) and isinstance(item.get("time"), int):
            out.append(item)
    return out
