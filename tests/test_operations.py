"""The store operations are pure: driven here with the replies Redis gives, no server needed."""

from __future__ import annotations

from typing import Any

import pytest
from redis.crc import key_slot

from slicecount.config import Settings
from slicecount.core.keys import series_digest
from slicecount.errors import StoreError
from slicecount.operations import annotating, chunking, compacting, reading, trimming, writing
from slicecount.operations.batches import Batch, Context, Operation, ScriptCall

T0 = 1_700_000_000
CTX = Context.of(Settings(precisions=(1, 60), layout="book"), clock=lambda: T0 + 0.5)
"""The book's layout: its commands are the book's (the blocks layout's: test_blocks_layout.py)."""


def drive(operation: Operation[Any], *replies: list[Any]) -> tuple[list[Batch], Any]:
    """Run an operation, answering its batches with ``replies`` in turn."""
    sent: list[Batch] = []
    answers = iter(replies)
    try:
        batch = next(operation)
        while True:
            sent.append(batch)
            batch = operation.send(next(answers))
    except StopIteration as done:
        return sent, done.value


def plain(batch: Batch) -> list[tuple[Any, ...]]:
    """The batch's commands (none of them a script call)."""
    commands = [c for c in batch.commands if isinstance(c, tuple)]
    assert len(commands) == len(batch.commands)
    return commands


def transaction(batch: Batch) -> tuple[dict[str, set[str]], dict[str, dict[int, int]]]:
    """A write's MULTI/EXEC read back: members per registry, increments per hash."""
    assert batch.transaction and batch.bulk
    members: dict[str, set[str]] = {}
    increments: dict[str, dict[int, int]] = {}
    for command in plain(batch):
        if command[0] == "ZADD":
            assert command[2] == "NX" and set(command[3::2]) == {0}
            members.setdefault(command[1], set()).update(command[4::2])
        elif command[0] == "HINCRBY":
            slices = increments.setdefault(command[1], {})
            assert command[2] not in slices  # one HINCRBY per slice: summed before
            slices[command[2]] = command[3]
    return members, increments


def test_incr_is_one_transaction_of_members_and_increments() -> None:
    sent, _ = drive(writing.incr(CTX, "hits", 2, {"a": "x"}), [1, 1, 1])
    members, increments = transaction(sent[0])
    assert members == {"known:": {'1:hits{a="x"}', '60:hits{a="x"}'}}
    assert increments == {'count:1:hits{a="x"}': {T0: 2}, 'count:60:hits{a="x"}': {T0 - T0 % 60: 2}}


def test_incr_raises_when_redis_refuses_a_write() -> None:
    with pytest.raises(StoreError, match="refused"):
        drive(writing.incr(CTX, "hits"), [1, 1, Exception("WRONGTYPE")])


def test_a_buffer_over_several_seconds_sums_each_slice_once() -> None:
    buffer = {T0: {"a": 1, "b": 2}, T0 + 1: {"a": 3}, T0 + 2: {"b": -2}}
    (chunk,), out_of_range, _ = chunking.prepare(CTX, buffer)
    members, increments = transaction(drive(writing.write_chunk(CTX, chunk), [1] * 6)[0][0])
    assert increments == {
        "count:1:a": {T0: 1, T0 + 1: 3},
        "count:60:a": {T0 - T0 % 60: 4},
        "count:1:b": {T0: 2, T0 + 2: -2},  # b sums to 0 at 60 s: nothing to write there
    }
    assert members == {"known:": {"1:a", "60:a", "1:b"}} and out_of_range == 0


def test_a_numbered_chunk_is_applied_at_most_once() -> None:
    (chunk,), _, _ = chunking.prepare(CTX, {T0: {"a": 1}})
    # new: WATCH + GET find no number, the transaction sets it
    sent, written = drive(
        writing.write_chunk(CTX, chunk, "w1", 7), ["OK", None], [1, 1, 1, "OK", 1]
    )
    assert plain(sent[0]) == [("WATCH", "writer:w1"), ("GET", "writer:w1")]
    assert plain(sent[1])[-2:] == [("SET", "writer:w1", 7), ("ZADD", "writers:", T0, "w1")]
    assert written == (False, 0, 0)
    # sent again after a lost reply: the number is there, nothing is written
    sent, written = drive(writing.write_chunk(CTX, chunk, "w1", 7), ["OK", "7"], ["OK"])
    assert written.duplicate and plain(sent[1]) == [("UNWATCH",)]
    # the in-flight copy landed between WATCH and EXEC: Redis dropped ours; look again
    sent, written = drive(
        writing.write_chunk(CTX, chunk, "w1", 7), ["OK", "6"], [], ["OK", "7"], ["OK"]
    )
    assert written.duplicate and len(sent) == 4


def test_apply_validates_its_input_and_counts_refusals() -> None:
    with pytest.raises(ValueError, match=r"1\.5"):
        drive(writing.apply(CTX, {"a": {T0: 1.5}}))  # type: ignore[dict-item]
    for second in (-3, 10, int(T0 + 1e6)):  # before 1970, before 2000, far ahead
        with pytest.raises(ValueError, match=str(second)):
            drive(writing.apply(CTX, {"a": {second: 1}}))
    with pytest.raises(ValueError, match="64-bit"):
        drive(writing.apply(CTX, {"a": {T0: 2**63}}))
    with pytest.raises(ValueError, match="canonical"):
        drive(writing.apply(CTX, {'a{z="1",b="2"}': {T0: 1}}))
    _, refused = drive(writing.apply(CTX, {"a": {T0: 1}}), [1, Exception("WRONGTYPE"), 1])
    assert refused == 1


def test_sums_past_64_bits_are_left_out_and_reported() -> None:
    big = 2**62
    chunks, out_of_range, _ = chunking.prepare(CTX, {T0: {"a": big, "b": 1}, T0 + 1: {"a": big}})
    assert out_of_range == 1  # a at 60 s (2**63); a's 1 s slices fit one by one
    _, increments = transaction(drive(writing.write_chunk(CTX, chunks[0]), [1] * 6)[0][0])
    assert "count:60:a" not in increments and increments["count:1:a"] == {T0: big, T0 + 1: big}


def test_big_buffers_split_into_chunks_per_shard(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunking, "CHUNK_INCREMENTS", 4)
    sharded = Context.of(Settings(precisions=(1, 60), shards=3, layout="book"))
    chunks, _, _ = chunking.prepare(sharded, {T0: {f"s{i}": 1 for i in range(12)}})
    assert len(chunks) > 3
    for chunk in chunks:  # every hash's registry member travels with its increment
        batch = drive(writing.write_chunk(sharded, chunk), [1] * 10)[0][0]
        tag = f"{{{chunk.shard}}}"
        assert all(tag in command[1] for command in plain(batch))  # one slot (Redis Cluster)
        members, increments = transaction(batch)
        listed = {m for ms in members.values() for m in ms}
        assert {f"count:{tag}:{m}" for m in listed} == set(increments)


def test_reads_decode_raw_replies() -> None:
    _, pairs = drive(reading.get(CTX, "a", 60), [["60", "2", "0", "1", "junk", "3"]][:1])
    assert pairs == [(0, 1), (60, 2)]
    _, found = drive(reading.series(CTX, "a", 60), ["0", ['60:a{x="1"}']])
    assert found == ["a", 'a{x="1"}']
    sent, counts = drive(reading.read(CTX, ["a"], 60, T0, T0 + 60), [["3", None]])
    first = T0 - T0 % 60
    assert sent[0].commands == [("HMGET", "count:60:a", str(first), str(first + 60))]
    assert counts == {"a": [3, None]}
    assert drive(reading.read(CTX, [], 60, T0, T0))[1] == {}  # nothing to send


def test_all_series_pages_with_a_lex_cursor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "PAGE", 2)
    sent, found = drive(reading.all_series(CTX, 60), [["60:a", "60:b"]], [["60:c"]])
    assert found == ["a", "b", "c"]
    assert plain(sent[1])[0][2] == "(60:b"


def test_argument_checks_run_before_anything_is_sent() -> None:
    for operation in (
        reading.get(CTX, "a", 7),
        reading.read(CTX, "a", 60, 0, 1),
        reading.read(CTX, ["a"], 60, 5, 1),
        writing.incr(CTX, "bad name"),
        writing.incr(CTX, "a", now=-1),
        annotating.annotate(CTX, ""),
        trimming.trim_chunk(CTX, trimming.Trim(60, "full", T0, T0, T0 - 60), [], 8),
        trimming.trim_chunk(CTX, trimming.Trim(60, "other", T0, T0, T0), [], 8),
        trimming.trim_chunk(CTX, trimming.Trim(7, "full", T0, T0, T0), [], 8),
    ):
        with pytest.raises(ValueError):
            next(operation)


def test_trim_chunk_declares_every_key_and_reads_the_next_members() -> None:
    trim = trimming.Trim(60, "cold", T0, T0, T0 + 60)
    sent, chunk = drive(
        trimming.trim_chunk(CTX, trim, [], 2), [[0, 0, 0, [], ["60:a", "60:b"], 40]]
    )
    (call,) = sent[0].commands
    assert isinstance(call, ScriptCall) and call.keys == ("known:",)  # a walk starts reading
    assert call.args[7:] == ("[60:", "(60;", 2)
    assert (chunk.following, chunk.scanned) == (["60:a", "60:b"], 0)
    sent, chunk = drive(
        trimming.trim_chunk(CTX, trim, chunk.following, 3),
        [[5, 1, 2, ["count:60:x is a string"], ["60:c"], 1500]],
    )
    (call,) = sent[0].commands
    assert isinstance(call, ScriptCall)
    assert call.keys == ("known:", "count:60:a", "count:60:b")
    assert call.args[7:] == ("(60:b", "(60;", 3, "60:a", "60:b")
    assert (chunk.following, chunk.scanned, chunk.deleted, chunk.removed, chunk.bad) == (
        ["60:c"], 2, 5, 1, ["count:60:x is a string"],
    )  # fmt: skip
    assert chunk.held == 0.0015  # the script's own server time, in seconds
    assert drive(trimming.trim_chunk(CTX, trim, [], 0)) == ([], trimming.TrimChunk([], 0, 0, 0, 0))
    assert drive(trimming.cleaner_cutoffs(CTX), [["60", str(T0), "x", "y"]])[1] == {60: T0}


def test_forget_writers_lists_then_declares_each_writers_key() -> None:
    sent, forgotten = drive(trimming.forget_writers(CTX, T0), [[]])
    assert forgotten == 0 and len(sent) == 1  # nobody quiet: no script call
    sent, forgotten = drive(trimming.forget_writers(CTX, T0 + 0.7), [["w1", "w2"]], [1])
    assert plain(sent[0]) == [("ZRANGEBYSCORE", "writers:", "-inf", f"({T0}", "LIMIT", 0, 1000)]
    (call,) = sent[1].commands
    assert isinstance(call, ScriptCall)
    keys = ("writers:", "marks:", "writer:w1", "writer:w2")
    assert (call.keys, call.args) == (keys, (T0, "w1", "w2"))
    assert forgotten == 1


def test_every_key_of_a_cleaner_script_call_is_in_its_shards_slot() -> None:
    book = Settings(precisions=(1, 60), shards=64, layout="book")
    sharded = Context.of(book, clock=lambda: T0)
    trim = trimming.Trim(60, "full", T0, T0, T0)
    for shard in (0, 17, 63):
        members = ["60:a", '60:b{x="1"}', "60:c"]
        (batch,), _ = drive(
            trimming.trim_chunk(sharded, trim, members, 2, shard), [[0, 0, 0, [], [], 9]]
        )
        (call,) = batch.commands
        assert isinstance(call, ScriptCall) and len(call.keys) == 4
        assert call.keys[1] == f"count:{{{shard}}}:60:a"
        assert {key_slot(key.encode()) for key in call.keys} == {key_slot(f"{{{shard}}}".encode())}
        sent, _ = drive(trimming.forget_writers(sharded, T0, shard), [["w1", "w2"]], [2])
        (call,) = sent[1].commands
        assert isinstance(call, ScriptCall) and len(call.keys) == 4
        assert len({key_slot(key.encode()) for key in call.keys}) == 1


def test_annotations_round_trip_through_json() -> None:
    (batch,), note = drive(annotating.annotate(CTX, "v1\nmore", ["deploy"]), [1])
    member = plain(batch)[0][3]
    assert note["title"] == "v1" and note["time"] == (T0 * 1000 + 500)
    _, found = drive(annotating.find(CTX, T0, T0 + 1, ["deploy"]), [[member, "not json"]])
    assert found == [note]
    assert drive(annotating.find(CTX, T0, T0 + 1, ["other"]), [[member]])[1] == []


def test_a_compaction_reads_one_snapshot_and_its_script_call_stays_in_the_shards_slot() -> None:
    blocks = Settings(precisions=(1, 60), shards=64, layout="blocks")
    sharded = Context.of(blocks, clock=lambda: T0)
    shard = 17
    a, b = [f"s{i}" for i in range(500) if sharded.keys.shard(f"s{i}") == shard][:2]
    members = [f"0:{a}", f"0:{b}", "0:elsewhere"]  # the last one's series is in shard 10
    op = compacting.compact(sharded, shard, members, T0 - 10, T0)
    snapshot = next(op)
    assert snapshot.transaction and snapshot.raw
    assert [c[0] for c in plain(snapshot)] == ["HGETALL", "GETRANGE"] * 2
    # a: two sealed seconds and one still open; b: nothing at all (its member goes)
    call_batch = op.send([[b"%d" % (T0 - 20), b"3", b"%d" % (T0 - 19), b"1", b"%d" % T0, b"2"],
                          b"", [], b""])  # fmt: skip
    (call,) = call_batch.commands
    assert isinstance(call, ScriptCall) and call.name == "compact"
    da, db = series_digest(a), series_digest(b)
    assert call.keys == (f"known:{{{shard}}}", f"open:{{{shard}}}:{da}", f"block:{{{shard}}}:{da}",
                         f"open:{{{shard}}}:{db}", f"block:{{{shard}}}:{db}")  # fmt: skip
    assert {key_slot(key.encode()) for key in call.keys} == {key_slot(f"{{{shard}}}".encode())}
    a_fields = call.args[call.args.index(b"%d" % (T0 - 20)) :][:4]
    assert a_fields == (b"%d" % (T0 - 20), b"3", b"%d" % (T0 - 19), b"1")
    assert call.args[-4:] == (f"0:{b}", 0, 0, 0)  # no block, no pieces, no fields
    try:
        op.send([[[1, 1], 1, 250, 40]])
    except StopIteration as stop:
        done = stop.value
    assert (done.compacted, done.moved, done.removed, done.written) == (2, 2, 1, 250)
    assert done.bad == [f"known:{{{shard}}} member '0:elsewhere'"]


def test_a_compaction_splits_its_series_into_calls_within_the_budget() -> None:
    members = ["0:a", "0:b", "0:c"]
    op = compacting.compact(CTX, 0, members, T0 - 10, T0, budget=compacting.SERIES_UNITS + 2)
    snapshot = next(op)
    two_fields = [b"%d" % (T0 - 20), b"1", b"%d" % (T0 - 19), b"1"]
    batch = op.send([two_fields, b"", two_fields, b"", two_fields, b""])
    calls = []
    try:
        while True:  # one series a call: each costs SERIES_UNITS + 2 fields (+ its bytes)
            (call,) = batch.commands
            assert isinstance(call, ScriptCall)
            calls.append(call.keys)
            batch = op.send([[[1], 0, 100, 500]])
    except StopIteration as stop:
        done = stop.value
    assert snapshot.transaction
    digests = [series_digest(s) for s in "abc"]
    assert calls == [("known:", f"open:{d}", f"block:{d}") for d in digests]
    assert (done.calls, done.compacted, done.moved, done.written) == (3, 3, 6, 300)
    assert done.holds == [(compacting.SERIES_UNITS + 2, 0.0005)] * 3 and done.held == 0.0005
