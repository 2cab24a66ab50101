"""A real Prometheus API client: Debian's ``promtool`` (package ``prometheus``) queries a real
datasource server, and its output holds the known values."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from slicecount.config import Settings
from slicecount.datasource.app import create_app
from slicecount.store import Store
from tests.datasource.conftest import NOW, write_known_data
from tests.serving import serving

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is not installed (apt-get install prometheus; .ci/run installs it)",
)


@pytest.fixture
def server(settings: Settings, store: Store) -> Iterator[str]:
    write_known_data(store)
    with serving(create_app(settings, clock=lambda: NOW)) as port:
        yield f"http://127.0.0.1:{port}"


def promtool(*args: str) -> str:
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, "query", *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def as_json(*args: str) -> Any:
    return json.loads(promtool(*args[:1], "--format=json", *args[1:]))


def test_query_instant(server: str) -> None:
    text = 'sum by (status) (increase(http_requests_total{route="/a"}[1m]))'
    result = as_json("instant", f"--time={NOW - 30}", server, text)
    assert sorted((r["metric"]["status"], r["value"]) for r in result) == [
        ("200", [NOW - 30, "60"]),
        ("500", [NOW - 30, "2"]),
    ]
    # the default promql format too: what a person reads
    shown = promtool("instant", f"--time={NOW - 30}", server, text)
    assert '{status="200"} => 60 @[' in shown


def test_query_range(server: str) -> None:
    text = 'rate(http_requests_total{route="/a",status="200"}[5m])'
    result = as_json(
        "range", f"--start={NOW - 630}", f"--end={NOW - 30}", "--step=1m", server, text
    )
    (line,) = result
    assert line["metric"] == {"method": "GET", "route": "/a", "status": "200"}
    assert line["values"] == [[NOW - 630 + 60 * k, "1"] for k in range(11)]


def test_query_labels(server: str) -> None:
    # without --start/--end promtool sends now +- 9999 h: any range is accepted
    assert promtool("labels", server, "route").split() == ["/a", "/b"]
    names = promtool("labels", server, "__name__").split()
    assert "http_requests_total" in names and "http_request_duration_seconds_bucket" in names
    matched = promtool("labels", "--match=http_requests_total{route='/b'}", server, "status")
    assert matched.split() == ["200"]


def test_query_series(server: str) -> None:
    shown = promtool("series", "--match=db_queries_total", server)
    assert shown.strip() == '{__name__="db_queries_total", operation="SELECT"}'
    several = promtool(
        "series", "--match=http_requests_total{status='500'}", "--match=db_queries_total", server
    )
    assert len(several.strip().splitlines()) == 2
