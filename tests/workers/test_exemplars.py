"""A traced task run keeps its trace beside its run time: Celery (eager runs, through the same
signals a worker sends) traced by the span current as it starts or by the ``traceparent`` its
message carried; RQ (a ``SimpleWorker`` in this process, on a real Redis) by the span around
it or the ``traceparent`` its publisher put in ``job.meta``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
import redis
from opentelemetry.sdk.trace import TracerProvider

from slicecount.core.series import parse
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from slicecount.workers.runs import DURATION_METRIC
from tests.workers import jobs

celery = pytest.importorskip("celery")
rq = pytest.importorskip("rq")

from slicecount.workers.celery import instrument, uninstrument  # noqa: E402
from slicecount.workers.rq import SimpleWorker  # noqa: E402

TRACER = TracerProvider().get_tracer("tests")
TRACE, SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
HEADER = f"00-{TRACE}-{SPAN}-01"


@pytest.fixture
def recorder(store: Store) -> Iterator[Recorder]:
    recorder = Recorder(store, flush_interval=3600)
    yield recorder
    recorder.close()


def kept_by_task(store: Store) -> dict[str, list[dict[str, str]]]:
    """task -> the labels of the exemplars its run times kept."""
    series = store.series(f"{DURATION_METRIC}.bucket", 60)
    found = store.exemplars(series, 0, 4_102_444_800)
    out: dict[str, list[dict[str, str]]] = {}
    for series_id, kept in found.items():
        out.setdefault(parse(series_id)[1]["task"], []).extend(dict(e.labels) for e in kept)
    return out


def test_celery_runs_keep_the_trace_they_started_in(store: Store, recorder: Recorder) -> None:
    app = celery.Celery("exemplar-tests")
    instrument(app, recorder=recorder)
    try:

        @app.task(name="by_header")  # type: ignore[untyped-decorator]
        def by_header() -> int:
            return 1

        @app.task(name="by_span")  # type: ignore[untyped-decorator]
        def by_span() -> int:
            return 2

        @app.task(name="untraced")  # type: ignore[untyped-decorator]
        def untraced() -> int:
            return 3

        by_header.apply(headers={"traceparent": HEADER})
        with TRACER.start_as_current_span("task") as span:
            by_span.apply()
            ids = span.get_span_context()
        untraced.apply(headers={"traceparent": HEADER[:-1] + "0"})  # not sampled
        untraced.apply(headers={"traceparent": "garbage"})
    finally:
        uninstrument(app)
    assert recorder.flush()
    assert kept_by_task(store) == {
        "by_header": [{"trace_id": TRACE, "span_id": SPAN}],
        "by_span": [{"trace_id": f"{ids.trace_id:032x}", "span_id": f"{ids.span_id:016x}"}],
    }


class Traced(SimpleWorker):
    """A worker that runs each job inside a span, as an app's tracing may."""

    slicecount_options: ClassVar[dict[str, Any]] = {}
    spans: ClassVar[list[tuple[str, str]]] = []

    def perform_job(self, job: Any, queue: Any, *rest: Any, **more: Any) -> bool:
        if job.func_name.endswith("flaky"):  # (this one: traced by its meta alone)
            return super().perform_job(job, queue, *rest, **more)
        with TRACER.start_as_current_span("job") as span:
            ids = span.get_span_context()
            self.spans.append((f"{ids.trace_id:032x}", f"{ids.span_id:016x}"))
            return super().perform_job(job, queue, *rest, **more)


def test_rq_jobs_keep_the_trace_they_started_in(
    store: Store, recorder: Recorder, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRUTH_REDIS_URL", redis_url)  # (where the jobs say what they did)
    connection = redis.Redis.from_url(redis_url)
    queue = rq.Queue("jobs", connection=connection)
    queue.enqueue(jobs.work, 1)  # in the span of the worker's perform_job
    queue.enqueue(jobs.flaky, "once", meta={"traceparent": HEADER})  # fails: still a run
    monkeypatch.setattr(Traced, "slicecount_options", {"recorder": recorder})
    monkeypatch.setattr(Traced, "spans", [])
    Traced([queue], connection=connection).work(burst=True)
    assert recorder.flush()
    ((trace_id, span_id),) = Traced.spans
    assert kept_by_task(store) == {
        "tests.workers.jobs.work": [{"trace_id": trace_id, "span_id": span_id}],
        "tests.workers.jobs.flaky": [{"trace_id": TRACE, "span_id": SPAN}],
    }
