"""Which node of a Redis Cluster each command of a batch goes to. Pure.

Every key of one shard carries the shard's hash tag, so a transaction (a flush chunk, a trim)
lies in one slot and goes whole to one node; a plain pipeline that spans shards (a read of
many series) is split into one sub-batch per node, whose replies are put back in order.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

from slicecount.operations.batches import Batch, Command, ScriptCall

N = TypeVar("N", bound=Hashable)

KEYLESS = frozenset({"PING", "SCRIPT", "INFO", "MULTI", "EXEC", "DISCARD", "ECHO", "TIME"})


def first_key(command: Command | ScriptCall) -> str | None:
    """The key a command works on (its first), None for one without keys."""
    if isinstance(command, ScriptCall):
        return command.keys[0] if command.keys else None
    if str(command[0]).upper() in KEYLESS or len(command) < 2:
        return None
    return str(command[1])


def split(
    batch: Batch, node_of: Callable[[str], N], default: N
) -> list[tuple[N, Batch, list[int]]]:
    """``(node, sub-batch, positions in the batch)`` for each node the batch reaches. A
    transaction, a script call or a batch on one node stays whole; commands without keys go
    with the first node (or ``default``)."""
    whole = list(range(len(batch.commands)))
    if batch.transaction or len(batch.commands) == 1:
        # one slot by construction: its first key decides (a 50 000-command flush chunk
        # would otherwise hash every key; Redis refuses a cross-slot one with CROSSSLOT)
        key = next((k for k in map(first_key, batch.commands) if k is not None), None)
        return [(default if key is None else node_of(key), batch, whole)]
    nodes: list[N | None] = []
    for command in batch.commands:
        key = first_key(command)
        nodes.append(None if key is None else node_of(key))
    first = next((n for n in nodes if n is not None), default)
    if len({n for n in nodes if n is not None}) <= 1:
        return [(first, batch, whole)]
    parts: dict[N, tuple[Batch, list[int]]] = {}
    for index, (command, node) in enumerate(zip(batch.commands, nodes, strict=True)):
        part = first if node is None else node
        sub, positions = parts.setdefault(part, (Batch(raw=batch.raw, bulk=batch.bulk), []))
        sub.commands.append(command)
        positions.append(index)
    return [(node, sub, positions) for node, (sub, positions) in parts.items()]
