"""Which node each command of a batch goes to (pure: a fake slot map of key -> node)."""

from __future__ import annotations

from slicecount.operations.batches import Batch, ScriptCall
from slicecount.store.routing import first_key, split


def node_of(key: str) -> str:
    return key.split(":", 1)[0]  # "a:x" lives on node "a"


def test_a_transaction_goes_whole_to_the_node_of_its_first_key() -> None:
    chunk = Batch([("ZADD", "b:known", "NX", 0, "m"), ("HINCRBY", "b:count", "60", 1)], True)
    assert split(chunk, node_of, "default") == [("b", chunk, [0, 1])]
    script = Batch([ScriptCall("trim", ("c:known", "c:count"), ())])
    assert split(script, node_of, "default") == [("c", script, [0])]
    assert split(Batch([("PING",)]), node_of, "default")[0][0] == "default"


def test_a_pipeline_over_nodes_is_split_and_keyless_commands_go_with_the_first() -> None:
    batch = Batch([("HMGET", "a:1", "0"), ("PING",), ("HMGET", "b:1", "0"), ("HGET", "a:2", "0")])
    parts = split(batch, node_of, "default")
    assert [(node, sub.commands, at) for node, sub, at in parts] == [
        ("a", [("HMGET", "a:1", "0"), ("PING",), ("HGET", "a:2", "0")], [0, 1, 3]),
        ("b", [("HMGET", "b:1", "0")], [2]),
    ]
    assert first_key(("SCRIPT", "LOAD", "x")) is None and first_key(("GET", "k")) == "k"


def test_the_parts_of_a_raw_pipeline_are_read_raw() -> None:
    batch = Batch([("GET", "a:hll"), ("GET", "b:hll")], raw=True)
    assert [sub.raw for _, sub, _ in split(batch, node_of, "default")] == [True, True]
