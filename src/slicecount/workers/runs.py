"""The one mapping both task shells (Celery, RQ) adapt to: what a task run counts. Pure.

A shell measures (task, queue, state, seconds run, seconds waited in the queue) and asks
``RunMapping.entries()`` for the (series id, n) pairs to count; it hands them to its Recorder in
one call. Series ids come from an injected namer and are remembered per distinct (task, queue,
state), bounded like the request mapping's, so a run costs a dict lookup and a tuple here. No
Recorder, no Store, no task queue: this module is tested without a server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from slicecount.core.histogram import (
    DEFAULT_DURATION_BUCKETS,
    LE_LABEL,
    MICRO,
    HistogramIds,
    HistogramLayout,
)
from slicecount.core.series import Labels, LabelValue, normalize_labels
from slicecount.errors import ConfigurationError

RUNS_METRIC = "tasks.runs"
"""Counter of task runs that ended, labels task, queue, state."""
DURATION_METRIC = "tasks.duration"
"""Histogram of how long a run took, in seconds, labels task, queue."""
QUEUE_WAIT_METRIC = "tasks.queue_wait"
"""Histogram of the seconds from a task's publication (or its ``eta``) to its start, labels
task, queue: observed only when the publisher stamped the time."""

SUCCEEDED, FAILED, RETRIED, REJECTED, REVOKED = (
    "succeeded",
    "failed",
    "retried",
    "rejected",
    "revoked",
)
STATES = (SUCCEEDED, FAILED, RETRIED, REJECTED, REVOKED)
"""The ``state`` label: how a run ended (rejected and revoked runs never ran: no duration)."""
UNKNOWN_QUEUE = "<unknown>"
"""The ``queue`` label of a run whose queue the worker did not say."""
RESERVED_LABELS = frozenset({"task", "queue", "state", LE_LABEL})
MAX_CACHED_IDS = 10_000
"""(task, queue, state) combinations whose series ids are remembered: task names are code, but
a task named from data cannot grow this past the bound (the Recorder folds what overflows)."""

SeriesNamer = Callable[[str, Labels], str]
"""(metric name, labels) -> series id, validated; ValueError for a name or label it refuses."""
Entries = tuple[tuple[str, int], ...]
"""(series id, n) pairs to count at one instant."""

TASK_BUCKETS: tuple[float, ...] = (*DEFAULT_DURATION_BUCKETS, 30.0, 60.0, 300.0, 1800.0)
"""Bounds in seconds of both task histograms (+Inf is always added): a task runs or waits
from milliseconds to many minutes, past the requests' 10 s."""


@dataclass(frozen=True)
class _Ids:
    runs: str
    duration: HistogramIds
    wait: HistogramIds


class RunMapping:
    """Maps ended task runs to the counts they add."""

    def __init__(
        self,
        series_id: SeriesNamer,
        *,
        labels: Mapping[str, LabelValue] | None = None,
        buckets: Iterable[float] = TASK_BUCKETS,
        queue_wait_buckets: Iterable[float] = TASK_BUCKETS,
        max_cached_ids: int = MAX_CACHED_IDS,
    ) -> None:
        self.series_id = series_id
        self.duration = HistogramLayout(DURATION_METRIC, tuple(buckets))
        self.wait = HistogramLayout(QUEUE_WAIT_METRIC, tuple(queue_wait_buckets))
        self.static_labels = normalize_labels(labels)
        clash = RESERVED_LABELS & set(self.static_labels)
        if clash:
            raise ConfigurationError(f"static labels may not use reserved names {sorted(clash)}")
        self.max_cached_ids = max_cached_ids
        self._ids: dict[tuple[str, str, str], _Ids] = {}

    def entries(
        self, task: str, queue: str | None, state: str, seconds: float | None, waited: float | None
    ) -> Entries:
        """What one run of ``task`` counts: the run, its ``seconds`` (None: it never ran) and
        the ``seconds`` it ``waited`` in the queue (None: not known). Raises what the namer
        raises for a label it refuses (a task name too long, say)."""
        key = (task, queue or UNKNOWN_QUEUE, state)
        ids = self._ids.get(key) or self._build(*key)
        out: Entries = ((ids.runs, 1),)
        if seconds is not None:
            seconds = max(seconds, 0.0)
            out += (
                (ids.duration.buckets[self.duration.bucket_index(seconds)], 1),
                (ids.duration.total, round(seconds * MICRO)),
            )
        if waited is not None:
            waited = max(waited, 0.0)  # another host's clock behind ours: no wait, not less
            out += (
                (ids.wait.buckets[self.wait.bucket_index(waited)], 1),
                (ids.wait.total, round(waited * MICRO)),
            )
        return out

    def forget(self) -> None:
        """Drop the remembered ids (the namer's Recorder was replaced: it admits anew)."""
        self._ids.clear()

    def _build(self, task: str, queue: str, state: str) -> _Ids:
        base = {**self.static_labels, "task": task, "queue": queue}
        ids = _Ids(
            self.series_id(RUNS_METRIC, {**base, "state": state}),
            self.duration.series_ids(self.series_id, base),
            self.wait.series_ids(self.series_id, base),
        )
        if len(self._ids) < self.max_cached_ids:
            self._ids[(task, queue, state)] = ids
        return ids
