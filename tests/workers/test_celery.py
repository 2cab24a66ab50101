"""Celery under a real ``celery worker`` (prefork, 4 children recycled every 5 tasks) on a Redis
broker: every run counted exactly by state, in the children that end with billiard's
``os._exit`` and across a warm shutdown in the middle of a batch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis
from celery import Celery

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


def use_broker(app: Celery, url: str) -> None:
    """Publish to ``url`` from now on: the pools of an earlier test's broker dropped (the app
    keeps its producers' pool past ``close()``: what a fork resets, reset here)."""
    app.close()
    app.amqp._producer_pool = None
    app.conf.broker_url = url


def said(truth: redis.Redis) -> dict[str, int]:
    return {state: int(truth.get(jobs.TRUTH + state) or 0) for state in STATES}


def wait_for(check: Callable[[], bool], what: str, timeout: float = 120) -> None:
    """Until ``check()`` holds (a check that fails on a read taken while a flush landed, at
    one precision and not yet the next, is asked again)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except AssertionError:
            pass
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}"
        time.sleep(0.2)


def worker_environment(
    server: EmbeddedRedis, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, str, dict[str, str]]:
    """(where counts go: db 0, the broker and the jobs' truth: db 1, a worker's environment);
    this process, the publisher, gets the same variables."""
    counts_url, broker_url = server.url, server.url.replace("/0", "/1")
    env = {
        **os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "SLICECOUNT_REDIS_URL": counts_url, "TRUTH_REDIS_URL": broker_url,
        "CELERY_BROKER_URL": broker_url,
    }  # fmt: skip
    for name in ("SLICECOUNT_REDIS_URL", "TRUTH_REDIS_URL", "CELERY_BROKER_URL"):
        monkeypatch.setenv(name, env[name])
    return counts_url, broker_url, env


# 100 children recycled (2 000 runs and 400 children took 111 s of a CI run: a slot whose
# child's exit billiard reads before it can reap it waits for the pool's 5 s maintenance timer,
# celery/celery#9588, about a third of them; a hundred exercise every path as well)
@pytest.mark.timeout(600)
def test_every_run_is_counted_across_recycled_children_and_a_warm_shutdown(
    server: EmbeddedRedis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts_url, broker_url, env = worker_environment(server, monkeypatch)
    from tests.workers.celery_app import app, flaky, work

    use_broker(app, broker_url)
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
        total = 500
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
        app.close()
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    finished = said(truth)
    assert sum(finished.values()) < before + 400  # stopped in the middle, for real
    assert totals(store, RUNS_METRIC, "state") == {k: v for k, v in finished.items() if v}
    assert observations(store, DURATION_METRIC) == sum(finished.values())
    store.close()


def test_runs_that_never_ran_or_ran_out_of_time_are_counted(
    server: EmbeddedRedis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Revoked (expired before it started), rejected (a task the worker does not know, and
    one raising ``Reject``), ignored (``Ignore``), and failed at its hard time limit (the
    main process kills the child that ran it and says so; counted once, with the limit as
    its run time)."""
    counts_url, broker_url, env = worker_environment(server, monkeypatch)
    from tests.workers.celery_app import app, ignore, reject, stuck, work

    use_broker(app, broker_url)
    expired = datetime.now(timezone.utc) - timedelta(minutes=1)
    work.apply_async((1,), expires=expired)  # expired before any worker takes it
    app.send_task("nobody.knows.this", (1,))
    reject.delay()
    ignore.delay()
    stuck.delay()
    work.delay(1)  # the last one: when it ran, the others were taken
    log = tmp_path / "worker.log"
    with log.open("wb") as output:
        worker = subprocess.Popen(
            [str(BIN / "celery"), "-A", "tests.workers.celery_app", "worker", "-P", "prefork",
             "--concurrency", "2", "--loglevel", "warning", "--without-heartbeat",
             "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
        )  # fmt: skip
    truth = redis.Redis.from_url(broker_url)
    store = Store.from_url(counts_url)
    expected = {"revoked": 1, "rejected": 2, "ignored": 1, "failed": 1, "succeeded": 1}
    try:
        wait_for(lambda: said(truth)["succeeded"] == 1, "the tasks")
        wait_for(lambda: totals(store, RUNS_METRIC, "state") == expected, "the counts", 30)
    finally:
        app.close()
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    by_task = totals(store, RUNS_METRIC, "task")
    assert by_task == {"work": 2, "nobody.knows.this": 1, "reject": 1, "ignore": 1, "stuck": 1}
    ran = {"ignored": 1, "failed": 1, "succeeded": 1, "rejected": 1}  # what has a run time
    assert observations(store, DURATION_METRIC) == sum(ran.values())
    assert totals(store, f"{DURATION_METRIC}.bucket", "le")["1"] == 1  # the time limit's run
    store.close()
