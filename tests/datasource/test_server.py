"""The datasource under a real uvicorn server on 127.0.0.1: heavy requests never stop the light
ones from being answered, and a 4xx leaves the keep-alive connection open. One bound is
asserted, issue 32's promise of the work budget (a heavy request ends within 5 s, light ones
within 250 ms meanwhile); the rest is measured by benchmarks/bench_datasource_load.py."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import pytest

from slicecount.cleaner.compaction import Compactor
from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.datasource.app import create_app
from slicecount.embedded import free_port
from slicecount.store import Store
from tests.datasource.conftest import NOW, legacy_body
from tests.datasource.workers import clean_environment, datasource
from tests.serving import serving

SERIES, POINTS = 40, 600
LIMITS = Limits(max_inline_points=5_000, max_request_points=SERIES * POINTS)


@pytest.fixture
def port(settings: Settings, store: Store) -> Iterator[int]:
    store.apply(
        {f'load{{i="{i}"}}': {NOW - s: i + 1 for s in range(POINTS)} for i in range(SERIES)}
    )
    settings = settings.with_changes(retention={p: 1000 for p in settings.precisions})
    with serving(create_app(settings, limits=LIMITS, clock=lambda: NOW)) as port:
        yield port


def post(connection: http.client.HTTPConnection, path: str, body: bytes) -> tuple[int, Any]:
    connection.request("POST", path, body, {"content-type": "application/json"})
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def heavy(port: int) -> tuple[int, Any]:
    target = {"target": "load", "refId": "H", "payload": {"precision": "1"}}
    body = json.dumps(legacy_body([target], NOW - POINTS + 1, NOW)).encode()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        return post(connection, "/query", body)
    finally:
        connection.close()


def test_light_requests_are_answered_while_heavy_ones_run(port: int) -> None:
    with ThreadPoolExecutor(4) as pool:
        running = [pool.submit(heavy, port) for _ in range(4)]
        probes: list[tuple[int, Any]] = []
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while not all(f.done() for f in running) or len(probes) < 10:
            connection.request("GET", "/")
            response = connection.getresponse()
            probes.append((response.status, json.loads(response.read())))
            time.sleep(0.01)
        connection.close()
    assert all(probe == (200, {"status": "ok", "service": "slicecount datasource"})
               for probe in probes)  # fmt: skip
    for done in running:
        status, frames = done.result()
        assert status == 200
        assert [f["target"] for f in frames] == sorted(f'load{{i="{i}"}}' for i in range(SERIES))
        assert all(len(f["datapoints"]) == POINTS for f in frames)
    status, answer = heavy(port)  # the queue is empty again: a heavy request still answers
    assert status == 200 and len(answer) == SERIES


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b'{"range": {"from": NaN, "to": 1}, "targets": []}', 400),
        (b"[" * 10_000, 400),
        (
            json.dumps(
                legacy_body(
                    [{"target": "load", "payload": {"precision": "1"}}], NOW - 2 * POINTS, NOW
                )
            ).encode(),
            422,
        ),  # over the budget
        (json.dumps(legacy_body([{"target": "sum(" * 100 + "x"}], NOW - 60, NOW)).encode(), 400),
    ],
)
@pytest.mark.layouts("book")  # its 422: 48 000 points at the book's charge (blocks: 6 000)
def test_a_4xx_keeps_the_connection_open(port: int, body: bytes, status: int) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/")
    connection.getresponse().read()
    socket = connection.sock
    connection.request("POST", "/query", body, {"content-type": "application/json"})
    response = connection.getresponse()
    assert response.status == status and json.loads(response.read())["message"]
    assert not response.will_close
    connection.request("GET", "/")
    assert connection.getresponse().status == 200
    assert connection.sock is socket  # the same connection answered
    connection.close()


HEAVY_SERIES, ANSWERED_SERIES, SPAN = 500, 90, 10_999
"""Issue 32's heavy request: 500 series at precision 1 over the last 10 999 s with
``maxDataPoints`` 11 000 (5.5 million points, 115 MB of JSON). 90 series are an answer just
under the default budget (990 000 points and their labels)."""


@pytest.mark.slow  # four answers of a million points (a few seconds)
@pytest.mark.layouts("book", "blocks")
def test_the_default_budget_bounds_what_heavy_requests_cost(
    settings: Settings, store: Store
) -> None:
    """Four of the heavy request at once are each refused (422 naming the answer's figures),
    four just under it are each answered, all within 5 s, while ``GET /`` keeps a p99
    under 250 ms: the budget charges what encoding an answer costs, not only what is read.
    The server is ``slicecount datasource`` with its defaults, in its own process as deployed
    (in this one, the test's clients would share its interpreter lock)."""
    now = int(time.time())
    counted = range(0, SPAN + 1, 997)  # a few counts a series: the answer's size is the same
    for name, series in (("big", HEAVY_SERIES), ("wide", ANSWERED_SERIES)):
        store.apply({f'{name}{{i="{i}"}}': {now - s: 1 for s in counted} for i in range(series)})
    if settings.layout == "blocks":
        Compactor(store).run(now + 3600)  # sealed: the reads are of blocks
    arguments = ["--redis-url", settings.redis_url, "--layout", settings.layout]
    with datasource(arguments, free_port(), clean_environment()) as served:
        for name, status in (("big", 422), ("wide", 200)):
            target = {"target": name, "refId": "A", "payload": {"precision": "1"}}
            body = legacy_body([target], now - SPAN, now, maxDataPoints=11_000, intervalMs=1000)
            answers, probes = _at_once(served.port, json.dumps(body).encode(), 4)
            for got in answers:
                assert got.took < 5, f"a {name} request took {got.took:.2f} s"
                assert got.status == status, got.body[:300]
                if status == 422:
                    message = json.loads(got.body)["message"]  # the book's: the read budget
                    limit, budget = (
                        ("max_answer", 1_000_000)
                        if settings.layout == "blocks"
                        else ("max_request", 2_000_000)
                    )
                    assert (
                        "500 series x 11,000" in message
                        and f"{limit}_points = {budget:,}" in message
                    )
                else:
                    frames = json.loads(got.body)
                    assert len(frames) == ANSWERED_SERIES
                    assert {len(f["datapoints"]) for f in frames} == {SPAN + 1}
            probes.sort()
            assert len(probes) >= 10
            assert probes[len(probes) * 99 // 100] < 0.25, f"GET / p99 {probes[-5:]}"


def _at_once(port: int, body: bytes, requests: int) -> tuple[list[Answered], list[float]]:
    """``requests`` POSTs of ``body`` to /query at once, each answered with how long it took
    to the last byte, and how long each ``GET /`` took while they ran (ten at least)."""

    def one() -> Answered:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        began = time.monotonic()
        connection.request("POST", "/query", body, {"content-type": "application/json"})
        response = connection.getresponse()
        answered = Answered(response.status, response.read(), time.monotonic() - began)
        connection.close()
        return answered

    probes: list[float] = []
    with ThreadPoolExecutor(requests) as pool:
        running = [pool.submit(one) for _ in range(requests)]
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while not all(f.done() for f in running) or len(probes) < 10:
            began = time.monotonic()
            connection.request("GET", "/")
            assert connection.getresponse().read()
            probes.append(time.monotonic() - began)
            time.sleep(0.01)
        connection.close()
    return [f.result() for f in running], probes


class Answered(NamedTuple):
    status: int
    body: bytes
    took: float
