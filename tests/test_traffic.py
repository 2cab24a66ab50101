"""The traffic generator's counts are final once it has stopped: every answer on its way when
``stop()`` was called is in ``sent`` (the demo compares ``sent`` with what Redis counted)."""

from __future__ import annotations

import random
import threading

import pytest

from slicecount.examples.traffic import Traffic
from tests.held import holding


def root(rng: random.Random) -> tuple[str, str]:
    return "GET", "/"


@pytest.mark.slow
def test_stop_waits_for_the_answers_on_their_way() -> None:
    stop = threading.Event()
    with holding(release=stop) as held:  # the server answers once the traffic is stopped
        traffic = Traffic([(held.url, root)], rate=1000.0, threads=3, stop_event=stop)
        traffic.start(60)
        assert held.arrived.wait(10)
        assert traffic.stop(timeout=30)
        # every request was in flight at stop(): each answer is counted before it returns
        assert traffic.sent == len(held.answered) >= 1
        assert traffic.failed == 0


@pytest.mark.slow
def test_stop_without_a_timeout_returns_at_once_and_wait_finishes_the_job() -> None:
    with holding() as held:
        traffic = Traffic([(held.url, root)], rate=1000.0, threads=2)
        traffic.start(60)
        assert held.arrived.wait(10)
        assert traffic.stop() is False  # a request is held: its worker is not done
        held.release.set()
        assert traffic.wait(30)
        assert traffic.sent == len(held.answered) >= 1
        assert traffic.failed == 0
