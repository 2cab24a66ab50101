"""The default limits serve every panel of the shipped dashboards for an 80-route app over
24 hours and 7 days, as Grafana asks for them (steps from 900 points a panel, 6 at a time
in a browser: here one after the other through the real ASGI path), while a query past the
limits is still refused with a 422 naming the limit."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from slicecount import parse_series, series_id
from slicecount.config import Settings
from slicecount.datasource.app import create_app
from slicecount.middleware.mapping import REQUESTS_METRIC, RequestMapping
from slicecount.store import Store
from tests.datasource.conftest import NOW

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the benchmarks' traffic and Grafana's requests
from grafana_refresh import dashboard_targets, grafana_interval, refresh_requests  # noqa: E402
from seeded_traffic import SCRAPE_INTERVAL, generate  # noqa: E402

pytestmark = pytest.mark.slow  # 80 routes' series written first (a few seconds)

DASHBOARDS = ROOT / "grafana" / "dashboards"
PROMETHEUS = DASHBOARDS / "http-overview-prometheus.json"
SIMPOD = DASHBOARDS / "http-overview.json"
RANGES = {"24h": 86400, "7d": 7 * 86400}
TRAFFIC = 300
"""Seconds of the app's traffic written: its series are what the limits weigh, not its length."""


def app_series(routes: int) -> dict[str, dict[int, int]]:
    """The series an app of ``routes`` routes writes: its requests and durations
    (``seeded_traffic``), the queries per request of each, and its database queries."""
    counts = generate(routes, NOW, TRAFFIC, seed=24).counts
    mapping = RequestMapping(series_id)
    for request, seconds in list(counts.items()):
        name, labels = parse_series(request)
        if name != REQUESTS_METRIC:
            continue
        method, route, status = labels["method"], str(labels["route"]), int(labels["status"])
        for t, n in seconds.items():
            entries = mapping.entries(str(method), route, status, 0.01, (t + len(route)) % 40)
            for series, add in entries[3:]:  # the queries histogram and its sum
                counts.setdefault(series, {})[t] = counts.get(series, {}).get(t, 0) + n * add
    for operation in ("SELECT", "INSERT", "UPDATE", "DELETE"):
        counts[f'db.queries{{operation="{operation}"}}'] = {NOW - 60: 3}
    return counts


@pytest.fixture(scope="module")
def eighty_routes() -> dict[str, dict[int, int]]:
    return app_series(80)


@pytest.fixture(params=["book", "blocks"])
def datasource(
    request: pytest.FixtureRequest, settings: Settings, eighty_routes: dict[str, dict[int, int]]
) -> Iterator[TestClient]:
    """The app's series in a layout (its ladder), and the datasource with the default limits."""
    laid = settings.with_changes(layout=request.param)
    with Store(laid, clock=lambda: NOW) as store:
        store.apply(eighty_routes)
    with TestClient(create_app(laid, clock=lambda: NOW)) as client:
        yield client


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat().replace("+00:00", "Z")


def simpod_bodies(span: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each panel of the simPod dashboard as one /query (its targets together), "All"
    selected, at Grafana's interval for a 900-pixel panel."""
    interval = grafana_interval(span, 1)
    dashboard = json.loads(SIMPOD.read_text())
    for panel in dashboard["panels"]:
        targets = [
            {**t, "target": t["target"].replace("$route", ".*").replace("$method", ".*")}
            for t in panel["targets"]
        ]
        yield (
            panel["title"],
            {
                "range": {"from": iso(NOW - span), "to": iso(NOW)},
                "interval": f"{interval}s",
                "intervalMs": interval * 1000,
                "maxDataPoints": 900,
                "targets": targets,
            },
        )


def test_no_panel_is_refused_over_a_day_or_a_week(datasource: TestClient) -> None:
    for name, span in RANGES.items():
        requests = refresh_requests(dashboard_targets(PROMETHEUS), NOW, span, SCRAPE_INTERVAL)
        assert len(requests) == 8
        answered = 0
        for request in requests:
            response = datasource.post(f"/api/v1/{request.path}", data=request.form)
            what = (name, request.panel, request.ref, response.text[:300])
            assert response.status_code == 200, what
            answered += len(response.json()["data"]["result"])
        assert answered > 80 * 4, name  # every route's p50, p95, p99 and queries line, at least
        frames = 0
        for title, body in simpod_bodies(span):
            response = datasource.post("/query", json=body)
            assert response.status_code == 200, (name, title, response.text[:300])
            frames += len(response.json())
        assert frames > 80 * 4, name


def test_a_query_past_the_limits_is_still_refused(datasource: TestClient) -> None:
    # every bucket of every route and method, not aggregated, over the last 7 days at 60 s
    wide = "rate(http_request_duration_seconds_bucket[5m])"
    form = {"query": wide, "start": str(NOW - 7 * 86400), "end": str(NOW), "step": "60"}
    response = datasource.post("/api/v1/query_range", data=form)
    assert response.status_code == 422, response.text[:300]
    assert "(max_computed_points)" in response.json()["error"]
