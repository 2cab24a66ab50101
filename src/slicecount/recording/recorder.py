"""The write buffer: O(1) in-memory counting on the request path, flushed to Redis on a thread.

Every count goes through one entry point, ``_add()``: one lock and a dict update keyed by
(epoch second, series id). Anything Redis or the encoder could refuse is refused there and
counted as ``slicecount.rejected{reason}``. A flusher thread, started lazily in the process
that records, swaps the buffer every ``flush_interval`` seconds, prepares it as it is into
numbered chunks (``chunking.prepare``) and delivers them through the ``Outbox``: a chunk whose
outcome is unknown is sent again unchanged and Redis applies it at most once. While Redis is
away new counts keep buffering; past ``max_pending`` entries the oldest are dropped and their
counts written later as ``slicecount.dropped``. An observation of a traced request (or one the
app gives with ``exemplar=``) also keeps an exemplar (``exemplar_buffer``), written with the
counts in the same transactions. After ``fork()`` the child starts empty with a writer id of
its own; at interpreter exit the buffer is flushed.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence

from slicecount.config.topology import redact
from slicecount.core.exemplars import Trace, check_labels
from slicecount.core.histogram import DEFAULT_DURATION_BUCKETS, MICRO, HistogramLayout
from slicecount.core.series import Labels, shown
from slicecount.errors import ConfigurationError
from slicecount.operations.batches import Clock
from slicecount.operations.checks import bad_count
from slicecount.operations.chunking import prepare_safely
from slicecount.recording import lifecycle
from slicecount.recording.admission import Admission, Warnings
from slicecount.recording.count_buffer import Counts
from slicecount.recording.exemplar_buffer import Exemplars, exemplars
from slicecount.recording.losses import REASONS, Losses
from slicecount.recording.outbox import Outbox
from slicecount.recording.unique_buffer import UniqueValues
from slicecount.store import Store

logger = logging.getLogger("slicecount")

MAX_BACKOFF = 10.0
"""Longest pause in seconds between two flush attempts while Redis is unreachable."""

Entries = Sequence[tuple[str, int]]  # (series id from series_id(), count)
Sample = tuple[str, Trace, float]
"""An exemplar to keep: (bucket series id from series_id(), its trace, the value observed)."""
MAX_HISTOGRAMS = 10_000
"""(name, labels, buckets) of ``observe()`` whose series ids are remembered."""


class Recorder:
    """Buffers counts in memory and writes them to a ``Store`` in the background."""

    def __init__(
        self,
        store: Store,
        flush_interval: float | None = None,
        max_pending: int | None = None,
        *,
        max_series_per_metric: int | None = None,
        max_metrics: int | None = None,
        clock: Clock = time.time,
        max_backoff: float = MAX_BACKOFF,
    ) -> None:
        settings = store.settings
        self.store = store
        self.flush_interval = flush_interval or settings.flush_interval
        self.max_pending = max_pending or settings.max_pending
        self.max_backoff = max(max_backoff, self.flush_interval)
        self.max_future = settings.max_future  # read once: the hot path looks it up
        self._clock = clock
        self._warnings = Warnings()
        self._admission = Admission(
            max_series_per_metric or settings.max_series_per_metric,
            max_metrics or settings.max_metrics,
            self._warnings,
        )
        self._ids = self._admission.ids  # read without a lock on the hot path
        self._outbox = Outbox()
        self._counts = Counts(self.max_pending, self.max_future, clock, self._drop)
        self._uniques = UniqueValues(self.max_pending, settings, clock, self._drop)
        self._exemplars = Exemplars(self.max_pending)
        self.keeps_exemplars = settings.max_exemplars > 0
        """Whether an observation's exemplar is kept (``max_exemplars`` is not 0)."""
        self._histograms: dict[tuple[object, ...], tuple[tuple[str, ...], str, tuple[float, ...]]]
        self._histograms = {}
        self.reset()
        lifecycle.track(self)

    def reset(self) -> None:
        """Fresh buffer, locks, outbox and flusher state (at start and in a forked child)."""
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._losses = Losses()
        self._counts.reset(self._lock)
        self._uniques.reset(self._lock)
        self._exemplars.reset(self._lock)
        self._keep_exemplar = self._exemplars.add  # (bound once: a traced request's path)
        self._outbox.reset()
        self._admission.after_fork()
        self._stop = threading.Event()
        self._wake = threading.Event()  # a buffer half full: flush now, not at the interval
        self._uniques.wake = self._wake
        self._thread: threading.Thread | None = None
        self._closed = False
        self.gave_up = False

    # -- counting ------------------------------------------------------------------------------

    def add(
        self, name: str, n: int = 1, labels: Labels | None = None, now: float | None = None
    ) -> None:
        """Count ``n`` events of a series at ``now`` (default: the clock). Never raises: what
        Redis could not hold is refused, logged once and counted as ``slicecount.rejected``."""
        try:
            series_id = self._ids.get((name, tuple(labels.items())) if labels else name)
            if series_id is None:
                series_id = self._admission.series_id(name, labels)
            # literals, not INT64_MIN/MAX: constants cost less than globals on this path
            if n.__class__ is not int or not -9223372036854775808 <= n <= 9223372036854775807:
                raise bad_count(n)
        except Exception as exc:  # a counting bug must never reach the caller's request
            self.refuse(exc, _events(n))
            return
        error = self._counts.add(now, series_id, n)
        if error is not None:
            self.refuse(error, n)
        elif self._thread is None:
            self._start()

    def add_unique(
        self,
        name: str,
        value: str,
        labels: Labels | None = None,
        *,
        exact: bool = False,
        first_seen: bool = False,
        now: float | None = None,
    ) -> None:
        """Note that ``value`` was seen in a unique series at ``now``: each slice counts its
        distinct values (``exact``: and lists them; ``first_seen``: and counts them into the
        ordinary counter ``name``). Never raises, never waits on the network."""
        try:
            series_id = self._ids.get((name, tuple(labels.items())) if labels else name)
            if series_id is None:
                series_id = self._admission.series_id(name, labels)
            error = self._uniques.add((series_id, exact, first_seen), value, now)
        except Exception as exc:  # a counting bug must never reach the caller's request
            error = exc
        if error is not None:
            self.refuse(error)
        elif self._thread is None:
            self._start()

    def series_id(self, name: str, labels: Labels | None = None) -> str:
        """The id ``add_ids()`` counts into: validated (ValueError naming the bad value) and
        folded into ``name{overflow="true"}`` past ``max_series_per_metric`` label sets."""
        return self._admission.series_id(name, labels)

    def observe(
        self,
        name: str,
        value: float,
        labels: Labels | None = None,
        *,
        exemplar: Mapping[str, str] | None = None,
        buckets: Iterable[float] = DEFAULT_DURATION_BUCKETS,
        now: float | None = None,
    ) -> None:
        """Observe ``value`` in the histogram ``name`` (``name.bucket{le}`` counts and the
        ``name.sum_us`` sum, as the middleware's durations); ``exemplar``: its labels
        (``{"trace_id": ..., "span_id": ...}``) kept with the observation. Never raises."""
        try:
            bucket_ids, sum_id, bounds = self._histogram(name, labels, buckets)
            if (value.__class__ is not float and value.__class__ is not int) or not math.isfinite(
                value
            ):
                raise ConfigurationError(f"observed {shown(value)}: not a number", "not_a_count")
            bucket = bucket_ids[bisect_left(bounds, value)]
            sample = None
            if exemplar is not None and self.keeps_exemplars:
                sample = (bucket, check_labels(exemplar), float(value))
        except Exception as exc:  # a counting bug must never reach the caller's request
            self.refuse(exc)
            return
        self.add_ids(((bucket, 1), (sum_id, int(value * MICRO))), now, sample)

    def _histogram(
        self, name: str, labels: Labels | None, buckets: Iterable[float]
    ) -> tuple[tuple[str, ...], str, tuple[float, ...]]:
        """The ids of a histogram's buckets and sum for ``labels``, and its bounds
        (remembered: ``observe`` is on the app's request path)."""
        bounds = buckets if isinstance(buckets, tuple) else tuple(buckets)
        key = (name, tuple(labels.items()) if labels else (), bounds)
        found = self._histograms.get(key)
        if found is None:
            layout = HistogramLayout(name, bounds)
            ids, sum_id = layout.series_ids(self.series_id, labels or {})
            if len(self._histograms) >= MAX_HISTOGRAMS:
                self._histograms.clear()
            found = self._histograms[key] = (ids, sum_id, layout.bounds)
        return found

    def add_ids(
        self, entries: Entries, now: float | None = None, exemplar: Sample | None = None
    ) -> None:
        """Count several (id from ``series_id()``, n) pairs at one instant under one lock: what
        the middleware records per request; ``exemplar``: an observation among them to keep
        as an exemplar (when ``keeps_exemplars``). Never raises."""
        if not entries:
            return
        issued = self._admission.issued
        try:  # (a count past 64 bits is caught when the flush is prepared, as sums past it are)
            for series_id, n in entries:
                if series_id not in issued:
                    raise ConfigurationError(
                        f"{shown(series_id)} is not an id series_id() handed out", "not_an_id"
                    )
                if n.__class__ is not int:
                    raise bad_count(n)
        except Exception as exc:  # unhashable ids land here too
            self.refuse(exc, sum(_events(m) for _, m in entries))
            return
        first_id, first_n = entries[0]
        if exemplar is None:
            self._add(now, first_id, first_n, entries)
            return
        when = self._clock() if now is None else now  # one time for the counts and the sample
        if self._add(when, first_id, first_n, entries) and self.keeps_exemplars:
            if exemplar[0] in issued:
                self._keep_exemplar(exemplar[0], exemplar[1], exemplar[2], when)

    def refuse(self, error: Exception, events: int = 1) -> None:
        """Count ``events`` lost to ``error`` as ``slicecount.rejected{reason}`` (the error's
        ``reason``, else "error"), logging each cause once. Never raises."""
        reason = getattr(error, "reason", "error")
        if reason not in REASONS:
            reason = "error"
        self._losses.refuse(reason, events)
        self._warnings.once(f"reject:{reason}", "slicecount refused an event: %s", error)
        if self._thread is None:
            self._start()

    def _add(self, now: float | None, series_id: str, n: int, more: Entries | None = None) -> bool:
        """Count, True when counted (else refused and counted as refused)."""
        error = self._counts.add(now, series_id, n, more)
        if error is not None:
            self.refuse(error, sum(m for _, m in more) if more is not None else n)
            return False
        if self._thread is None:
            self._start()
        return True

    def _drop(self, events: int) -> None:
        self._losses.dropped += events  # (the Recorder's lock held)

    # -- the flusher ---------------------------------------------------------------------------

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(
                target=self._run, name="slicecount-flusher", daemon=True
            )
        self._thread.start()

    def _run(self) -> None:
        flush_every(self.flush, self._stop, self.flush_interval, self.max_backoff, self._wake)

    def flush(self, deadline: float | None = None) -> bool:
        """Write everything buffered now; True when Redis has answered for all of it (else
        what is in doubt is sent again, unchanged, at the next flush). ``deadline``
        (``time.monotonic()``): False at once if another flush holds on past it."""
        wait = -1.0 if deadline is None else max(deadline - time.monotonic(), 0.0)
        if not self._flush_lock.acquire(timeout=wait):
            return False
        try:
            written = self._flush()
            self._uniques.waking = written
            return written
        finally:
            self._flush_lock.release()

    def flush_within(self, timeout: float | None = None) -> bool:
        """Flush until everything is written or ``timeout`` seconds pass (default: the
        ``close_timeout`` setting); the flusher goes on. True when all was written."""
        if timeout is None:
            timeout = self.store.settings.close_timeout
        deadline = time.monotonic() + timeout
        return flush_until_written(lambda: self.flush(deadline), self.has_unwritten, deadline)

    def _flush(self) -> bool:  # (the flush lock held)
        if not self._outbox.deliver(self.store, self.refuse, self._buffered):  # in doubt first
            return False
        # before the counts are taken: if Redis is away they stay buffered
        if not self._uniques.flush(self.store, self.refuse, self._warnings):
            return False
        with self._lock:
            batch = self._losses.write_into(self._counts.take(), int(self._clock()))
            taken = self._exemplars.take()
        samples = exemplars(taken)
        if not batch and not samples:
            return True
        prepared = prepare_safely(self.store.context, batch, samples)
        if prepared.failed:
            self.refuse(ConfigurationError("an entry could not be prepared"), prepared.failed)
        if prepared.out_of_range:
            error = ConfigurationError("a sum of counts is past 64 bits", "count_range")
            self.refuse(error, prepared.out_of_range)
        self._outbox.put(prepared.chunks)
        return self._outbox.deliver(self.store, self.refuse, self._buffered)

    def _buffered(self) -> int:
        """The oldest second the buffer may still send: its oldest, else now (a writer's
        mark: ``Outbox.mark``)."""
        oldest = self._counts.oldest()
        now = int(self._clock())
        return now if oldest is None else min(oldest, now)

    # -- introspection and shutdown ------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Buffered (second, series) entries not yet handed to Redis."""
        return self._counts.size

    @property
    def in_doubt(self) -> int:
        """Prepared chunks waiting for Redis to answer for them."""
        return len(self._outbox)

    @property
    def duplicates(self) -> int:
        """Chunks sent again after a lost reply that Redis had applied already (and so did
        not apply twice)."""
        return self._outbox.duplicates

    @property
    def dropped(self) -> int:
        """Events dropped so far because the buffer was full (written or not yet written)."""
        return self._losses.dropped_total + self._losses.dropped

    def close(self, timeout: float | None = None) -> bool:
        """Stop the flusher and write what is left, retrying up to ``timeout`` seconds
        (default: the ``close_timeout`` setting); False, with what is lost logged, when Redis
        did not take it all in time (the exit of the process then does not try again)."""
        if timeout is None:
            timeout = self.store.settings.close_timeout
        with self._lock:
            self._closed = True
            thread = self._thread
        self._stop.set()
        self._wake.set()
        deadline = time.monotonic() + timeout
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self.gave_up = not flush_until_written(
            lambda: self.flush(deadline), self.has_unwritten, deadline
        )
        if self.gave_up:
            events, series, seconds = self._counts.describe()
            logger.error(
                "slicecount could not write to %s within %g s of closing: %d counts lost (%d "
                "buffered, of %d series over %d seconds; %d in %s that Redis may have applied) "
                "and %d unique values",
                redact(self.store.settings.redis_url),
                timeout,
                events + self._outbox.events,
                events,
                series,
                seconds,
                self._outbox.events,
                self._outbox.describe(),
                self._uniques.size,
            )
        return not self.gave_up

    def has_unwritten(self) -> bool:
        """True while counts, loss counters or chunks in doubt wait to be written."""
        return bool(
            self._counts.size
            or self._uniques.size
            or self._losses
            or len(self._outbox)
            or len(self._exemplars)
        )

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


close_all = lifecycle.close_all


def _events(n: object) -> int:
    """How many events a refused count stood for: n when it is a sound positive count."""
    return n if n.__class__ is int and 0 < n <= 9223372036854775807 else 1


# -- the two loops around ``Recorder.flush``: the background one, and the last one at close ---


def flush_every(
    flush: Callable[[], bool],
    stop: threading.Event,
    interval: float,
    max_backoff: float,
    wake: threading.Event | None = None,
) -> None:
    """Flush every ``interval`` seconds until ``stop``, and at once when ``wake`` is set (a
    buffer filling up); while flushes fail, back off (doubling, with jitter, up to
    ``max_backoff``) so that many processes do not retry in step. ``stop.set()`` must be
    followed by ``wake.set()`` to end a wait early."""
    jitter = random.Random()  # its own: never touch the app's global random state
    delay = interval
    wake = wake or stop
    written = True
    while True:
        # while flushes fail, only the backoff (or stop) ends a wait: a full buffer must not
        # make the flusher hammer a Redis that is away
        (wake if written else stop).wait(delay)
        if stop.is_set():
            return
        wake.clear()
        try:
            written = flush()
        except Exception:  # never let the flusher die: the next flush may go through
            logger.exception("slicecount flush failed")
            written = False
        if written:
            delay = interval
        else:
            delay = min(delay * 2, max_backoff) * jitter.uniform(0.8, 1.0)


def flush_until_written(
    flush: Callable[[], bool], unwritten: Callable[[], bool], deadline: float
) -> bool:
    """Flush until nothing is left (a flush may count a loss of its own, written by the next)
    or ``deadline`` (``time.monotonic()``) passes; True when everything was written."""
    delay = 0.05
    while True:
        written = flush()
        if written and not unwritten():
            return True
        if time.monotonic() + delay > deadline:
            return False
        if not written:
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
