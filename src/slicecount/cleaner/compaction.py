"""The blocks layout's part of a cleaner pass: every shard's series compacted (their sealed
open fields moved into their blocks, frames past retention dropped), in calls sized so that
none holds Redis much longer than ``TARGET_CALL_SECONDS``. The walk of a shard's registry is
itself the sweep: every series is visited every pass."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from slicecount.cleaner.schedule import sealed_point
from slicecount.cleaner.sizing import ChunkSizer
from slicecount.operations import compacting
from slicecount.operations.compacting import FIRST_BUDGET, SERIES_UNITS, Compacted
from slicecount.store import Store

logger = logging.getLogger("slicecount.cleaner")

TARGET_CALL_SECONDS = 0.001
"""What one compaction call should hold Redis: half the trims' aim, so that a call whose
Redis is descheduled a while (a busy host) still stays well under 5 ms."""
PAGE = 100
"""Series read in one snapshot (a MULTI of an HGETALL and a GETRANGE each: well under 2 ms)."""
LAYOUT = "blocks"
"""The ``Settings.layout`` whose sealed history this compacts."""


def uses_blocks(store: Store) -> bool:
    """Whether the store keeps its history in blocks (``Settings.layout``)."""
    return store.settings.layout == LAYOUT


@dataclass
class Compaction:
    """The figures of compacting every shard once."""

    series: int = 0  # registry members visited
    compacted: int = 0  # series rewritten
    moved: int = 0  # open fields moved into blocks
    expired: int = 0  # open fields dropped past every precision's retention
    written: int = 0  # bytes of blocks written
    conflicts: int = 0  # series skipped: another cleaner rewrote the block meanwhile
    removed: int = 0  # series left with nothing: their member removed
    bad: list[str] = field(default_factory=list)
    calls: int = 0  # script calls
    slowest_call_ms: float = 0.0  # the longest page (its reads, plan, calls) as the cleaner waited
    longest_hold_ms: float = 0.0  # server time of the longest script call
    sealed: dict[int, int] = field(default_factory=dict)  # shard -> its sealed point

    def add(self, done: Compacted) -> None:
        self.series += done.scanned
        self.compacted += done.compacted
        self.moved += done.moved
        self.expired += done.expired
        self.written += done.written
        self.conflicts += done.conflicts
        self.removed += done.removed
        self.calls += done.calls
        self.longest_hold_ms = max(self.longest_hold_ms, done.held * 1000)
        if len(self.bad) < 50:
            self.bad += done.bad


class Compactor:
    """Compacts a store's shards; keeps the size of its calls learnt between passes."""

    def __init__(self, store: Store, stopping: threading.Event | None = None) -> None:
        self.store = store
        # units of work per script call (compacting.compact's budget), learnt pass after pass
        self.sizes = ChunkSizer(FIRST_BUDGET, 4 * SERIES_UNITS, 100_000, TARGET_CALL_SECONDS)
        self.stopping = stopping or threading.Event()

    def run(self, now: float, writers_now: float | None = None) -> Compaction | None:
        """Compact every shard at ``now`` (retention), sealing by the writers' clock
        ``writers_now`` (default ``now``); None when stopped half way."""
        figures = Compaction()
        for shard in range(self.store.settings.shards):
            if not self.shard(shard, now, now if writers_now is None else writers_now, figures):
                return None
        return figures

    def shard(self, shard: int, now: float, writers_now: float, figures: Compaction) -> bool:
        """Walk one shard's registry; False when stopped half way."""
        store, ctx = self.store, self.store.context
        marks, live = store.run(compacting.writer_marks(ctx, shard, writers_now))
        sealed = sealed_point(writers_now, store.settings.precisions[0], marks, live)
        figures.sealed[shard] = sealed
        after: str | None = None
        again: list[str] = []
        while True:
            if self.stopping.is_set():
                return False
            page = again[:PAGE] or store.run(compacting.series_page(ctx, shard, after, PAGE))
            if not again and page:
                after = page[-1]
            again = again[len(page) :] if again else []
            if not page:
                return True
            began = time.perf_counter()
            done = store.run(compacting.compact(ctx, shard, page, sealed, now, self.sizes.size))
            figures.slowest_call_ms = max(
                figures.slowest_call_ms, (time.perf_counter() - began) * 1000
            )
            figures.add(done)
            for units, held in done.holds:
                self.sizes.observe(units, held)
            again += done.unfinished  # more sealed fields than one call moves: again
