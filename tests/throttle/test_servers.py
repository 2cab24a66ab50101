"""A 10/second limit on the example apps under real servers (gunicorn, 4 workers; uvicorn):
bursts of 15 requests, each inside one window, from several connections; each window admits
exactly 10 whichever worker serves them, and http.throttled matches the client's 429s."""

from __future__ import annotations

import http.client
import itertools
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from slicecount.embedded import EmbeddedRedis, listen
from slicecount.store import Store
from tests.middleware import test_servers
from tests.middleware.helpers import total
from tests.middleware.test_servers import gunicorn, run_server, stop_gracefully, uvicorn

pytestmark = pytest.mark.slow
server_redis = test_servers.server_redis  # the fixture: a redis-server of the test's own
WINDOWS, BURST, THREADS = 10, 15, 5


def bursts(port: int, windows: int) -> list[Counter[int]]:
    """Per one-second window, the statuses of a burst sent 0.1 s after it starts (the burst
    must end 0.2 s before the window does, or the window would be ambiguous)."""
    seen: list[Counter[int]] = []
    for _ in range(windows):
        time.sleep(1.1 - time.time() % 1)
        window = int(time.time())
        got: list[list[int]] = [[] for _ in range(THREADS)]
        threads = [threading.Thread(target=send, args=(port, mine)) for mine in got]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert time.time() < window + 0.8, "a burst took too long to tell its window"
        seen.append(Counter(status for mine in got for status in mine))
    return seen


def send(port: int, statuses: list[int]) -> None:
    for _ in range(BURST // THREADS):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/search?q=x")
        response = conn.getresponse()
        response.read()
        statuses.append(response.status)
        conn.close()


def serve(
    command: Callable[[socket.socket], list[str]], redis_url: str, tmp_path: Path, **env: str
) -> list[Counter[int]]:
    sock = listen()
    port = sock.getsockname()[1]
    # the deadline generous: these tests are about exactness, not about a slow machine
    process = run_server(
        command(sock), redis_url, sock, tmp_path, {"SLICECOUNT_THROTTLE_DEADLINE": "0.5", **env}
    )
    try:
        return bursts(port, WINDOWS)
    finally:
        stop_gracefully(process)


def check_throttled(redis_url: str, seen: list[Counter[int]]) -> None:
    refused = sum(s[429] for s in seen)
    with Store.from_url(redis_url) as store:
        assert total(store, "http.throttled", 86400, route="/search", limit="10/second") == refused
        assert total(store, "http.requests", 86400, route="/search", status="429") == refused
        assert total(store, "slicecount.throttle.errors", 86400) == 0


def test_flask_under_gunicorn_admits_exactly_ten_a_window(
    server_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    seen = serve(gunicorn, server_redis.url, tmp_path)
    assert [(s[200], s[429]) for s in seen] == [(10, 5)] * WINDOWS
    check_throttled(server_redis.url, seen)


def test_the_sliding_window_stays_within_its_bound(
    server_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    seen = serve(gunicorn, server_redis.url, tmp_path, SLICECOUNT_THROTTLE_STRATEGY="sliding")
    admitted = [s[200] for s in seen]
    assert admitted[0] == 10
    for before, now in itertools.pairwise(admitted):
        # the previous window weighs 0.7..0.9 during a burst: at least 10 - before pass,
        # never more than 10 (windows.py: a window admits at most the amount)
        assert 10 - before <= now <= 10, admitted
    check_throttled(server_redis.url, seen)


def test_starlette_under_uvicorn_admits_exactly_ten_a_window(
    server_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    seen = serve(uvicorn, server_redis.url, tmp_path)
    assert [(s[200], s[429]) for s in seen] == [(10, 5)] * WINDOWS
    check_throttled(server_redis.url, seen)
