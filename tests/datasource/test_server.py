"""The datasource under a real uvicorn server on 127.0.0.1: heavy requests never stop the light
ones from being answered, and a 4xx leaves the keep-alive connection open. No timings are
asserted here (benchmarks/bench_datasource_load.py measures them)."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from slicecount.config import Settings
from slicecount.datasource.app import create_app
from slicecount.datasource.limits import Limits
from slicecount.store import Store
from tests.datasource.conftest import NOW, legacy_body
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
