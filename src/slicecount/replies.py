"""Reading the replies of one batch, one reply at a time, as the executor receives them. Pure.

The executors (sync and asyncio) only send bytes and feed each reply here (an error reply as
the exception object the client made of it, NOSCRIPT as ``ScriptMissing``); this object knows
the MULTI/QUEUED/EXEC framing and what each kind of batch makes of a refusal.
"""

from __future__ import annotations

from typing import Any

from slicecount.batches import Batch
from slicecount.errors import StoreError


class ScriptMissing(StoreError):
    """The server does not know a script (restarted or flushed): load it and send again."""


class ReplyReader:
    """Collects the replies of ``batch``; ``result()`` once ``done``."""

    __slots__ = ("_replies", "batch", "expected")

    expected: int
    """How many replies to feed before ``result()``."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        # a transaction answers MULTI's OK, one QUEUED (or refusal) per command, then EXEC
        self.expected = len(batch.commands) + (2 if batch.transaction else 0)
        self._replies: list[Any] = []

    def feed(self, reply: Any) -> None:
        self._replies.append(reply)

    def result(self) -> list[Any]:
        """The commands' replies, or ``StoreError`` (``ScriptMissing`` for NOSCRIPT)."""
        if self.batch.transaction:
            return self._transaction()
        for reply in self._replies:
            _raise_if_refused(reply)
        return self._replies

    def _transaction(self) -> list[Any]:
        queued, executed = self._replies[1:-1], self._replies[-1]
        refusals = [r for r in queued if isinstance(r, Exception)]
        if refusals or isinstance(executed, Exception):
            # EXECABORT (OOM under maxmemory, a malformed command): nothing was written
            cause = refusals[0] if refusals else executed
            raise StoreError(f"redis refused the whole transaction: {cause}")
        if not isinstance(executed, list):
            raise StoreError(f"redis did not run the transaction (EXEC answered {executed!r})")
        if not self.batch.bulk:
            for reply in executed:
                _raise_if_refused(reply)
        return executed


def _raise_if_refused(reply: Any) -> None:
    if isinstance(reply, ScriptMissing):
        raise reply
    if isinstance(reply, Exception):
        raise StoreError(f"redis refused a command: {reply}")
