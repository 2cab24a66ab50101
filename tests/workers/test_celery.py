"""Celery under a real ``celery worker`` (prefork, 4 children recycled every 5 tasks) on a Redis
broker: every run counted exactly by state, in the children that end with billiard's
``os._exit`` and across a warm shutdown in the middle of a batch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from slicecount.embedded import EmbeddedRedis
from slicecount.store import Store
from slicecount.workers.runs import DURATION_METRIC, QUEUE_WAIT_METRIC, RUNS_METRIC
from tests.workers import jobs
from tests.workers.counted import observations, totals

pytestmark = pytest.mark.slow  # 2 000 tasks and 400 child processes (tens of seconds)

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
STATES = ("succeeded", "failed", "retried")


@pytest.fixture
def server() -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis() as started:
        yield started


def said(truth: redis.Redis) -> dict[str, int]:
    return {state: int(truth.get(jobs.TRUTH + state) or 0) for state in STATES}


def wait_for(check: object, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}"
        time.sleep(0.2)


def test_every_run_is_counted_across_recycled_children_and_a_warm_shutdown(
    server: EmbeddedRedis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts_url, broker_url = server.url, server.url.replace("/0", "/1")
    env = {
        **os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "SLICECOUNT_REDIS_URL": counts_url, "TRUTH_REDIS_URL": broker_url,
        "CELERY_BROKER_URL": broker_url,
    }  # fmt: skip
    for name in ("SLICECOUNT_REDIS_URL", "TRUTH_REDIS_URL", "CELERY_BROKER_URL"):
        monkeypatch.setenv(name, env[name])  # the publisher: this process
    from tests.workers.celery_app import app, flaky, work

    app.conf.broker_url = broker_url
    log = tmp_path / "worker.log"
    with log.open("wb") as output:
        worker = subprocess.Popen(
            [str(BIN / "celery"), "-A", "tests.workers.celery_app", "worker", "-P", "prefork",
             "--concurrency", "4", "--max-tasks-per-child", "5", "--loglevel", "warning",
             "--without-heartbeat", "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
        )  # fmt: skip
    truth = redis.Redis.from_url(broker_url)
    store = Store.from_url(counts_url)
    try:
        total = 2_000
        flaky_ones = [i for i in range(total) if i % 10 == 5]
        failing = [i for i in range(total) if i % 10 != 5 and i % 7 == 0]
        planned = {"succeeded": total - len(failing), "failed": len(failing),
                   "retried": len(flaky_ones)}  # fmt: skip
        for i in range(total):
            if i in flaky_ones:
                flaky.delay(f"flaky:{i}")
            else:
                work.delay(i)
        wait_for(lambda: said(truth) == planned, f"the first batch ({log.read_text()[-2000:]})")
        # the children alive flush every second; the recycled ones flushed before exiting
        wait_for(lambda: totals(store, RUNS_METRIC, "state") == planned, "the counts", 30)
        ran = sum(planned.values())
        assert observations(store, DURATION_METRIC) == ran
        assert observations(store, QUEUE_WAIT_METRIC) == ran  # every message was stamped
        assert set(totals(store, RUNS_METRIC, "queue")) == {"celery"}

        for i in range(1, 401):  # a second batch, slower: stopped in its middle
            work.delay(i, 0.02)
        before = sum(planned.values())
        wait_for(lambda: sum(said(truth).values()) > before + 40, "the second batch to start")
        worker.send_signal(signal.SIGTERM)  # a warm shutdown: running tasks end, then exit
        assert worker.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    finished = said(truth)
    assert sum(finished.values()) < before + 400  # stopped in the middle, for real
    assert totals(store, RUNS_METRIC, "state") == {k: v for k, v in finished.items() if v}
    assert observations(store, DURATION_METRIC) == sum(finished.values())
    store.close()
