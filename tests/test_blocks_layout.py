"""The blocks layout's write and read paths on real servers (every topology).

Counts are written through ``Store.apply``/``incr`` and a ``Recorder``; the cleaner's
compaction is another module's, so blocks are made here as it makes them (``core/blocks.py``'s
splice, SET under the block key) and the fields they take leave the open hash: a read must add
both, at every precision, exactly.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import pytest
import redis
from starlette.testclient import TestClient

from slicecount.config import Settings
from slicecount.core import blocks, splices
from slicecount.core.slices import slice_starts
from slicecount.core.spans import HELD, META, Spans
from slicecount.datasource.app import create_app
from slicecount.operations import block_reading
from slicecount.operations.batches import Batch, Operation, ScriptCall
from slicecount.operations.chunking import Chunk
from slicecount.reads.decoding import slices_matrix
from slicecount.recording.outbox import Outbox
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from tests.sealing import seal

pytestmark = pytest.mark.topologies

T0 = 1_700_006_400  # a multiple of 86400
NOW = T0 + 1800
LADDER = (1, 5, 60, 3600, 86400)
Truth = dict[str, dict[int, int]]
T = TypeVar("T")


@pytest.fixture
def store(redis_url: str) -> Iterator[Store]:
    with Store(Settings(redis_url=redis_url, layout="blocks"), clock=lambda: NOW) as store:
        yield store


def expected(truth: Mapping[int, int], precision: int, start: int, end: int) -> list[int | None]:
    by_slice: dict[int, int] = {}  # the truth summed per slice in one pass
    for second, n in truth.items():
        first = second - second % precision
        by_slice[first] = by_slice.get(first, 0) + n
    return [by_slice.get(first) or None for first in slice_starts(precision, start, end)]


def seeded_truth(seed: int) -> Truth:
    rng = random.Random(seed)
    truth: Truth = {}
    for series_id in ("http.requests", 'http.requests{route="/a"}', 'db.queries{op="get"}'):
        seconds = truth.setdefault(series_id, {})
        for _ in range(400):
            second = rng.randrange(T0 - 5400, NOW)
            seconds[second] = seconds.get(second, 0) + rng.randint(1, 9)
    return truth


def test_a_write_is_one_increment_per_series_and_second(
    store: Store, redis_client: redis.Redis
) -> None:
    store.apply({'a{x="1"}': {T0: 3, T0 + 1: 4}, "b": {T0: 1}})
    store.incr("a", 2, {"x": "1"}, now=T0 + 1)
    keys = store.keys
    assert redis_client.hgetall(keys.open('a{x="1"}')) == {str(T0): "3", str(T0 + 1): "6"}
    assert redis_client.hgetall(keys.open("b")) == {str(T0): "1"}
    members = {m for r in keys.registries() for m in redis_client.zrange(r, 0, -1)}
    assert members == {'0:a{x="1"}', "0:b"}
    assert not redis_client.exists(keys.counter(1, "b"), keys.block("b"))


def test_a_refused_increment_is_reported_and_the_rest_kept(
    store: Store, redis_client: redis.Redis
) -> None:
    redis_client.set(store.keys.open("clash"), "not a hash")
    assert store.apply({"clash": {T0: 1, T0 + 1: 2}, "fine": {T0: 1}}) == 2  # one a second
    assert store.get("fine", 5) == [(T0, 1)]


def test_reads_add_blocks_and_open_slices_exactly_at_every_precision(
    store: Store, redis_client: redis.Redis
) -> None:
    truth = seeded_truth(24)
    store.apply(truth)
    sealed = {s: seal(redis_client, store, s, T0 - 600) for s in truth}
    assert all(sealed.values())  # some of every series is in its block, the rest open
    # late writes after sealing: into the open hash, for slices the block holds already
    late = {s: {min(sealed[s]): 5, T0 - 3000: 2} for s in truth}
    store.apply(late)
    for series_id, seconds in late.items():
        for second, n in seconds.items():
            truth[series_id][second] = truth[series_id].get(second, 0) + n
    rng = random.Random(7)
    ids = list(truth)
    for precision in LADDER:
        for start, end in [(T0 - 5400, NOW), (T0 - 601, T0 - 599)] + [
            sorted((rng.randrange(T0 - 6000, NOW), rng.randrange(T0 - 6000, NOW))) for _ in range(3)
        ]:
            read = store.read(ids, precision, start, end)
            for series_id in ids:
                want = expected(truth[series_id], precision, start, end)
                assert read[series_id] == want, (precision, start, end, series_id)
            # the same bytes decoded by the datasource's numpy decoder
            stored = store.read_stored(ids, precision, start, end)
            first, last = start - start % precision, end - end % precision + precision
            rows = slices_matrix(stored, precision, first, last).tolist()
            decoded = {s: [n or None for n in row] for s, row in zip(stored.ids, rows, strict=True)}
            assert decoded == read
    for series_id in ids:
        name, _, labels = series_id.partition("{")
        label_map = dict(kv.split("=") for kv in labels.rstrip("}").split(",")) if labels else {}
        label_map = {k: v.strip('"') for k, v in label_map.items()}
        for precision in LADDER:
            got = store.get(name, precision, label_map or None)
            assert sum(n for _, n in got) == sum(truth[series_id].values())
            assert got == [
                (s, n) for s, n in zip(
                    slice_starts(precision, T0 - 5400, NOW),
                    expected(truth[series_id], precision, T0 - 5400, NOW),
                    strict=True,
                ) if n
            ]  # fmt: skip


def test_discovery_lists_one_member_at_every_precision_and_delete_removes_both_keys(
    store: Store, redis_client: redis.Redis
) -> None:
    store.apply({'http.requests{route="/a"}': {T0: 1}, "http.requests": {T0: 2}, "up": {T0: 1}})
    seal(redis_client, store, "up", T0 + 1)
    for precision in LADDER:
        assert store.series("http.requests", precision) == [
            "http.requests",
            'http.requests{route="/a"}',
        ]
        assert store.all_series(precision) == ["http.requests", 'http.requests{route="/a"}', "up"]
        assert store.names(precision) == ["http.requests", "up"]
    keys = store.keys
    assert redis_client.exists(keys.block("up")) and not redis_client.exists(keys.open("up"))
    assert store.delete("up") == 1
    assert store.delete("http.requests", {"route": "/a"}) == 1
    assert store.all_series(60) == ["http.requests"]
    assert store.read(["up"], 1, T0, T0) == {"up": [None]}
    assert not redis_client.exists(keys.block("up"), keys.open('http.requests{route="/a"}'))
    with pytest.raises(ValueError, match="precision 7"):
        store.series("http.requests", 7)


def test_a_foreign_value_under_a_block_key_reads_as_no_block(
    store: Store, redis_client: redis.Redis
) -> None:
    store.apply({"a": {T0: 3}, "b": {T0: 4}})
    redis_client.set(store.keys.block("a"), "not a block at all, but long enough" * 40)
    redis_client.set(store.keys.block("b"), b"SB\x01\x09\x01\x00\x00\x00")  # cut short
    redis_client.hset(store.keys.open("a"), "note", "x")
    assert store.read(["a", "b"], 60, T0, T0) == {"a": [3], "b": [4]}
    assert store.get("a", 1) == [(T0, 3)]


def test_open_fields_that_are_not_plain_integers_are_left_out_by_both_readers(
    store: Store, redis_client: redis.Redis
) -> None:
    """The script joins an open hash's strings as they are when they are plain integers, and
    keeps the integers one by one otherwise: a foreign field, a fraction, a number past 64
    bits; a negative count (a correction) is an integer and counts."""
    store.apply({"a": {T0: 3, T0 + 1: 1}, "b": {T0: 4}, "c": {T0 + 2: 5}})
    opened = store.keys.open
    redis_client.hset(opened("a"), mapping={"note": "x", str(T0 + 3): "2.5", "7" * 25: "1"})
    redis_client.hset(opened("b"), str(T0 + 4), "-1")
    redis_client.hset(opened("c"), "8" * 20, "1")  # digits alone, but past 64 bits
    ids = ["a", "b", "c"]
    assert store.read(ids, 5, T0, T0) == {"a": [4], "b": [3], "c": [5]}
    stored = store.read_stored(ids, 1, T0, T0 + 5)
    assert {s: dict(found.open) for s, found in stored.each().items()} == {
        "a": {T0: 3, T0 + 1: 1}, "b": {T0: 4, T0 + 4: -1}, "c": {T0 + 2: 5},
    }  # fmt: skip
    assert slices_matrix(stored, 1, T0, T0 + 5).tolist() == [
        [3, 1, 0, 0, 0], [4, 0, 0, 0, -1], [0, 0, 5, 0, 0],
    ]  # fmt: skip


def test_a_read_holding_the_frames_keeps_the_open_fields_the_script_keeps(
    store: Store, redis_client: redis.Redis
) -> None:
    """A read holding every series' frames reads the open hashes with plain HGETALLs, not the
    script (``block_reading.stored``): it keeps the same fields, the plain and the foreign
    ones alike (a field with a space in it, an empty one, a signed or hexadecimal one)."""
    ids = ["a", "b", "c"]
    store.apply({s: {T0 - 100: 4, T0: 6} for s in ids})
    for series_id in ids:
        seal(redis_client, store, series_id, T0 - 50)
    opened = store.keys.open
    redis_client.hset(
        opened("a"),
        mapping={"note": "x", str(T0 + 3): "2.5", "7" * 25: "1", f"{T0 + 1} 2": "3", "": "4"},
    )
    redis_client.hset(opened("b"), mapping={str(T0 + 4): "-1", "+5": "1", "0x10": "2"})
    redis_client.hset(opened("c"), "8" * 20, "1")
    script = store.read_stored(ids, 1, T0 - 100, T0 + 5)
    generations = {
        s: g for s, (_, _, _, g) in zip(script.ids, META.iter_unpack(script.meta), strict=True)
    }
    assert all(generations.values())
    held = store.read_stored(ids, 1, T0 - 100, T0 + 5, generations)
    assert [frames for _, frames, _, _ in META.iter_unpack(held.meta)] == [HELD] * 3
    assert held.opened == script.opened
    assert held.opened.split() == [str(n).encode() for n in (T0, 6, T0, 6, T0 + 4, -1, T0, 6)]
    assert store.get("b", 1) == [(T0 - 100, 4), (T0, 6), (T0 + 4, -1)]  # get keeps the same
    # a foreign value under an open hash's key: no open fields, as the script reads it
    redis_client.delete(opened("c"))
    redis_client.set(opened("c"), "not a hash")
    held = store.read_stored(ids, 1, T0 - 100, T0 + 5, generations)
    script = store.read_stored(ids, 1, T0 - 100, T0 + 5)
    assert held.opened == script.opened
    at = held.ids.index("c") * META.size
    assert META.unpack(held.meta[at : at + META.size])[1:3] == (HELD, 0)


@pytest.mark.parametrize("moment", ["before", "between", "after"])
def test_a_read_holding_the_frames_is_exact_whenever_the_cleaner_runs(
    store: Store, redis_client: redis.Redis, moment: str
) -> None:
    """The cleaner seals before the read, between its open hashes and its blocks'
    generations, or after it: the counts are exact, and a block rewritten before the
    generations were read is read again, frames and hash, by the script."""
    ids = ["a", "b"]
    truth = {s: {T0 - 100: 4, T0 - 10: 5, T0: 6} for s in ids}
    store.apply(truth)
    seal(redis_client, store, "a", T0 - 50)
    seal(redis_client, store, "b", T0 - 50)
    first, end = T0 - 100, T0 + 5
    script = store.read_stored(ids, 5, first, end)
    generations = {
        s: g for s, (_, _, _, g) in zip(script.ids, META.iter_unpack(script.meta), strict=True)
    }
    read = block_reading.stored(store.context, ids, 5, first, end, generations)
    block = store.keys.block("a")
    ahead_of: dict[str, Callable[[Any], bool]] = {
        "before": lambda command: True,
        "between": lambda command: isinstance(command, ScriptCall) and block in command.keys,
        "after": lambda command: False,
    }
    sealing = lambda: seal(redis_client, store, "a", T0 + 1)  # noqa: E731
    found, sent = drive_commands(store, read, ahead_of[moment], sealing)
    frames = [n for _, n, _, _ in META.iter_unpack(found.meta)]
    if moment == "after":  # the frames held and the hashes before the pass: one moment's
        assert (frames, sent) == ([HELD, HELD], 1)
        assert found.opened.split() == [str(n).encode() for n in (T0 - 10, 5, T0, 6) * 2]
        return
    assert (frames[1], sent) == (HELD, 2)  # b's block was not rewritten: still held
    pairs = META.unpack(found.meta[: META.size])[2]
    mine = b" ".join(found.opened.split()[: 2 * pairs])
    a = Spans(["a"], found.meta[: META.size], found.lengths, found.frames, mine)
    assert slices_matrix(a, 5, first, end).tolist() == [
        [n or 0 for n in expected(truth["a"], 5, first, T0)]
    ]
    assert found.opened.split()[-4:] == [str(n).encode() for n in (T0 - 10, 5, T0, 6)]


def drive_commands(
    store: Store,
    operation: Operation[T],
    ahead_of: Callable[[Any], bool],
    between: Callable[[], object],
) -> tuple[T, int]:
    """Run ``operation``, its first batch a command at a time with ``between()`` ahead of the
    first command ``ahead_of`` picks (after them all if none); its result and its round trips
    (batches)."""
    batch = next(operation)
    replies: list[Any] = []
    pending = True
    for command in batch.commands:
        if pending and ahead_of(command):
            between()
            pending = False
        replies += store.run(_one(Batch([command], raw=batch.raw)))
    if pending:
        between()
    result, sent = drive(store, operation, -1, between, replies)
    return result, 1 + sent


@pytest.mark.slow
def test_the_read_script_finds_what_the_codec_finds_in_long_blocks_of_many_series(
    store: Store, redis_client: redis.Redis
) -> None:
    # 70 days of sparse counts: a header of ~2 500 bytes (5 s frames for all of it), read by
    # the Lua script; 150 series, more than one call holds (block_reading.SERIES_PER_CALL)
    rng = random.Random(3)
    ids = [f'x{{n="{i}"}}' for i in range(150)]
    held: dict[str, bytes] = {}
    for k, series_id in enumerate(ids[:6]):
        counts = {T0 - rng.randrange(70 * 86400): rng.randint(1, 9) for _ in range(300 + k)}
        frames: dict[tuple[int, int], list[int]] = {}
        splices.add_counts(frames, LADDER, counts)
        held[series_id] = splices.plan_splice(blocks.Header(), LADDER, frames, {}).apply(b"")
        redis_client.set(store.keys.block(series_id), held[series_id])
    # and one of 200 days: more 5 s frames (4 800) than the script packs in one go (STACK)
    counts = {T0 - 200 * 86400 + 1: 3, T0 - 1: 4}
    counts.update({T0 - rng.randrange(200 * 86400): 1 for _ in range(50)})
    frames = {}
    splices.add_counts(frames, LADDER, counts)
    held[ids[6]] = splices.plan_splice(blocks.Header(), LADDER, frames, {}).apply(b"")
    redis_client.set(store.keys.block(ids[6]), held[ids[6]])
    assert len(blocks.parse_header(held[ids[6]]).section(5).lengths) > 4000  # type: ignore[union-attr]
    assert len(blocks.parse_header(held[ids[0]]).pack()) > 2000
    store.apply({s: {NOW - 5: 2} for s in ids})
    ranges = [(5, T0 - 200 * 86400, NOW)]
    lengths = (1, 719, 720, 721, 5000)  # slices: one, about a frame (720), many frames
    for n, precision in enumerate(LADDER):
        for k in (2 * n, 2 * n + 1):  # each length twice over the ladder
            start = rng.randrange(T0 - 70 * 86400, NOW) // precision * precision
            ranges.append((precision, start, start + precision * lengths[k % len(lengths)]))
    for precision, start, end in ranges:
        stored = store.read_stored(ids, precision, start, end).each()
        assert sorted(stored) == sorted(ids)
        for series_id in ids:
            want = blocks.span(held.get(series_id, b""), precision, start, end)
            got = stored[series_id]
            assert got[:3] == (want.start, list(want.lengths), want.frames)
            assert got.open == {NOW - 5: 2}  # every open field: readers keep their range's
            if series_id not in ids[:8]:
                continue  # (the counts of a few: a read each)
            read_counts = store.read([series_id], precision, start, end - precision)[series_id]
            want_counts = blocks.slices_in(want, precision, start, end)
            if start <= NOW - 5 < end:
                want_counts[(NOW - 5 - (NOW - 5) % precision - start) // precision] += 2
            assert read_counts == [n or None for n in want_counts]


def test_a_range_read_is_one_atomic_round_trip_whenever_the_cleaner_runs(
    store: Store, redis_client: redis.Redis
) -> None:
    truth = {"a": {T0 - 100: 4, T0 - 10: 5, T0: 6}}
    store.apply(truth)
    seal(redis_client, store, "a", T0 - 50)
    for step in (0, 1):
        # the cleaner moves counts into the block before the read's round trip, or after it
        read = block_reading.read(store.context, ["a"], 5, T0 - 100, T0 + 5)
        result, sent = drive(store, read, step, lambda: seal(redis_client, store, "a", T0 + 1))
        assert result["a"] == expected(truth["a"], 5, T0 - 100, T0)
        assert sent == 1
        store.apply({"a": {T0: 1}})  # back in the open hash for the next step
        truth["a"][T0] += 1


def drive(
    store: Store,
    operation: Operation[T],
    step: int,
    between: Callable[[], object],
    replies: Any = None,
) -> tuple[T, int]:
    """Run ``operation`` one round trip at a time, ``between()`` ahead of round trip number
    ``step``; its result and how many round trips it took. ``replies``: those of the batch it
    yielded last, when it was started elsewhere."""
    sent = 0
    while True:
        try:
            batch = operation.send(replies)
        except StopIteration as done:
            return done.value, sent
        if sent == step:
            between()
        replies = store.run(_one(batch))
        sent += 1


def _one(batch: Batch) -> Operation[list[Any]]:
    replies = yield batch
    return replies


def test_a_recorder_writes_open_slices_and_its_mark(
    store: Store, redis_client: redis.Redis
) -> None:
    now = [float(T0)]
    recorder = Recorder(store, flush_interval=3600, clock=lambda: now[0])
    try:
        recorder.add("http.requests", 2, {"route": "/a"}, now=T0 - 50)
        recorder.add("http.requests", 1, {"route": "/a"})
        assert recorder.flush()
        series_id = 'http.requests{route="/a"}'
        keys = store.keys
        shard = keys.shard(series_id)
        assert redis_client.hgetall(keys.open(series_id)) == {str(T0 - 50): "2", str(T0): "1"}
        writer = recorder._outbox.writer
        assert redis_client.zrange(keys.marks(shard), 0, -1, withscores=True) == [(writer, T0 - 50)]
        now[0] = T0 + 1
        recorder.add("http.requests", 1, {"route": "/a"})
        assert recorder.flush()
        assert redis_client.zscore(keys.marks(shard), writer) == T0 + 1
        for precision in LADDER:
            assert [n for _, n in store.get("http.requests", precision, {"route": "/a"})] == (
                [2, 1, 1] if precision == 1 else [2, 2]
            )
    finally:
        recorder.close()


def test_a_mark_holds_back_to_what_waits_for_the_same_shard() -> None:
    outbox = Outbox()
    outbox.put([Chunk(0, oldest=T0), Chunk(1, oldest=T0 - 50), Chunk(0, oldest=T0 - 20)])
    assert outbox.mark(0, lambda: T0 + 5) == T0 - 20  # a chunk behind holds older seconds
    assert outbox.mark(1, lambda: T0 + 5) == T0 - 50
    assert outbox.mark(0, lambda: T0 - 90) == T0 - 90  # the buffer holds older still
    assert outbox.mark(2, None) is None  # nothing held for shard 2: the chunk's own second


def test_first_seen_values_count_into_the_open_hash_once(
    redis_url: str, redis_client: redis.Redis
) -> None:
    # real time: a unique slice's HyperLogLog expires with its retention, on the server's clock
    t0 = int(time.time()) // 3600 * 3600 - 3600
    with Store(Settings(redis_url=redis_url, layout="blocks")) as store:
        store.add_unique("logins", ["u1", "u2"], first_seen=True, now=t0 + 1)
        store.add_unique("logins", ["u2", "u3"], first_seen=True, now=t0 + 7)
        store.add_unique("logins", ["u1", "u3"], first_seen=True, now=t0 + 9)  # seen: nothing
        store.add_unique("logins", ["u1"], first_seen=True, now=t0 + 61)  # a new minute
        store.add_unique("logins", ["u1"], first_seen=True, now=t0 + 62)  # sent again
        assert redis_client.hgetall(store.keys.open("logins")) == {
            str(t0 + 1): "2",
            str(t0 + 7): "1",
            str(t0 + 61): "1",
        }
        assert store.get("logins", 60) == [(t0, 3), (t0 + 60, 1)]
        assert store.get("logins", 5) == [(t0, 2), (t0 + 5, 1), (t0 + 60, 1)]
        assert store.get("logins", 3600) == [(t0, 4)]  # the sum of its minutes
        assert store.get_unique("logins", 60) == [(t0, 3), (t0 + 60, 1)]
        assert store.series("logins", 1) == ["logins"]


def test_the_datasource_answers_promql_over_blocks_and_open_slices(
    store: Store, redis_client: redis.Redis
) -> None:
    ids = [f'http.requests{{route="/{r}",status="{s}"}}' for r in range(5) for s in (200, 500)]
    store.apply({i: {t: 1 for t in range(NOW - 600, NOW)} for i in ids})
    for series_id in ids:
        assert len(seal(redis_client, store, series_id, NOW - 300)) == 300
    app = create_app(store.settings, clock=lambda: NOW)

    def by_status(query: str, at: int) -> list[tuple[str, str]]:
        body = client.post("/api/v1/query", data={"query": query, "time": str(at)}).json()
        return sorted((r["metric"]["status"], r["value"][1]) for r in body["data"]["result"])

    with TestClient(app) as client:
        total = "sum by (status) (increase(http_requests_total[10m]))"
        assert by_status(total, NOW) == [("200", "3000"), ("500", "3000")]
        across = "sum by (status) (increase(http_requests_total[1m]))"  # half sealed, half open
        assert by_status(across, NOW - 270) == [("200", "300"), ("500", "300")]
        counted = client.post(
            "/api/v1/query", data={"query": "count(http_requests_total)", "time": str(NOW)}
        ).json()
        assert counted["data"]["result"][0]["value"][1] == "10"
        values = client.post(
            "/api/v1/label/route/values", data={"match[]": "http_requests_total"}
        ).json()
        assert values["data"] == [f"/{r}" for r in range(5)]
