"""Where a task run's counts go: the pure mapping's entries handed to a Recorder, never raising
into the worker.

Celery's prefork children and RQ's work-horses end with ``os._exit``: no exit hook runs there,
so a shell closes every Recorder of the process first (``lifecycle.close_all``: the task's own
``slicecount.event`` counts too), or what the last second counted would be lost.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from slicecount.config import Settings
from slicecount.core.exemplars import Trace
from slicecount.core.series import LabelValue
from slicecount.recording import traces
from slicecount.recording.recorder import Recorder
from slicecount.recording.source import RecorderSource
from slicecount.workers.runs import TASK_BUCKETS, RunMapping

logger = logging.getLogger("slicecount")


class TaskCounter:
    """What a task shell holds: the pure mapping and where its counts go. The one place the
    options are read."""

    def __init__(
        self,
        *,
        recorder: Recorder | None = None,
        settings: Settings | None = None,
        labels: Mapping[str, LabelValue] | None = None,
        buckets: Iterable[float] = TASK_BUCKETS,
        queue_wait_buckets: Iterable[float] = TASK_BUCKETS,
    ) -> None:
        self.source = RecorderSource(recorder, settings)
        self.mapping = RunMapping(
            self.source.namer(),
            labels=labels,
            buckets=buckets,
            queue_wait_buckets=queue_wait_buckets,
        )
        self.source.watch(self.mapping.forget)
        traces.prepare()  # (in the parent: the children a worker forks inherit the import)
        self._warned = False

    def record(
        self,
        task: str,
        queue: str | None,
        state: str,
        seconds: float | None,
        waited: float | None,
        trace: Trace | None = None,
    ) -> None:
        """Count one ended run (see ``RunMapping.entries``; ``trace``: the run's, kept with
        its run time as an exemplar). Never raises."""
        recorder = self.source.fixed or self.source.get()
        if recorder is None:
            return
        try:
            entries = self.mapping.entries(task, queue, state, seconds, waited)
            if trace is None or seconds is None:
                recorder.add_ids(entries)
            else:  # the run time's bucket is the second entry (RunMapping.entries)
                recorder.add_ids(entries, None, (entries[1][0], trace, max(seconds, 0.0)))
        except Exception as exc:  # never let counting reach the task
            recorder.refuse(exc)
            if not self._warned:
                self._warned = True
                logger.exception("slicecount could not record a task run: %s", exc)
