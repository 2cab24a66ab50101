"""``slicecount datasource --workers N`` as users run it, as real process trees with no
``SLICECOUNT_*`` variable: every option reaches every worker (the token is enforced by each,
each reads the Redis and prefix given), and the token is on no worker's command line and in no
process's environment. Which worker answered is found by the OS (``tests/datasource/workers``).
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Mapping

import pytest
from click.testing import CliRunner

from slicecount.cli import main
from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.datasource.serving import (
    RESOLVED_VARIABLE,
    from_resolved,
    resolved_file,
    settings_as_json,
)
from slicecount.embedded import EmbeddedRedis, free_port
from slicecount.errors import ConfigurationError
from slicecount.store import Store
from tests.datasource.conftest import legacy_body
from tests.datasource.workers import Served, clean_environment, datasource, needs_proc

TOKEN = "tok-7d41c0e9-workers"
"""Distinctive, to be searched for in every process's command line and environment."""
QUERY = {"content-type": "application/json"}


def until_both_workers(
    served: Served, method: str, path: str, body: bytes | None = None,
    headers: Mapping[str, str] | None = None, at_least: int = 20,
) -> list[tuple[int, bytes, int]]:  # fmt: skip
    """At least ``at_least`` requests on fresh connections, more until two workers have
    answered (the kernel picks the worker that accepts: a few hundred at most)."""
    answers: list[tuple[int, bytes, int]] = []
    while len(answers) < at_least or len({pid for _, _, pid in answers}) < 2:
        assert len(answers) < 400, f"one worker took every connection: {answers[-1]}"
        answers.append(served.request(method, path, body, headers))
    return answers


@pytest.mark.slow
@needs_proc
def test_every_option_reaches_both_workers(redis_url: str) -> None:
    url = redis_url
    now = int(time.time())
    with Store(Settings(redis_url=url, prefix="w22:")) as store:
        store.apply({'known{k="a"}': {now - 30: 3, now - 29: 4}})
    port = free_port()
    arguments = ["--workers", "2", "--token", TOKEN, "--redis-url", url, "--prefix", "w22:"]
    with datasource(arguments, port, clean_environment()) as served:
        workers = served.children()
        target = {"target": "known", "refId": "A", "payload": {"precision": "60"}}
        body = json.dumps(legacy_body([target], now - 600, now)).encode()
        refused = until_both_workers(served, "POST", "/query", body, QUERY)
        assert {status for status, _, _ in refused} == {401}
        asked = [
            ("GET", "/api/v1/query?query=1", None),
            ("GET", "/", None),
            ("POST", "/search", b"{}"),
        ]  # Prometheus, Grafana's health check, simPod
        for method, path, sent in asked:
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                refusals = until_both_workers(served, method, path, sent, headers, at_least=4)
                assert {status for status, _, _ in refusals} == {401}, (path, headers)
        prometheus = json.loads(served.request("GET", "/api/v1/query?query=1")[1])
        assert prometheus["status"] == "error" and prometheus["errorType"] == "unauthorized"

        token = {**QUERY, "Authorization": f"Bearer {TOKEN}"}
        answered = until_both_workers(served, "POST", "/query", body, token)
        for status, answer, _ in answered:
            assert status == 200
            (frame,) = json.loads(answer)
            assert frame["target"] == 'known{k="a"}'
            assert sum(value for value, _ in frame["datapoints"]) == 7  # U's counts, w22:'s
        names = served.request("POST", "/search", b"{}", token)
        assert names[:2] == (200, b'["known"]')

        owners = {pid for _, _, pid in refused + answered}
        assert len(owners) == 2 and owners <= set(workers)
        resolved = []
        for pid in [served.process.pid, *workers]:  # the token travels in no visible place
            with open(f"/proc/{pid}/environ", "rb") as environ:
                variables = environ.read()
            assert TOKEN.encode() not in variables
            if pid in owners:
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    assert TOKEN.encode() not in cmdline.read()
                resolved += [v.split(b"=", 1)[1].decode() for v in variables.split(b"\0")
                             if v.startswith(RESOLVED_VARIABLE.encode() + b"=")]  # fmt: skip
        (path,) = set(resolved)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not os.path.exists(path)  # removed when the server stopped
    assert "no token" not in served.output


@pytest.mark.slow
@needs_proc
def test_without_a_token_it_warns_once_and_the_limits_reach_both_workers(
    redis_server: EmbeddedRedis,
) -> None:
    port = free_port()
    env = clean_environment(SLICECOUNT_MAX_TARGETS="1")
    now = int(time.time())
    targets = [{"target": "a", "refId": "A"}, {"target": "b", "refId": "B"}]
    body = json.dumps(legacy_body(targets, now - 600, now)).encode()
    arguments = ["--workers", "2", "--redis-url", redis_server.url]
    with datasource(arguments, port, env) as served:
        over = until_both_workers(served, "POST", "/query", body, QUERY)
        assert {status for status, _, _ in over} == {422}
        assert json.loads(over[0][1])["message"] == "2 targets, more than the limit of 1"
        bearer = {"Authorization": "Bearer anything"}  # Grafana set up with a token: served
        assert served.request("GET", "/", None, bearer)[0] == 200
    lines = served.output.splitlines()
    assert len([line for line in lines if "carried credentials" in line]) == 1
    assert [line for line in lines if line.startswith("warning: no token")] == [
        f"warning: no token: the datasource is open to anyone who can reach "
        f"http://127.0.0.1:{port}/ (set SLICECOUNT_TOKEN to require one)"
    ]


def test_a_bad_limit_is_a_usage_error_before_any_worker_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLICECOUNT_MAX_TARGETS", "0")
    result = CliRunner().invoke(main, ["datasource", "--workers", "2", "--port", "1"])
    assert result.exit_code == 2
    assert "SLICECOUNT_MAX_TARGETS must be a positive number, got '0'" in result.output
    result = CliRunner().invoke(main, ["datasource", "--workers", "0"])
    assert result.exit_code == 2 and "--workers" in result.output


def test_the_resolved_settings_travel_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(
        redis_url="redis://:pw@127.0.0.1:1/3", prefix="p:", precisions=(1, 60, 3600),
        retention={1: 300, 60: 1440, 3600: 10}, token="t", shards=3, socket_timeout=0.5,
        unique_precisions=(60,), throttle_strategy="sliding",
    )  # fmt: skip
    limits = Limits(max_targets=3, max_range_seconds=86400.5, heavy_requests=2)
    with resolved_file(settings, limits) as path:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        monkeypatch.setenv(RESOLVED_VARIABLE, path)
        monkeypatch.setenv("SLICECOUNT_TOKEN", "not-this-one")  # the environment is not read
        app = from_resolved()
    assert not os.path.exists(path)
    reader = app.state.datasource
    assert reader.settings == settings and reader.limits == limits
    assert Settings(**json.loads(json.dumps(settings_as_json(Settings())))) == Settings()


def test_the_workers_factory_refuses_to_guess(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RESOLVED_VARIABLE, raising=False)
    with pytest.raises(ConfigurationError, match=r"slicecount\.datasource\.app:from_env"):
        from_resolved()
