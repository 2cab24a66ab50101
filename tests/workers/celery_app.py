"""The Celery app the worker test runs (``celery -A tests.workers.celery_app worker``): built and
instrumented in one module, as an app's own would be, so the publisher (the test) stamps its
messages and every worker process counts its runs."""

from __future__ import annotations

import os
import time

import redis
from celery import Celery, Task
from celery.exceptions import Ignore, Reject

from slicecount.workers.celery import instrument
from tests.workers import jobs

app = Celery("tests.workers.celery_app")  # the broker: CELERY_BROKER_URL, or the test's
app.conf.update(
    task_ignore_result=True,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    worker_prefetch_multiplier=1,
)
instrument(app)


@app.task(name="work")  # type: ignore[untyped-decorator]
def work(i: int, seconds: float = 0.0) -> int:
    return jobs.work(i, seconds)


@app.task(name="flaky", bind=True, max_retries=1)  # type: ignore[untyped-decorator]
def flaky(self: Task, key: str) -> str:
    """Fails its first run with a retry, succeeds its second."""
    if redis.Redis.from_url(os.environ["TRUTH_REDIS_URL"]).incr(key) == 1:
        jobs.say("retried")
        raise self.retry(countdown=0)
    jobs.say("succeeded")
    return key


@app.task(name="reject", bind=True)  # type: ignore[untyped-decorator]
def reject(self: Task) -> None:
    """Asks the worker to reject its message."""
    raise Reject("rejected on purpose", requeue=False)


@app.task(name="ignore")  # type: ignore[untyped-decorator]
def ignore() -> None:
    """Asks Celery to record no state for it."""
    raise Ignore()


@app.task(name="stuck", time_limit=1)  # type: ignore[untyped-decorator]
def stuck() -> None:
    """Runs past its hard time limit: the main process kills its child."""
    time.sleep(30)
