"""No credential leaves the process: with a password URL against a dead port, a server that
refuses the password, a TLS server (wrong password, no CA, right password), no response body
of the datasource, no log line and no output of the Recorder, the throttle, the cleaner and
the datasource's command contains the password; an HTTP error names the failure instead."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from starlette.testclient import TestClient

from slicecount.config import Settings
from slicecount.datasource.app import create_app
from slicecount.embedded import EmbeddedRedis, free_port
from slicecount.errors import StoreError
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from slicecount.store.asyncio import AsyncStore
from slicecount.throttle import Limiter, parse_limits
from tests.datasource.conftest import simpod_body
from tests.tls import APP_USER, TlsRedis, password

# asyncio (CPython 3.11) leaves a failed TLS handshake's socket, and sometimes a closed TLS
# connection's, for the garbage collector to close; its ResourceWarning then lands in whichever
# test runs next: collected here, before a test of another module runs (a full collection
# takes ~0.15 s in a worker that has run much: once a module, not once a test). What this
# module checks is the text of bodies, logs and errors.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture(autouse=True, scope="module")
def _collect_leftover_sockets() -> Iterator[None]:
    yield
    gc.collect()


@dataclass(frozen=True)
class Case:
    url: str
    secret: str
    failure: str | None  # what a 503 must say; None: Redis answers


@pytest.fixture(scope="module")
def locked_redis() -> Iterator[EmbeddedRedis]:
    """A plain server whose password no test URL holds."""
    with EmbeddedRedis(args=["--requirepass", password()]) as server:
        yield server


CASES = ["dead-port", "dead-port-query", "wrong-password", "tls-wrong-password", "tls-no-ca",
         "tls-right-password"]  # fmt: skip


@pytest.fixture(params=CASES)
def case(request: pytest.FixtureRequest) -> Case:
    return make_case(request.param, request)


def make_case(name: str, request: pytest.FixtureRequest) -> Case:
    secret = password()
    if name == "dead-port":
        return Case(f"redis://:{secret}@127.0.0.1:{free_port()}/0", secret, "connection refused")
    if name == "dead-port-query":
        url = f"redis://127.0.0.1:{free_port()}/0?password={secret}&socket_timeout=1"
        return Case(url, secret, "connection refused")
    if name == "wrong-password":
        port = request.getfixturevalue("locked_redis").port
        return Case(f"redis://app:{secret}@127.0.0.1:{port}/0", secret, "authentication failed")
    tls: TlsRedis = request.getfixturevalue("tls_redis")
    if name == "tls-wrong-password":
        return Case(tls.url(APP_USER, secret), secret, "authentication failed")
    right = tls.url(APP_USER)
    if name == "tls-no-ca":
        return Case(right.partition("?")[0], tls.app_password, "TLS handshake failed")
    return Case(right, tls.app_password, None)


def settings_of(case: Case) -> Settings:
    return Settings(redis_url=case.url, socket_timeout=5.0, token=None)


def test_the_datasource_names_the_failure_never_the_password(
    case: Case, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    now = time.time()
    body = simpod_body([{"target": "http.requests"}], now - 3600, now)
    answers = []
    with TestClient(create_app(settings_of(case))) as client:
        answers.append(client.post("/query", json=body))
        answers.append(client.post("/search", json={"target": ""}))
        answers.append(client.get("/api/v1/query", params={"query": "http_requests_total"}))
        answers.append(client.get("/api/v1/labels"))
        answers.append(client.get("/", headers={"accept": "application/json"}))
        answers.append(client.get("/", headers={"accept": "text/html"}))
        answers.append(client.get("/openapi.json"))
    for answer in answers:
        assert case.secret not in answer.text, answer.request.url
        assert case.secret not in str(answer.headers)
    query, search, promql, labels = answers[:4]
    if case.failure is None:
        assert [a.status_code for a in answers] == [200] * len(answers)
    else:
        assert (query.status_code, search.status_code) == (503, 503)
        assert (promql.status_code, labels.status_code) == (503, 503)
        message = f"redis unavailable: {case.failure}"
        assert query.json()["message"].startswith(message), query.json()
        assert promql.json()["error"].startswith(message), promql.json()
        assert "127.0.0.1" not in query.text  # the failure, not the configuration
        assert "redis unavailable" in caplog.text  # the detail went to the log
    assert case.secret not in caplog.text


def test_store_errors_and_their_tracebacks(case: Case) -> None:
    settings = settings_of(case)
    raised: list[BaseException] = []
    with Store(settings) as store:
        try:
            store.series("http.requests", 60)
        except StoreError as exc:
            raised.append(exc)

    async def read() -> None:
        async with AsyncStore(settings) as astore:
            try:
                await astore.series("http.requests", 60)
            except StoreError as exc:
                raised.append(exc)

    asyncio.run(read())
    assert len(raised) == (0 if case.failure is None else 2)
    for error in raised:
        shown = "".join(traceback.format_exception(error))  # the chained redis-py error too
        assert case.secret not in shown and case.secret not in repr(error)
        assert isinstance(error, StoreError) and case.failure is not None
        assert error.failure.startswith(case.failure)
        assert "redis at " in str(error) and "***" in str(error)
    assert case.secret not in repr(settings) and case.secret not in str(settings)


def test_a_recorder_logs_no_password(case: Case, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    recorder = Recorder(Store(settings_of(case)))
    recorder.add("leak.check", 3)
    flushed = [recorder.flush()]
    recorder.add_unique("leak.visitors", "u1")
    flushed.append(recorder.flush())
    flushed.append(recorder.close(timeout=0.2))
    assert flushed == [case.failure is None] * 3
    if case.failure is not None:
        assert "cannot write to redis" in caplog.text
    assert case.secret not in caplog.text


def test_the_throttle_logs_no_password(case: Case, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with Recorder(Store(Settings())) as recorder:  # where its errors are counted (not flushed)
        with Limiter(settings_of(case), deadline=1.0, recorder=recorder) as limiter:
            verdict = limiter.check(parse_limits("10/second"), "client")
        recorder.reset()  # nothing to write: the default URL may have no server
    assert verdict.decision is not None if case.failure is None else verdict.decision is None
    if case.failure is not None:
        assert "did not answer" in caplog.text
    assert case.secret not in caplog.text


def cli(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLICECOUNT_REDIS_URL": url, "SLICECOUNT_SOCKET_TIMEOUT": "1"}
    command = [sys.executable, "-m", "slicecount.cli", "-vv", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_the_cleaner_prints_no_password(case: Case) -> None:
    # the URL as an option (the environment's is the datasource command's test)
    once = cli("cleaner", "--once", "--redis-url", case.url, url="redis://127.0.0.1:1/0")
    assert case.secret not in once.stdout + once.stderr
    assert once.returncode == (0 if case.failure is None else 1), once.stderr
    if case.failure is not None:
        assert "error: redis at " in once.stderr and "***" in once.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dead-port", "tls-wrong-password", "tls-right-password"])
def test_the_datasource_command_as_the_demo_starts_it(
    name: str, request: pytest.FixtureRequest
) -> None:
    case = make_case(name, request)
    port = free_port()
    env = {**os.environ, "SLICECOUNT_REDIS_URL": case.url, "SLICECOUNT_SOCKET_TIMEOUT": "1"}
    command = [
        sys.executable,
        "-m",
        "slicecount.cli",
        "-vv",
        "datasource",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]  # fmt: skip (the demo's command line)
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)  # fmt: skip
    bodies = []
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"{base}/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.1)
        now = time.time()
        bodies.append(httpx.post(f"{base}/query", json=simpod_body(
            [{"target": "x"}], now - 60, now), timeout=10).text)  # fmt: skip
        bodies.append(httpx.get(f"{base}/api/v1/labels", timeout=10).text)
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=20)
    assert "reading rediss://" in output or "reading redis://" in output
    assert case.secret not in output and not any(case.secret in body for body in bodies)
    assert ":***@" in output
