"""RQ under a real ``rq worker`` process: every job counted exactly, by state, in the forking
worker (each job in a work-horse that ends with ``os._exit``) and in the simple one."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from rq import Queue, Retry

from slicecount.embedded import EmbeddedRedis
from slicecount.store import Store
from slicecount.workers.runs import DURATION_METRIC, QUEUE_WAIT_METRIC, RUNS_METRIC
from tests.workers import jobs
from tests.workers.counted import observations, totals

pytestmark = pytest.mark.slow  # a process a job (500 forks)

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture
def server() -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis() as started:
        yield started


@pytest.mark.parametrize(("worker", "total"), [("Worker", 500), ("SimpleWorker", 200)])
def test_every_job_is_counted_by_state(
    server: EmbeddedRedis, tmp_path: Path, worker: str, total: int
) -> None:
    """``total`` jobs, a seventh failing and a tenth failing once then retried, through one
    burst of a real worker: the counts per state are what the jobs say happened."""
    counts_url, queue_url = server.url, server.url.replace("/0", "/1")
    queue = Queue("jobs", connection=redis.Redis.from_url(queue_url))
    for i in range(total):
        if i % 10 == 5:
            queue.enqueue(jobs.flaky, f"flaky:{i}", retry=Retry(max=1))
        else:
            queue.enqueue(jobs.work, i)
    env = {
        **os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "SLICECOUNT_REDIS_URL": counts_url, "TRUTH_REDIS_URL": queue_url,
    }  # fmt: skip
    log = tmp_path / "worker.log"
    with log.open("wb") as output:
        command = [
            str(BIN / "rq"), "worker", "--burst", "--url", queue_url,
            "--worker-class", f"slicecount.workers.rq.{worker}", "jobs",
        ]  # fmt: skip
        done = subprocess.run(
            command, env=env, stdout=output, stderr=subprocess.STDOUT, timeout=300
        )
    assert done.returncode == 0, log.read_text()[-3000:]

    flaky = [i for i in range(total) if i % 10 == 5]
    failing = [i for i in range(total) if i % 10 != 5 and i % 7 == 0]
    planned = {"succeeded": total - len(failing), "failed": len(failing), "retried": len(flaky)}
    truth = redis.Redis.from_url(queue_url)
    said = {state: int(truth.get(jobs.TRUTH + state) or 0) for state in planned}
    assert said == planned  # what the jobs say they did: the worker ran each as planned
    with Store.from_url(counts_url) as store:
        assert totals(store, RUNS_METRIC, "state") == planned
        ran = sum(planned.values())
        assert observations(store, DURATION_METRIC) == ran
        assert observations(store, QUEUE_WAIT_METRIC) == ran
        assert set(totals(store, RUNS_METRIC, "task")) == {
            "tests.workers.jobs.work",
            "tests.workers.jobs.flaky",
        }
        assert set(totals(store, RUNS_METRIC, "queue")) == {"jobs"}
