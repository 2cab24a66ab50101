"""Celery: ``instrument(app)`` in the module that builds the Celery app, so that it runs in the
publisher and in every worker process.

    from celery import Celery
    from slicecount.workers.celery import instrument

    app = Celery("shop", broker="redis://localhost:6379/1")
    instrument(app)

Every run a worker ends is counted in ``tasks.runs{task,queue,state}`` (succeeded, failed,
retried, rejected: ``Reject`` or a task the worker does not know, revoked, ignored), with its
run time in ``tasks.duration{task,queue}`` and, when its publisher was instrumented too (it
stamps the time in the message headers), the time from publication (or the ``eta``) to start
in ``tasks.queue_wait{task,queue}``. Signals only: no task class, no pool or broker replaced.
A traced run (the span current as it starts: OpenTelemetry's Celery instrumentation starts one
when instrumented before this; else a sampled ``traceparent`` its message carried) keeps its
trace beside its run time: an exemplar (docs/exemplars.md).

Exact across processes: each prefork child counts its own runs and writes them on
``worker_process_shutdown``, before billiard's ``os._exit`` (a child recycled by
``--max-tasks-per-child`` too), and the main process on ``worker_shutdown``; a warm shutdown
loses nothing, a child killed with ``kill -9`` at most its last flush interval.
"""

from __future__ import annotations

import time
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from slicecount.core.exemplars import Trace
from slicecount.errors import extra_imports
from slicecount.recording import lifecycle
from slicecount.recording.traces import traced
from slicecount.workers.counting import TaskCounter
from slicecount.workers.runs import FAILED, REJECTED, RETRIED, REVOKED, SUCCEEDED, TASK_BUCKETS

with extra_imports("celery", "the Celery instrumentation"):
    from celery import Celery, signals
    from celery.exceptions import TimeLimitExceeded, WorkerLostError

if TYPE_CHECKING:
    from slicecount.config import Settings
    from slicecount.core.series import LabelValue
    from slicecount.recording.recorder import Recorder

PUBLISHED_HEADER = "slicecount_published"
"""The message header the instrumented publisher stamps with the time (epoch seconds); the
worker reads it back as ``task.request.slicecount_published``."""
IGNORED = "ignored"
"""The ``state`` of a run that raised ``Ignore`` (it asked Celery to record no state)."""
STATES = {
    "SUCCESS": SUCCEEDED,
    "FAILURE": FAILED,
    "RETRY": RETRIED,
    "REJECTED": REJECTED,
    "IGNORED": IGNORED,
}
"""Celery's state of an ended run -> the ``state`` label."""

MAX_REMEMBERED = 10_000
"""Task ids the main process remembers having counted as failed (Celery reports a hard time
limit twice)."""

_instrumented: weakref.WeakKeyDictionary[Celery, CeleryRuns] = weakref.WeakKeyDictionary()


class CeleryRuns:
    """The signal receivers of one instrumented app. Runs of other apps' tasks are not
    counted here (Celery's signals are process-wide)."""

    def __init__(self, app: Celery, counter: TaskCounter) -> None:
        self.app = app
        self.counter = counter
        # task id -> (perf_counter, time, its trace) when it started
        self._started: dict[str, tuple[float, float, Trace | None]] = {}
        self._failed: OrderedDict[str, None] = OrderedDict()  # ids the main process counted
        self._receivers = (
            (signals.before_task_publish, self.published),
            (signals.task_prerun, self.started),
            (signals.task_postrun, self.ended),
            (signals.task_failure, self.failed_elsewhere),
            (signals.task_revoked, self.revoked),
            (signals.task_unknown, self.unknown),
            (signals.worker_process_shutdown, self.leaving),
            (signals.worker_shutdown, self.leaving),
        )

    def connect(self) -> None:
        for signal, receiver in self._receivers:
            signal.connect(receiver, weak=False)

    def disconnect(self) -> None:
        for signal, receiver in self._receivers:
            signal.disconnect(receiver)

    def published(self, headers: dict[str, Any] | None = None, **_: Any) -> None:
        """The publisher's stamp (once: a message republished keeps no older stamp, it is a
        new message)."""
        if isinstance(headers, dict):
            headers.setdefault(PUBLISHED_HEADER, time.time())

    def started(self, task_id: str | None = None, task: Any = None, **_: Any) -> None:
        if task_id is not None and self._ours(task):
            # its trace: the span current as it starts (OpenTelemetry's Celery instrumentation
            # starts one in its own prerun), else the traceparent its message carried
            trace = traced(_traceparent(getattr(task, "request", None)))
            self._started[task_id] = (time.perf_counter(), time.time(), trace)

    def ended(
        self, task_id: str | None = None, task: Any = None, state: str | None = None, **_: Any
    ) -> None:
        started = self._started.pop(task_id, None) if task_id is not None else None
        if started is None or state is None or not self._ours(task):
            return  # no state: the run was killed in its child (a hard time limit, a revoke
            # that terminates it), and the main process that killed it counts it
        request = task.request
        seconds = time.perf_counter() - started[0]
        label = STATES.get(state, state.lower())
        waited = _waited(request, started[1])
        self.counter.record(task.name, _queue(request), label, seconds, waited, started[2])

    def failed_elsewhere(
        self, sender: Any = None, task_id: str | None = None, exception: Any = None, **_: Any
    ) -> None:
        """A run the main process ended: a child killed at its hard time limit, or lost (killed
        by a signal, out of memory) while it ran; the child counted nothing, and Celery may
        say so more than once. A run that failed where it ran is counted by ``ended``."""
        if not isinstance(exception, (TimeLimitExceeded, WorkerLostError)):
            return
        if task_id is None or task_id in self._started or task_id in self._failed:
            return
        if not self._ours(sender):
            return
        self._failed[task_id] = None
        if len(self._failed) > MAX_REMEMBERED:
            self._failed.popitem(last=False)
        limit = exception.args[0] if isinstance(exception, TimeLimitExceeded) else None
        seconds = float(limit) if isinstance(limit, (int, float)) else None
        self.counter.record(sender.name, None, FAILED, seconds, None)

    def revoked(self, sender: Any = None, request: Any = None, **_: Any) -> None:
        """A revoked run (before it started, expired, or terminated while it ran): no run
        time. ``sender`` is the task; ``request`` its context."""
        if not self._ours(sender):
            return
        self.counter.record(sender.name, _queue(request), REVOKED, None, None)

    def unknown(
        self, sender: Any = None, name: str | None = None, message: Any = None, **_: Any
    ) -> None:
        """A message for a task this worker does not know: rejected (its name is data: the
        Recorder folds names past ``max_series_per_metric``)."""
        if sender is not None and getattr(sender, "app", None) is not self.app:
            return
        info = getattr(message, "delivery_info", None)
        queue = info.get("routing_key") if isinstance(info, Mapping) else None
        self.counter.record(str(name), queue, REJECTED, None, None)

    def leaving(self, **_: Any) -> None:
        """A prefork child before billiard's ``os._exit``, or the main process at shutdown:
        every Recorder of the process writes what it holds."""
        lifecycle.close_all()

    def _ours(self, task: Any) -> bool:
        return getattr(task, "app", None) is self.app


def instrument(
    app: Celery,
    *,
    recorder: Recorder | None = None,
    settings: Settings | None = None,
    labels: Mapping[str, LabelValue] | None = None,
    buckets: Iterable[float] = TASK_BUCKETS,
    queue_wait_buckets: Iterable[float] = TASK_BUCKETS,
) -> CeleryRuns:
    """Count the runs of ``app``'s tasks in its workers and stamp its published messages
    (the same call in both: put it where the app is built). Options as the request
    middleware's: ``recorder`` or ``settings`` (default: the process-wide Recorder of the
    ``SLICECOUNT_*`` settings), static ``labels``, the histograms' ``buckets`` in seconds.
    A second call on the same app returns the first's instrumentation."""
    done = _instrumented.get(app)
    if done is not None:
        return done
    counter = TaskCounter(
        recorder=recorder,
        settings=settings,
        labels=labels,
        buckets=buckets,
        queue_wait_buckets=queue_wait_buckets,
    )
    runs = _instrumented[app] = CeleryRuns(app, counter)
    runs.connect()
    return runs


def uninstrument(app: Celery) -> None:
    """Disconnect what ``instrument`` connected."""
    runs = _instrumented.pop(app, None)
    if runs is not None:
        runs.disconnect()


def _traceparent(request: Any) -> object:
    """The ``traceparent`` a message carried: a worker's request holds a message's own headers
    as attributes (OpenTelemetry's propagation puts it there), an eager ``apply()``'s in
    ``headers``."""
    found = getattr(request, "traceparent", None)
    if found is None:
        headers = getattr(request, "headers", None)
        found = headers.get("traceparent") if isinstance(headers, dict) else None
    return found


def _queue(request: Any) -> str | None:
    info = getattr(request, "delivery_info", None)
    queue = info.get("routing_key") if isinstance(info, Mapping) else None
    return queue if isinstance(queue, str) and queue else None


def _waited(request: Any, started: float) -> float | None:
    """Seconds from the publisher's stamp, or from the ``eta`` when it is later (a countdown
    is not a wait), to ``started``; None without a stamp."""
    stamp = getattr(request, PUBLISHED_HEADER, None)
    if not isinstance(stamp, (int, float)) or isinstance(stamp, bool):
        return None
    since = float(stamp)
    eta = getattr(request, "eta", None)
    if eta:
        try:
            at = eta if isinstance(eta, datetime) else datetime.fromisoformat(eta)
            since = max(since, at.timestamp())
        except (TypeError, ValueError):
            pass  # an eta we cannot read: from the stamp
    return started - since
