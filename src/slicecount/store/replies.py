"""Reading the replies of one batch, one reply at a time, as the executor receives them. Pure.

The executors (sync and asyncio) only send bytes and feed each reply here, an error reply as a
``Refusal`` (or ``ScriptMissing`` for NOSCRIPT); this object knows the MULTI/QUEUED/EXEC
framing and what a refusal means for the caller.
"""

from __future__ import annotations

from typing import Any

from slicecount.errors import StoreError
from slicecount.operations.batches import Batch


class ScriptMissing(StoreError):
    """The server does not know a script (restarted or flushed): load it and send again."""


class Refusal(Exception):
    """An error reply. ``transient``: the cause may pass (OOM, a script running, a replica
    being promoted...), so the same command may be sent again later."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class ReplyReader:
    """Collects the replies of ``batch``; ``result()`` once ``expected`` were fed."""

    __slots__ = ("_refused", "_replies", "batch", "expected")

    expected: int
    """How many replies to feed before ``result()``."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        # a transaction answers MULTI's OK, one QUEUED (or refusal) per command, then EXEC
        self.expected = len(batch.commands) + (2 if batch.transaction else 0)
        self._replies: list[Any] = []
        self._refused = False

    def feed(self, reply: Any) -> None:
        self._replies.append(reply)
        if isinstance(reply, Exception):
            self._refused = True

    def feed_all(self, replies: list[Any], refused: bool) -> None:
        """The replies at once (an executor that read them together), ``refused`` if one is an
        exception."""
        self._replies += replies
        self._refused = self._refused or refused

    def result(self) -> list[Any]:
        """The commands' replies, or ``StoreError`` for the first refusal (a ``bulk`` batch's
        refusals stay in place); ``[]`` for a transaction Redis dropped because a WATCHed key
        changed."""
        if self.batch.transaction:
            return self._transaction()
        if not self._refused:  # (thousands of replies in a refresh's read)
            return self._replies
        for reply in self._replies:
            if not (self.batch.bulk and isinstance(reply, Refusal)):
                _raise_if_refused(reply)  # (NOSCRIPT always: the executor loads and resends)
        return self._replies

    def _transaction(self) -> list[Any]:
        queued, executed = self._replies[1:-1], self._replies[-1]
        for reply in queued:  # refused while queueing: EXECABORT, nothing was written
            _raise_if_refused(reply)
        if executed is None:
            return []  # a WATCHed key changed: Redis ran none of it (see writing.write_chunk)
        if not isinstance(executed, list):
            _raise_if_refused(executed)
            raise StoreError(f"redis did not run the transaction (EXEC answered {executed!r})")
        if not self.batch.bulk:
            for reply in executed:
                _raise_if_refused(reply)
        return executed


def _raise_if_refused(reply: Any) -> None:
    if isinstance(reply, ScriptMissing):
        raise reply
    if isinstance(reply, Refusal):
        raise StoreError(f"redis refused a command: {reply}", permanent=not reply.transient)
    if isinstance(reply, Exception):  # an error inside EXEC's array, as the client made it
        raise StoreError(f"redis refused a command: {reply}", permanent=True)
