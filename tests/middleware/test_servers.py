"""Exactness under real servers: the example apps under gunicorn (4 workers) and uvicorn,
N requests from a bounded load loop on 127.0.0.1, counts checked after a graceful shutdown."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from slicecount.core.series import parse
from slicecount.embedded import EmbeddedRedis, free_port, listen
from slicecount.store import Store

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
N = 8_000  # per server: enough for every worker to flush many times and to interleave
THREADS = 8

Request = tuple[str, str, str, int]  # method, path, expected route label, expected status

pytestmark = pytest.mark.slow


def flask_plan(i: int) -> Request:
    kind = i % 50
    if kind == 0:
        return "GET", "/error", "/error", 500
    if kind in (1, 2):
        return "GET", f"/no/such/{i}", "<unmatched>", 404
    if kind < 10:
        return "POST", "/orders", "/orders", 201
    if kind < 14:
        return "GET", f"/users/{100 + i % 7 + 1}", "/users/<int:user_id>", 404
    if kind < 30:
        return "GET", f"/users/{i % 100 + 1}", "/users/<int:user_id>", 200
    if kind < 32:
        return "GET", "/slow?seconds=0", "/slow", 200
    return "GET", "/", "/", 200


def starlette_plan(i: int) -> Request:
    kind = i % 50
    if kind == 0:
        return "GET", "/error", "/error", 500
    if kind in (1, 2):
        return "GET", f"/no/such/{i}", "<unmatched>", 404
    if kind < 10:
        return "POST", "/checkout", "/checkout", 201
    if kind < 14:
        return "GET", f"/items/{2000 + i}", "/items/{item_id}", 404
    if kind < 30:
        return "GET", f"/items/{i % 1000}", "/items/{item_id}", 200
    if kind < 35:
        return "GET", f"/api/v1/items/{i % 10}", "/api/v1/items/{item_id}", 200
    return "GET", "/", "/", 200


def load(port: int, plan: object, total: int) -> Counter[tuple[str, str, int]]:
    """Send ``total`` requests from THREADS threads; every one must get its expected status."""
    expected: Counter[tuple[str, str, int]] = Counter()
    failures: list[str] = []

    def worker(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for i in range(k, total, THREADS):
            method, path, _, status = plan(i)  # type: ignore[operator]
            try:
                conn.request(method, path)
                response = conn.getresponse()
                response.read()
                if response.status != status:
                    failures.append(f"{method} {path}: {response.status} != {status}")
                if response.status >= 500:  # servers drop the connection after an app error
                    conn.close()
            except (OSError, http.client.HTTPException) as exc:
                failures.append(f"{method} {path}: {exc!r}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == [], failures[:5]
    for i in range(total):
        method, _, route, status = plan(i)  # type: ignore[operator]
        expected[(method, route, status)] += 1
    return expected


def wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited early:\n{log.read_text()[-3000:]}")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:  # not listening yet, or too busy to answer in time
            time.sleep(0.1)
        finally:
            conn.close()  # a failed attempt's socket too (an unclosed one fails the test)
    raise AssertionError(f"server did not listen on {port}:\n{log.read_text()[-3000:]}")


@pytest.fixture
def server_redis() -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis() as server:
        yield server


def run_server(
    command: list[str],
    redis_url: str,
    sock: socket.socket,
    tmp_path: Path,
    settings: dict[str, str] | None = None,
    app_path: Path = ROOT / "examples",
) -> subprocess.Popen[bytes]:
    """Start a server on ``sock`` (bound by the test: the server that answers on its port is
    this one, never another that took a port the test only guessed was free), importing the
    app from ``app_path``."""
    log = tmp_path / "server.log"
    # this checkout's src first: the servers must run the code under test, not an install
    path = os.pathsep.join([str(ROOT / "src"), str(app_path), str(ROOT)])
    env = {**os.environ, **(settings or {}), "SLICECOUNT_REDIS_URL": redis_url, "PYTHONPATH": path}
    with log.open("wb") as output, sock:  # the child keeps its own copy of each descriptor
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
            pass_fds=(sock.fileno(),),
        )  # fmt: skip
        port = sock.getsockname()[1]
    wait_listening(port, process, log)
    return process


def gunicorn(sock: socket.socket, worker: str = "sync", *extra: str) -> list[str]:
    """The example Flask app under gunicorn, 4 workers, serving on ``sock``."""
    return [
        str(BIN / "gunicorn"), "-w", "4", "-k", worker, *extra,
        "-b", f"fd://{sock.fileno()}", "-c", "examples/gunicorn.conf.py", "flask_app:app",
    ]  # fmt: skip


def uvicorn(sock: socket.socket) -> list[str]:
    """The example Starlette app under uvicorn, serving on ``sock``."""
    return [
        sys.executable, "-m", "uvicorn", "starlette_app:app",
        "--fd", str(sock.fileno()), "--no-access-log",
    ]  # fmt: skip


def stop_gracefully(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    # uvicorn re-raises the signal once its graceful shutdown is done: -SIGTERM is clean too.
    assert process.wait(timeout=60) in (0, -signal.SIGTERM)


def check_counts(redis_url: str, expected: Counter[tuple[str, str, int]]) -> None:
    with Store.from_url(redis_url) as store:
        for precision in store.settings.precisions:
            got: Counter[tuple[str, str, int]] = Counter()
            for series_id in store.series("http.requests", precision):
                name, labels = parse(series_id)
                key = (labels["method"], labels["route"], int(labels["status"]))
                got[key] += sum(n for _, n in store.get(name, precision, labels))
            assert sum(got.values()) == N, precision
            assert got == expected, precision


@pytest.mark.parametrize(
    ("worker", "extra"), [("sync", ["--preload"]), ("gthread", ["--threads", "4"])]
)
def test_flask_under_gunicorn_counts_every_request(
    server_redis: EmbeddedRedis, tmp_path: Path, worker: str, extra: list[str]
) -> None:
    sock = listen()
    port = sock.getsockname()[1]
    process = run_server(gunicorn(sock, worker, *extra), server_redis.url, sock, tmp_path)
    try:
        expected = load(port, flask_plan, N)
    finally:
        stop_gracefully(process)
    check_counts(server_redis.url, expected)


def test_starlette_under_uvicorn_counts_every_request(
    server_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    sock = listen()
    port = sock.getsockname()[1]
    process = run_server(uvicorn(sock), server_redis.url, sock, tmp_path)
    try:
        expected = load(port, starlette_plan, N)
    finally:
        stop_gracefully(process)
    check_counts(server_redis.url, expected)


def test_gunicorn_workers_stop_in_time_when_redis_is_unreachable(tmp_path: Path) -> None:
    """A wrong port: the worker tries for its close_timeout (5 s, in worker_exit), says how
    many counts it lost, and its exit does not try again (that made 10 s a worker, all of the
    example's graceful timeout)."""
    sock, requests = listen(), 60
    port = sock.getsockname()[1]
    dead = f"redis://127.0.0.1:{free_port()}/0"  # nobody listens there
    command = [*gunicorn(sock), "-w", "1"]  # (the last -w wins)
    process = run_server(command, dead, sock, tmp_path)
    try:
        for _ in range(requests):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", "/")
            assert conn.getresponse().status == 200  # counting never reaches the request
            conn.close()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    log = (tmp_path / "server.log").read_text()
    (lost,) = [line for line in log.splitlines() if "within 5 s of closing" in line]
    counted = int(lost.split("closing: ")[1].split(" counts lost")[0])
    # a request counts http.requests, a duration bucket and a queries-per-request bucket
    assert counted == 3 * requests, log
