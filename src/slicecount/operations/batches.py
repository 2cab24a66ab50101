"""Store operations as sans-I/O generators of command batches. Pure.

An operation is a generator that checks its arguments, yields ``Batch`` objects, receives each
batch's replies and returns the operation's result. ``Store`` and ``AsyncStore`` only send
batches and read replies, so keys, slice math, argument checks and reply decoding are written
once, in the operation modules (``writing``, ``reading``, ``annotating``, ``trimming``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from slicecount.config import Settings
from slicecount.core.keys import KeySpace

T = TypeVar("T")
Command = tuple[Any, ...]
Clock = Callable[[], float]
Operation = Generator["Batch", list[Any], T]


@dataclass(frozen=True)
class ScriptCall:
    """A call of one of the package's Lua scripts (sent as EVALSHA)."""

    name: str
    keys: tuple[str, ...]
    args: tuple[Any, ...]


@dataclass
class Batch:
    """Commands sent in one round trip, inside MULTI/EXEC when ``transaction`` is set; the
    first refusal raises ``StoreError``, except in a ``bulk`` batch, whose refused commands
    come back in place as exceptions: inside the EXEC of a transaction (the others were
    applied: count, never retry) or in a pipeline (the reader decides what each means).
    A batch holding a script call holds only that call, so it can be sent again after
    NOSCRIPT, unless every script call in it is idempotent (``unique_add``). ``raw``: replies
    come back undecoded (bytes), for binary strings such as a HyperLogLog carried between
    cluster slots."""

    commands: list[Command | ScriptCall] = field(default_factory=list)
    transaction: bool = False
    bulk: bool = False
    raw: bool = False


@dataclass(frozen=True)
class Context:
    """What every operation needs: the settings, the key layout and the clock."""

    settings: Settings
    keys: KeySpace
    clock: Clock = time.time

    @classmethod
    def of(cls, settings: Settings, clock: Clock = time.time) -> Context:
        return cls(settings, KeySpace(settings.prefix, settings.shards), clock)


def ping(ctx: Context) -> Operation[bool]:
    """True when Redis answers."""
    (reply,) = yield Batch([("PING",)])
    return reply is True or reply == "PONG"


def pairs(flat: Sequence[Any]) -> Iterator[tuple[Any, Any]]:
    """``[k1, v1, k2, v2]`` (a raw HGETALL or ZSCAN reply) -> ``(k1, v1), (k2, v2)``."""
    items = iter(flat)
    return zip(items, items, strict=True)
