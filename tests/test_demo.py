"""``slicecount demo --duration 20`` as a user runs it: the datasource it starts answers with
live data while it runs, and every process it started is gone after it ends."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import httpx2 as httpx
import pytest

from slicecount.embedded import free_port

pytestmark = pytest.mark.slow


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) is gone for our purpose
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_demo_runs_the_stack_and_leaves_nothing_behind() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "slicecount.cli", "demo", "--duration", "20", "--port", str(port),
         "--rate", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    lines: list[str] = []
    pids: list[int] = []
    while not pids:
        line = process.stdout.readline()
        assert line, "demo exited early:\n" + "".join(lines)
        lines.append(line)
        if line.startswith("pids"):
            pids = [int(p) for p in line.split()[1:]]
    assert any(f"http://127.0.0.1:{port}/" in line for line in lines)
    base = f"http://127.0.0.1:{port}"

    def series(target: str) -> list[dict[str, object]]:
        now = datetime.now(timezone.utc)
        body = {
            "range": {"from": (now - timedelta(minutes=5)).isoformat(), "to": now.isoformat()},
            "intervalMs": 1000, "maxDataPoints": 500,
            "targets": [{"refId": "A", "target": target}],
        }  # fmt: skip
        response = httpx.post(f"{base}/query", json=body, timeout=10)
        assert response.status_code == 200, response.text
        frames: list[dict[str, object]] = response.json()
        return frames

    wanted = {
        "requests": "sum by (status) (rate(http.requests))",
        "p95": "histogram_quantile(0.95, sum by (route) (http.request.duration))",
        "queries": "sum(rate(db.queries))",
    }
    seen: dict[str, bool] = {}
    deadline = time.monotonic() + 18
    while time.monotonic() < deadline and len(seen) < len(wanted):
        for key, target in wanted.items():
            frames = series(target)
            if any(any(v for v, _ in f["datapoints"]) for f in frames):  # type: ignore[attr-defined]
                seen[key] = True
        time.sleep(1)
    assert set(seen) == set(wanted)

    rest, _ = process.communicate(timeout=90)
    output = "".join(lines) + rest
    assert process.returncode == 0, output
    assert re.search(r"last 15s: +\d+\.\d req/s", output)
    assert "stopped: every service exited" in output
    assert [pid for pid in pids if alive(pid)] == []
