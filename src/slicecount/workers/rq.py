"""RQ: ``rq worker --worker-class slicecount.workers.rq.Worker`` (or ``SimpleWorker``).

Every job a worker ends is counted in ``tasks.runs{task,queue,state}`` (``task``: the job's
function name; ``state``: succeeded, failed, retried, or revoked for a job stopped by
``send_stop_job_command``), with its run time in ``tasks.duration{task,queue}`` and the time
from ``enqueued_at`` to its start in ``tasks.queue_wait{task,queue}``. A traced run (the
span current as it starts, or a sampled ``traceparent`` its publisher put in ``job.meta``)
keeps its trace beside its run time: an exemplar (docs/exemplars.md).

The forking ``Worker`` runs each job in a work-horse that ends with ``os._exit``: the horse
writes its counts first. A horse that dies before it could (killed, out of memory) is counted
by the worker that watched it, as RQ fails or retries the job. The options of the request
middleware (``labels``, ``buckets``, ``settings`` ...) go in a subclass's ``slicecount_options``
mapping, since RQ builds the worker itself::

    class ShopWorker(slicecount.workers.rq.Worker):
        slicecount_options = {"labels": {"service": "shop"}}
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

from slicecount.core.exemplars import Trace
from slicecount.errors import extra_imports
from slicecount.recording import lifecycle
from slicecount.recording.traces import traced
from slicecount.workers.counting import TaskCounter
from slicecount.workers.runs import FAILED, RETRIED, REVOKED, SUCCEEDED

with extra_imports("rq", "the RQ worker"):
    import rq
    from rq.job import Job, JobStatus
    from rq.queue import Queue
    from rq.worker import BaseWorker

STATES = {
    JobStatus.FINISHED: SUCCEEDED,
    JobStatus.FAILED: FAILED,
    JobStatus.QUEUED: RETRIED,
    JobStatus.SCHEDULED: RETRIED,
    JobStatus.STOPPED: REVOKED,
    JobStatus.CANCELED: REVOKED,
}
"""A job's status once it ended -> the ``state`` label (queued or scheduled again: retried)."""


class Counted(BaseWorker):
    """What both worker classes add to RQ's: each ended job counted where it ran."""

    slicecount_options: ClassVar[Mapping[str, Any]] = {}
    """The ``TaskCounter`` options (``recorder``, ``settings``, ``labels``, ``buckets``,
    ``queue_wait_buckets``): set them in a subclass."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # built now: bad SLICECOUNT_* settings stop the worker at start, not at its first job
        self.task_counter = TaskCounter(**self.slicecount_options)

    def perform_job(self, job: Job, queue: Queue, *rest: Any, **more: Any) -> bool:
        began = time.perf_counter()
        # its trace: the span current as it starts (a worker subclass's around it), else the
        # traceparent its publisher put in job.meta (RQ carries no headers)
        meta = getattr(job, "meta", None)
        trace = traced(meta.get("traceparent") if isinstance(meta, dict) else None)
        try:
            return bool(super().perform_job(job, queue, *rest, **more))
        finally:
            self._count(job, queue, _status(job), time.perf_counter() - began, trace)
            if self._is_horse:  # os._exit follows: nothing else would write these counts
                lifecycle.close_all()

    def handle_work_horse_killed(self, job: Job, *args: Any, **kwargs: Any) -> None:
        """The horse died before it ended the job (so before it counted it): counted here,
        as RQ will retry or fail it."""
        super().handle_work_horse_killed(job, *args, **kwargs)  # type: ignore[no-untyped-call]
        self._count(job, _origin(job), RETRIED if job.should_retry else FAILED, None)

    def handle_job_failure(self, job: Job, queue: Queue, *args: Any, **kwargs: Any) -> None:
        """A job stopped on request: its horse was killed by this worker, counted nothing."""
        stopped = not self._is_horse and self._stopped_job_id == job.id and job.id is not None
        super().handle_job_failure(job, queue, *args, **kwargs)
        if stopped:
            self._count(job, queue.name, REVOKED, None)

    def _count(
        self,
        job: Job,
        queue: Queue | str | None,
        state: str,
        seconds: float | None,
        trace: Trace | None = None,
    ) -> None:
        started, ended, enqueued = job.started_at, job.ended_at, job.enqueued_at
        if started is not None and ended is not None and ended >= started:
            seconds = (ended - started).total_seconds()  # the run, without RQ's bookkeeping
        waited = None
        if started is not None and enqueued is not None and _comparable(started, enqueued):
            waited = (started - enqueued).total_seconds()
        name = queue.name if isinstance(queue, Queue) else queue
        self.task_counter.record(job.func_name or "<unknown>", name, state, seconds, waited, trace)


class Worker(Counted, rq.Worker):
    """RQ's forking worker, counting every job (``--worker-class
    slicecount.workers.rq.Worker``)."""


class SimpleWorker(Counted, rq.SimpleWorker):
    """RQ's worker that runs jobs in its own process, counting every job."""


def _status(job: Job) -> str:
    try:
        status = job.get_status(refresh=False)
    except Exception:  # an expired job: it ended, how is not known here
        return FAILED
    return STATES.get(status, FAILED) if status is not None else FAILED


def _origin(job: Job) -> str | None:
    origin = getattr(job, "origin", None)
    return origin if isinstance(origin, str) else None


def _comparable(one: datetime, other: datetime) -> bool:
    """Both aware or both naive (RQ versions differ; never a TypeError in the worker)."""
    return (one.tzinfo is None) == (other.tzinfo is None)
