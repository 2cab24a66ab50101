"""The cleaner's loop: lease, passes, chunks, signals. ``run_once()`` is one pass."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Concatenate, ParamSpec, TypeVar

from slicecount.cleaner.compaction import Compaction, Compactor, uses_blocks
from slicecount.cleaner.schedule import (
    Due,
    Trim,
    annotation_cutoff,
    pass_index,
    pass_start,
    plan_pass,
    plan_trim,
    sweep_every,
)
from slicecount.cleaner.sizing import ChunkSizer
from slicecount.errors import ConfigurationError, StoreError
from slicecount.operations import trimming
from slicecount.operations.batches import Context, Operation
from slicecount.operations.writing import WRITER_MEMORY
from slicecount.store import Store

logger = logging.getLogger("slicecount.cleaner")

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_INTERVAL = 60.0
"""Seconds between passes (the book's value)."""


@dataclass
class PassStats:
    """The figures of one pass (also written as ``slicecount.cleaner.*`` series)."""

    index: int
    now: float
    precisions: list[int] = field(default_factory=list)
    swept: list[int] = field(default_factory=list)  # precisions this pass swept, completely
    hashes: int = 0
    deleted: int = 0
    removed: int = 0
    full: int = 0
    bad: int = 0
    calls: int = 0
    slowest_call_ms: float = 0.0  # round trip, as the cleaner waited for it
    longest_hold_ms: float = 0.0  # server time: how long one call kept Redis from others
    annotations: int = 0
    exemplars: int = 0
    uniques: int = 0
    writers: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    compaction: Compaction | None = None  # blocks layout: what compacting every shard did

    def series(self) -> dict[str, int]:
        done = self.compaction or Compaction()
        return {
            "slicecount.cleaner.series_compacted": done.compacted,
            "slicecount.cleaner.fields_moved": done.moved,
            "slicecount.cleaner.fields_expired": done.expired,
            "slicecount.cleaner.bytes_written": done.written,
            "slicecount.cleaner.splice_conflicts": done.conflicts,
            "slicecount.cleaner.series_removed": done.removed,
            "slicecount.cleaner.passes": 1,
            "slicecount.cleaner.hashes_scanned": self.hashes,
            "slicecount.cleaner.fields_deleted": self.deleted,
            "slicecount.cleaner.hashes_removed": self.removed,
            "slicecount.cleaner.full_trims": self.full,
            "slicecount.cleaner.sweeps": len(self.swept),
            "slicecount.cleaner.bad_keys": self.bad,
            "slicecount.cleaner.writers_forgotten": self.writers,
            "slicecount.cleaner.uniques_forgotten": self.uniques,
            "slicecount.cleaner.exemplars_expired": self.exemplars,
            "slicecount.cleaner.duration_ms": round(self.seconds * 1000),
        }


class Cleaner:
    """Trims a store's counters on the book's schedule; safe beside writers and other cleaners."""

    def __init__(
        self,
        store: Store,
        interval: float = DEFAULT_INTERVAL,
        *,
        clock: Callable[[], float] = time.time,
        writers_clock: Callable[[], float] | None = None,
        sweep_period: float | None = None,
        sweep_every: int | None = None,
        owner: str | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval!r}")
        if sweep_every is not None:  # the old knob: a sweep every N passes
            warnings.warn(
                "Cleaner(sweep_every=N) is deprecated: pass sweep_period=N * interval (seconds)",
                DeprecationWarning,
                stacklevel=2,
            )
            if sweep_period is None:
                sweep_period = max(1, sweep_every) * interval
        period = store.settings.sweep_period if sweep_period is None else sweep_period
        if not period > 0:
            raise ValueError(f"sweep_period must be > 0 seconds, got {period!r}")
        self.store = store
        self.interval = interval
        self.sweep_period = float(period)
        self.clock = clock
        # The writers' clock bounds what is "ahead" (max_future): with --now pinned to a past
        # time, today's slices are still today's, not the future.
        self.writers_clock = writers_clock or (lambda: self.clock())
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}"
        # per (precision, mode): a 1 s hash costs far more to trim than a 1 day one
        self.chunks: dict[tuple[int, str], ChunkSizer] = {}
        self.stopping = threading.Event()
        self.compactor = Compactor(store, self.stopping)

    def _run(
        self, op: Callable[Concatenate[Context, P], Operation[T]], *args: P.args, **kw: P.kwargs
    ) -> T:
        """Run one of the cleaner's operations (``trimming``) on its store."""
        return self.store.run(op(self.store.context, *args, **kw))

    def stop(self) -> None:
        """Finish the current chunk, then stop (what SIGTERM does)."""
        self.stopping.set()

    def run_once(self, every_precision: bool = False) -> PassStats | None:
        """One pass; None when another cleaner holds this pass's lease."""
        now = self.clock()
        index = pass_index(now, self.interval)
        started = time.perf_counter()
        lease_ms = max(1000, int(self.interval * 2000))
        if not self._run(trimming.acquire_lease, index, self.owner, lease_ms):
            logger.info("pass %d is another cleaner's; standing by", index)
            return None
        stats = PassStats(index, now)
        ahead_of = self.writers_clock()
        if uses_blocks(self.store):
            self._compact(stats, now, ahead_of)
        else:
            self._trims(stats, every_precision, lease_ms, max(now, ahead_of))
        settings = self.store.settings
        if not stats.interrupted:
            stats.annotations = self._run(
                trimming.trim_annotations, annotation_cutoff(settings, now)
            )
            stats.exemplars = self._run(trimming.trim_exemplars, now - settings.exemplar_retention)
            # unique series whose keys expired by themselves
            stats.uniques = self._run(trimming.forget_uniques, now)
            quiet_since = ahead_of - WRITER_MEMORY
            stats.writers = sum(
                self._run(trimming.forget_writers, quiet_since, shard)
                for shard in range(settings.shards)
            )
        stats.seconds = time.perf_counter() - started
        self._record(stats)
        logger.info(
            "pass %d%s: precisions %s (swept %s), %d hashes, %d fields deleted, "
            "%d hashes forgotten, %d full trims, %d bad keys, %d annotations, %d exemplars, "
            "%d writers forgotten, %d unique series forgotten, %d calls "
            "(slowest %.1f ms, held Redis %.1f ms at most), %.2f s",
            index,
            " (interrupted)" if stats.interrupted else "",
            stats.precisions,
            stats.swept,
            stats.hashes,
            stats.deleted,
            stats.removed,
            stats.full,
            stats.bad,
            stats.annotations,
            stats.exemplars,
            stats.writers,
            stats.uniques,
            stats.calls,
            stats.slowest_call_ms,
            stats.longest_hold_ms,
            stats.seconds,
        )
        return stats

    def _trims(self, stats: PassStats, every_precision: bool, lease_ms: int, ahead: float) -> None:
        """The book's layout: trim the precisions due, sweep those whose sweep is due."""
        index, now, settings = stats.index, stats.now, self.store.settings
        previous, swept = self._run(trimming.cleaner_records)
        planned = plan_pass(
            settings, index, self.interval, every_precision, swept, self.sweep_period
        )
        for due in planned:
            sweep = due.sweep and self._claim(due, swept.get(due.precision), lease_ms)
            if not (sweep or due.scheduled):
                continue  # another cleaner sweeps it, and the schedule leaves it alone
            trim = plan_trim(
                settings, due.precision, now, previous.get(due.precision), sweep, ahead
            )
            if trim is None:
                continue
            stats.precisions.append(due.precision)
            self._trim(trim, stats, swept.get(due.precision))
            if stats.interrupted:
                break
            self._run(trimming.save_cleaner_cutoff, due.precision, trim.cutoff)
            if sweep:  # only a complete sweep is recorded
                self._run(
                    trimming.save_cleaner_sweep, due.precision, pass_start(index, self.interval)
                )
                stats.swept.append(due.precision)

    def _compact(self, stats: PassStats, now: float, writers_now: float) -> None:
        """The blocks layout: compact every shard (sealed by the writers' clock)."""
        done = self.compactor.run(now, writers_now)
        if done is None:
            stats.interrupted = True
            return
        stats.compaction = done
        stats.precisions = list(self.store.settings.precisions)
        stats.hashes, stats.removed, stats.calls = done.series, done.removed, done.calls
        stats.bad += len(done.bad)
        stats.slowest_call_ms = max(stats.slowest_call_ms, done.slowest_call_ms)
        stats.longest_hold_ms = max(stats.longest_hold_ms, done.longest_hold_ms)
        if done.bad:
            logger.warning("skipped bad data: %s", "; ".join(done.bad[:10]))
        logger.info(
            "compacted %d of %d series: %d fields moved, %d expired, %d bytes written, "
            "%d splices skipped on a conflict",
            done.compacted,
            done.series,
            done.moved,
            done.expired,
            done.written,
            done.conflicts,
        )

    def _claim(self, due: Due, last: int | None, lease_ms: int) -> bool:
        """Whether this cleaner sweeps ``due.precision`` now: the claim outlives the sweep
        (a period), so a cleaner that died mid-sweep is relieved a period later."""
        every_ms = int(sweep_every(due.precision, self.sweep_period) * 1000)
        if self._run(
            trimming.claim_sweep, due.precision, last, self.owner, max(lease_ms, every_ms)
        ):
            return True
        logger.info("the sweep of precision %d is another cleaner's", due.precision)
        return False

    def _trim(self, trim: Trim, stats: PassStats, last_sweep: int | None) -> None:
        """Walk every shard; a sweep ("full": claimed after ``last_sweep``) left unfinished
        gives its claim up, so that the next pass sweeps."""
        done = False
        try:
            for shard in range(self.store.settings.shards):
                self._walk(trim, shard, stats)
                if stats.interrupted:
                    return
            done = True
        finally:
            if not done and trim.mode == "full":
                try:
                    self._run(trimming.release_sweep, trim.precision, last_sweep)
                except StoreError as exc:
                    logger.warning("could not give up the sweep's claim: %s", exc)

    def _walk(self, trim: Trim, shard: int, stats: PassStats) -> None:
        # Each call trims the members the previous one read (the first only reads), so every
        # key a call touches is named by the client: on a cluster, all in the shard's slot.
        sizes = self.chunks.setdefault((trim.precision, trim.mode), ChunkSizer())
        members: list[str] = []
        next_size = sizes.size
        while True:
            if self.stopping.is_set():
                stats.interrupted = True
                return
            began = time.perf_counter()
            chunk = self._run(trimming.trim_chunk, trim, members, next_size, shard)
            elapsed = time.perf_counter() - began
            stats.calls += 1
            stats.slowest_call_ms = max(stats.slowest_call_ms, elapsed * 1000)
            stats.longest_hold_ms = max(stats.longest_hold_ms, chunk.held * 1000)
            stats.hashes += chunk.scanned
            stats.deleted += chunk.deleted
            stats.removed += chunk.removed
            stats.full += chunk.full
            if chunk.bad:
                stats.bad += len(chunk.bad)
                logger.warning("skipped bad data: %s", "; ".join(chunk.bad))
            sizes.observe(len(members), chunk.held)
            if not chunk.following:
                return
            # a short read was the registry's end: the next call need not read again
            next_size = sizes.size if len(chunk.following) == next_size else 0
            members = chunk.following

    def _record(self, stats: PassStats) -> None:
        second = int(stats.now)
        try:
            self.store.apply({name: {second: n} for name, n in stats.series().items() if n})
        except (StoreError, ConfigurationError) as exc:
            # Redis away, or a clock the store refuses (ahead of it by more than max_future):
            # the figures are lost and said so; the pass itself is done
            logger.warning("could not record the pass figures: %s", exc)

    def run(self) -> None:
        """Pass after pass until ``stop()``; a failed pass is logged and the next one retried."""
        while not self.stopping.is_set():
            try:
                self.run_once()
            except StoreError as exc:
                logger.error("pass failed, retrying next interval: %s", exc)
            now = self.clock()
            self.stopping.wait(self.interval - now % self.interval)
