"""Reading a batch's replies one at a time (pure)."""

from __future__ import annotations

import pytest

from slicecount.errors import StoreError
from slicecount.operations.batches import Batch
from slicecount.store.replies import Refusal, ReplyReader, ScriptMissing


def read(batch: Batch, *replies: object) -> list[object]:
    reader = ReplyReader(batch)
    assert reader.expected == len(replies)
    for reply in replies:
        reader.feed(reply)
    return reader.result()


def test_a_transaction_answers_ok_queued_then_exec() -> None:
    batch = Batch([("INCR", "a"), ("INCR", "b")], transaction=True)
    assert read(batch, "OK", "QUEUED", "QUEUED", [1, 2]) == [1, 2]


def test_a_refusal_says_whether_sending_again_may_help() -> None:
    plain = Batch([("INCR", "a"), ("INCR", "b")], transaction=True)
    with pytest.raises(StoreError, match="WRONGTYPE") as refused:
        read(plain, "OK", "QUEUED", "QUEUED", [1, Exception("WRONGTYPE")])
    assert refused.value.permanent
    with pytest.raises(StoreError) as passing:
        read(Batch([("EVALSHA", "x", 0)]), Refusal("OOM command not allowed", transient=True))
    assert not passing.value.permanent


def test_an_aborted_transaction_wrote_nothing_and_says_so() -> None:
    batch = Batch([("INCR", "a")], transaction=True)
    with pytest.raises(StoreError, match="OOM") as aborted:
        read(batch, "OK", Refusal("OOM command not allowed", True), Refusal("EXECABORT"))
    assert not aborted.value.permanent
    assert read(Batch([("INCR", "a")], transaction=True), "OK", "QUEUED", None) == []  # WATCH


def test_plain_batches_raise_the_first_refusal_and_noscript_apart() -> None:
    with pytest.raises(StoreError, match="ERR"):
        read(Batch([("GET", "a"), ("BAD",)]), "1", Exception("ERR unknown command"))
    with pytest.raises(ScriptMissing):
        read(Batch([("EVALSHA", "x", 0)]), ScriptMissing("no script"))


def test_error_replies_that_refuse_every_write_are_passing() -> None:
    from redis import exceptions

    from slicecount.store.failures import refusal

    for message in (
        "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist",
        "@user_script: 1: -OOM command not allowed when used memory > 'maxmemory'.",
        "BUSY Redis is busy running a script.",
        "NOPERM this user has no permissions to run the 'evalsha' command",
    ):
        made = refusal(exceptions.ResponseError(message))
        assert isinstance(made, Refusal) and made.transient, message
    made = refusal(exceptions.ResponseError("WRONGTYPE Operation against a key"))
    assert isinstance(made, Refusal) and not made.transient
    assert isinstance(refusal(exceptions.NoScriptError("No matching script")), ScriptMissing)
