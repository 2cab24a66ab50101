"""Prepared writes waiting for a known outcome, each applied by Redis at most once.

A flush is prepared into chunks; each chunk gets the next number of this writer (a random id,
new in every process) and waits here until Redis has answered for it. A chunk whose reply was
lost (a timeout after sending, a reset, a failover) is sent again *unchanged*; its
transaction is guarded by the writer's last applied number, kept in Redis beside the data
(``writing.write_chunk``), so it applies only if it is new. Chunks go out in order and the
next waits for the one before, so "not newer than the last applied" means "applied".
"""

from __future__ import annotations

import logging
import secrets
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from slicecount.errors import StoreError
from slicecount.operations.chunking import Chunk
from slicecount.recording.losses import refused_by_redis
from slicecount.store import Store

logger = logging.getLogger("slicecount")


class Numbered(NamedTuple):
    seq: int
    chunk: Chunk


class Outbox:
    """The numbered chunks of one writer, oldest first."""

    def __init__(self) -> None:
        self.failing = False
        self.warned_samples = False
        self.reset()

    def reset(self) -> None:
        """A new writer: a forked child must never send its parent's chunks, nor reuse its
        numbers."""
        self.writer = secrets.token_hex(8)
        self._seq = 0
        self._queue: deque[Numbered] = deque()
        self.duplicates = 0
        """Chunks sent again whose first copy Redis had applied (each one a count saved from
        doubling)."""

    def __len__(self) -> int:
        return len(self._queue)

    def describe(self) -> str:
        """``"2 chunks (70000 increments)"``: what waits, for a log line."""
        chunks, increments = len(self._queue), sum(i.chunk.increments for i in self._queue)
        return f"{chunks} chunk{'' if chunks == 1 else 's'} ({increments} increments)"

    @property
    def events(self) -> int:
        """Events the waiting chunks count (their histogram sums left out)."""
        return sum(item.chunk.events for item in self._queue)

    def put(self, chunks: list[Chunk]) -> None:
        for chunk in chunks:
            self._seq += 1
            self._queue.append(Numbered(self._seq, chunk))

    def deliver(
        self,
        store: Store,
        refuse: Callable[[Exception, int], None],
        buffered: Callable[[], int] | None = None,
    ) -> bool:
        """Send chunks in order until the outbox is empty (True) or one's outcome stays
        unknown (False). What Redis refused is counted through ``refuse(error, increments)``:
        commands refused inside an applied chunk, and chunks refused as a whole for good.
        ``buffered()``: the oldest second the writer's buffer may still send (its mark, with
        the chunks waiting here: ``mark``)."""
        marks = store.settings.layout == "blocks"  # (the book's layout has no marks)
        while self._queue:
            seq, chunk = self._queue[0]
            try:
                mark = self.mark(chunk.shard, buffered) if marks else None
                written = store.write_chunk(chunk, self.writer, seq, mark)
            except (TypeError, ValueError) as exc:  # it cannot even be packed: never sent
                refuse(refused_by_redis(f"a write could not be sent: {exc}"), chunk.increments)
            except StoreError as exc:
                if not exc.permanent:
                    if not self.failing:
                        self.failing = True
                        logger.warning("slicecount cannot write to redis, buffering: %s", exc)
                    return False
                # Redis refused the call itself (not a passing cause): sending the same again
                # cannot help, and nothing of it was written.
                refuse(refused_by_redis(f"redis refused a write: {exc}"), chunk.increments)
            else:
                if written.refused:
                    error = refused_by_redis("redis refused increments (a key of another type?)")
                    refuse(error, written.refused)
                if written.samples_refused and not self.warned_samples:
                    self.warned_samples = True  # samples, not counts: said once, never counted
                    logger.warning("redis refused exemplars (a key of another type?)")
                self.duplicates += written.duplicate
            self._queue.popleft()
        if self.failing:
            self.failing = False
            logger.warning("slicecount writes to redis again")
        return True

    def mark(self, shard: int, buffered: Callable[[], int] | None) -> int | None:
        """The oldest second this writer may still send to ``shard``: its waiting chunks'
        for that shard and the buffer's (the blocks layout seals nothing from it on)."""
        seconds = [i.chunk.oldest for i in self._queue if i.chunk.shard == shard]
        if buffered is not None:
            seconds.append(buffered())
        known = [s for s in seconds if s is not None]
        return min(known) if known else None
