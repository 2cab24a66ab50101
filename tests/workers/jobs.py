"""The jobs and tasks the worker tests run in real RQ and Celery workers: each says what it did
in Redis (``truth:<state>``), the count slicecount must match. Importable by the workers (the
tests put this checkout on their ``PYTHONPATH``)."""

from __future__ import annotations

import os
import time

import redis

TRUTH = "truth:"
"""``truth:<state>``: how many runs ended in that state, as the runs themselves say."""


def _client() -> redis.Redis:
    return redis.Redis.from_url(os.environ["TRUTH_REDIS_URL"])


def say(state: str) -> None:
    """One run ended in ``state``: what the worker's counts must say too."""
    _client().incr(TRUTH + state)


def work(i: int, seconds: float = 0.0) -> int:
    """Succeeds, or fails when ``i`` is a multiple of 7."""
    if seconds:
        time.sleep(seconds)
    if i % 7 == 0:
        say("failed")
        raise ValueError(f"job {i} fails on purpose")
    say("succeeded")
    return i


def flaky(key: str) -> str:
    """Fails its first run, succeeds its second (enqueue it with ``Retry(max=1)``)."""
    if _client().incr(key) == 1:
        say("retried")
        raise RuntimeError("the first run of a flaky job fails")
    say("succeeded")
    return key
