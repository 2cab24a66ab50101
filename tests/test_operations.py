"""The store operations are pure: driven here with the replies Redis gives, no server needed."""

from __future__ import annotations

from typing import Any

import pytest

from slicecount import annotating, reading, trimming, writing
from slicecount.batches import Batch, Context, Operation, ScriptCall
from slicecount.config import Settings
from slicecount.errors import StoreError

T0 = 1_700_000_000
CTX = Context.of(Settings(precisions=(1, 60)), clock=lambda: T0 + 0.5)


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


def test_incr_is_one_transaction_of_zadd_and_hincrby_per_precision() -> None:
    sent, _ = drive(writing.incr(CTX, "hits", 2, {"a": "x"}), [1, 1, 1])
    (batch,) = sent
    assert batch.transaction and batch.bulk
    assert batch.commands == [
        ("ZADD", "known:", "NX", 0, '1:hits{a="x"}', 0, '60:hits{a="x"}'),
        ("HINCRBY", 'count:1:hits{a="x"}', T0, 2),
        ("HINCRBY", 'count:60:hits{a="x"}', T0 - T0 % 60, 2),
    ]


def test_incr_raises_when_redis_refuses_a_write() -> None:
    with pytest.raises(StoreError, match="refused"):
        drive(writing.incr(CTX, "hits"), [1, 1, Exception("WRONGTYPE")])


def test_a_buffer_over_several_seconds_sums_each_slice_once() -> None:
    buffer = {T0: {"a": 1, "b": 2}, T0 + 1: {"a": 3}, T0 + 2: {"b": -2}}
    (batch,), refused = drive(writing.write_buffer(CTX, buffer), [1] * 20)
    increments = sorted(c for c in plain(batch) if c[0] == "HINCRBY")
    assert increments == [
        ("HINCRBY", "count:1:a", T0, 1),
        ("HINCRBY", "count:1:a", T0 + 1, 3),
        ("HINCRBY", "count:1:b", T0, 2),
        ("HINCRBY", "count:1:b", T0 + 2, -2),
        ("HINCRBY", "count:60:a", T0 - T0 % 60, 4),  # b sums to 0 at 60 s: nothing to write
    ]
    assert refused == 0
    zadd = plain(batch)[0]
    assert zadd[:3] == ("ZADD", "known:", "NX") and set(zadd[4::2]) == {"1:a", "1:b", "60:a"}


def test_apply_validates_its_input_and_counts_refusals() -> None:
    with pytest.raises(ValueError, match=r"1\.5"):
        drive(writing.apply(CTX, {"a": {T0: 1.5}}))  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="-3"):
        drive(writing.apply(CTX, {"a": {-3: 1}}))
    _, refused = drive(writing.apply(CTX, {"a": {T0: 1}}), [1, Exception("WRONGTYPE"), 1])
    assert refused == 1


def test_big_buffers_split_into_several_transactions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writing, "APPLY_CHUNK_COMMANDS", 4)
    buffer = {T0: {f"s{i}": 1 for i in range(5)}}
    sent, _ = drive(writing.write_buffer(CTX, buffer), *([[1] * 10] * 3))
    assert len(sent) == 3
    for batch in sent:  # every hash's registry member travels with its increment
        members = {m for c in plain(batch) if c[0] == "ZADD" for m in c[4::2]}
        hashes = {c[1] for c in plain(batch) if c[0] == "HINCRBY"}
        assert {"count:" + m for m in members} == hashes


def test_reads_decode_raw_replies() -> None:
    _, pairs = drive(reading.get(CTX, "a", 60), [["60", "2", "0", "1", "junk", "3"]][:1])
    assert pairs == [(0, 1), (60, 2)]
    _, found = drive(reading.series(CTX, "a", 60), ["0", ['60:a{x="1"}']])
    assert found == ["a", 'a{x="1"}']
    sent, counts = drive(reading.read(CTX, ["a"], 60, T0, T0 + 60), [["3", None]])
    assert sent[0].commands == [("HMGET", "count:60:a", T0 - T0 % 60, T0 - T0 % 60 + 60)]
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
        trimming.trim_chunk(CTX, 60, None, 0, "full", T0, T0),
    ):
        with pytest.raises(ValueError):
            next(operation)


def test_trim_chunk_calls_the_script_and_continues_after_the_last_member() -> None:
    sent, chunk = drive(
        trimming.trim_chunk(CTX, 60, None, 2, "full", T0, T0),
        [["60:b", 2, 5, 1, 2, "count:60:x is a string"]],
    )
    (call,) = sent[0].commands
    assert isinstance(call, ScriptCall) and call.keys == ("known:",)
    assert (chunk.next_start, chunk.scanned, chunk.deleted, chunk.bad) == (
        "(60:b", 2, 5, ["count:60:x is a string"],
    )  # fmt: skip
    assert drive(trimming.cleaner_cutoffs(CTX), [["60", str(T0), "x", "y"]])[1] == {60: T0}


def test_annotations_round_trip_through_json() -> None:
    (batch,), note = drive(annotating.annotate(CTX, "v1\nmore", ["deploy"]), [1])
    member = plain(batch)[0][3]
    assert note["title"] == "v1" and note["time"] == (T0 * 1000 + 500)
    _, found = drive(annotating.find(CTX, T0, T0 + 1, ["deploy"]), [[member, "not json"]])
    assert found == [note]
    assert drive(annotating.find(CTX, T0, T0 + 1, ["other"]), [[member]])[1] == []
