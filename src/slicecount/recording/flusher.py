"""The two loops around ``Recorder.flush``: the background one, and the last one at close."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

logger = logging.getLogger("slicecount")


def flush_every(
    flush: Callable[[], bool],
    stop: threading.Event,
    interval: float,
    max_backoff: float,
    wake: threading.Event | None = None,
) -> None:
    """Flush every ``interval`` seconds until ``stop``, and at once when ``wake`` is set (a
    buffer filling up); while flushes fail, back off (doubling, with jitter, up to
    ``max_backoff``) so that many processes do not retry in step. ``stop.set()`` must be
    followed by ``wake.set()`` to end a wait early."""
    jitter = random.Random()  # its own: never touch the app's global random state
    delay = interval
    wake = wake or stop
    written = True
    while True:
        # while flushes fail, only the backoff (or stop) ends a wait: a full buffer must not
        # make the flusher hammer a Redis that is away
        (wake if written else stop).wait(delay)
        if stop.is_set():
            return
        wake.clear()
        try:
            written = flush()
        except Exception:  # never let the flusher die: the next flush may go through
            logger.exception("slicecount flush failed")
            written = False
        if written:
            delay = interval
        else:
            delay = min(delay * 2, max_backoff) * jitter.uniform(0.8, 1.0)


def flush_until_written(
    flush: Callable[[], bool], unwritten: Callable[[], bool], deadline: float
) -> bool:
    """Flush until nothing is left (a flush may count a loss of its own, written by the next)
    or ``deadline`` (``time.monotonic()``) passes; True when everything was written."""
    delay = 0.05
    while True:
        written = flush()
        if written and not unwritten():
            return True
        if time.monotonic() + delay > deadline:
            return False
        if not written:
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
