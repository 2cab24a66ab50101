from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import httpx2 as httpx
import pytest
from click.testing import CliRunner

from slicecount.cli import main
from slicecount.config import Settings
from slicecount.embedded import EmbeddedRedis, free_port
from slicecount.store import Store


def test_demo_reads_back_every_event_at_every_precision() -> None:
    result = CliRunner().invoke(main, ["demo", "--synthetic", "--seed", "7"])
    assert result.exit_code == 0, result.output
    recorded = int(re.search(r"recorded (\d+) requests", result.output).group(1))  # type: ignore[union-attr]
    sums = [
        int(s)
        for s in re.findall(r"precision +\d+ s: \d+ series, \d+ slices, sum (\d+)", result.output)
    ]
    ladder = Settings().precisions  # the default layout's: what the demo writes
    assert len(sums) == len(ladder)
    assert sums == [recorded] * len(ladder)
    assert "precision      1 s: 6 series, 60 slices" in result.output


def test_annotate_records_a_marker(store: Store, redis_server: EmbeddedRedis) -> None:
    result = CliRunner().invoke(
        main,
        ["annotate", "--redis-url", redis_server.url, "--tag", "deploy", "--tag", "api",
         "--time", "1700000000", "deployed v2\nwith details"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "deployed v2" in result.output
    (annotation,) = store.annotations(1_699_999_999, 1_700_000_001)
    assert annotation["tags"] == ["deploy", "api"]
    assert annotation["title"] == "deployed v2"
    assert annotation["text"] == "deployed v2\nwith details"


def test_bad_settings_are_usage_errors() -> None:
    result = CliRunner().invoke(main, ["annotate", "--redis-url", "http://x", "text"])
    assert result.exit_code == 2
    assert "unknown redis URL scheme 'http'" in result.output


@pytest.mark.slow
def test_datasource_command_serves_http(redis_server: EmbeddedRedis, store: Store) -> None:
    store.incr("served", 3)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "slicecount.cli", "datasource", "--redis-url", redis_server.url,
         "--port", str(port), "--token", "t0k"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                health = httpx.get(
                    f"http://127.0.0.1:{port}/", headers={"Authorization": "Bearer t0k"}, timeout=2
                )
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "datasource did not start"
                time.sleep(0.1)
        assert health.status_code == 200
        assert httpx.get(f"http://127.0.0.1:{port}/").status_code == 401  # Grafana without it
        names = httpx.post(
            f"http://127.0.0.1:{port}/search", json={}, headers={"Authorization": "Bearer t0k"}
        )
        assert names.json() == ["served"]
        assert httpx.post(f"http://127.0.0.1:{port}/search", json={}).status_code == 401
    finally:
        process.terminate()
        process.wait(timeout=20)
        assert process.stdout is not None
        process.stdout.close()


def test_show_reads_the_layout_its_setting_names(redis_server: EmbeddedRedis) -> None:
    now = int(time.time())
    with Store(Settings(redis_url=redis_server.url, layout="blocks")) as blocks:
        blocks.apply({'http.requests{route="/a"}': {now - 60: 7, now: 1}})
    args = ["show", "http.requests", "--redis-url", redis_server.url, "--json", "--since", "5m"]
    raw = CliRunner().invoke(main, [*args, "--layout", "blocks", "--precision", "5"])
    assert raw.exit_code == 0, raw.output
    assert [s["total"] for s in json.loads(raw.output)["series"]] == [8]
    default = CliRunner().invoke(main, [*args, "--precision", "5"])  # blocks, the default
    assert default.exit_code == 0 and default.output == raw.output
    book = CliRunner().invoke(main, [*args, "--layout", "book", "--precision", "5"])  # none
    assert book.exit_code == 0 and json.loads(book.output)["series"] == []


def test_show_prints_known_counts(store: Store, redis_server: EmbeddedRedis) -> None:
    now = int(time.time())
    store.apply(
        {
            'http.requests{route="/a",status="200"}': {now - 120: 5, now - 60: 7, now: 1},
            'http.requests{route="/a",status="500"}': {now - 60: 2},
            'http.requests{route="/b",status="200"}': {now - 300: 4},
        }
    )
    result = CliRunner().invoke(
        main, ["show", "http.requests", "--redis-url", redis_server.url, "--by", "route"]
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1].split()[:2] == ["route", "total"]
    assert lines[2].split()[:3] == ["/a", "15", "1"]
    assert lines[3].split()[:3] == ["/b", "4", "0"]
    assert all(ch in "▁▂▃▄▅▆▇█" for ch in lines[2].split()[3])
    raw = CliRunner().invoke(
        main, ["show", "http.requests", "--redis-url", redis_server.url, "--since", "3m",
               "--precision", "60", "--json"],
    )  # fmt: skip
    assert raw.exit_code == 0, raw.output
    data = json.loads(raw.output)
    totals = {s["key"]: s["total"] for s in data["series"]}
    # 3 minutes back: the slices from the one holding now-180 on; /b's event is older
    assert totals == {
        'http.requests{route="/a",status="200"}': 13,
        'http.requests{route="/a",status="500"}': 2,
        'http.requests{route="/b",status="200"}': 0,
    }
    bad = CliRunner().invoke(
        main, ["show", "x", "--redis-url", redis_server.url, "--since", "soon"]
    )
    assert bad.exit_code == 2 and "invalid duration 'soon'" in bad.output
