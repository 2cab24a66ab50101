"""Unique series in the Prometheus API's look-ups (a gauge under the counters' naming rules),
a clash with a counter's name (the counter keeps it, a warning says so), a selector matching
both kinds, and the work budget counting the slices a union reads."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.datasource.app import create_app
from slicecount.store import Store

NOW = int(time.time()) // 60 * 60 - 30


@pytest.fixture
def prom(settings: Settings, store: Store) -> Iterator[TestClient]:
    for m in range(10):
        start = NOW - 30 - 600 + 60 * m
        for route in ("/a", "/b"):
            users = [f"u{i}" for i in range(5 * m, 5 * m + 20)]
            store.add_unique("api.users", users, {"route": route}, now=start)
        store.add_unique("api.visitors", ["x", "y"], {"page": "home"}, first_seen=True, now=start)
        store.add_unique("seen.total", ["x"], now=start)
    store.apply({"seen_total": {NOW - 100: 3}, 'hits{route="/a"}': {NOW - 100: 5}})
    limits = Limits(max_request_points=200)
    with TestClient(create_app(settings, limits=limits, clock=lambda: NOW)) as client:
        yield client


def get(client: TestClient, path: str, **params: Any) -> Any:
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_names_labels_series_and_metadata(prom: TestClient) -> None:
    names = get(prom, "/api/v1/label/__name__/values")["data"]
    # first_seen counts into a counter of the same name: both are shown
    assert {"api_users", "api_visitors", "api_visitors_total"} <= set(names)
    assert names.count("seen_total") == 1
    assert {"route", "page", "__name__"} <= set(get(prom, "/api/v1/labels")["data"])
    series = get(prom, "/api/v1/series", **{"match[]": "api_users"})["data"]
    assert series == [
        {"__name__": "api_users", "route": "/a"},
        {"__name__": "api_users", "route": "/b"},
    ]
    values = get(prom, "/api/v1/label/route/values", **{"match[]": "api_users"})["data"]
    assert values == ["/a", "/b"]
    meta = get(prom, "/api/v1/metadata")["data"]
    assert meta["api_users"][0]["type"] == "gauge"
    assert "distinct values per slice" in meta["api_users"][0]["help"]
    assert meta["api_visitors_total"][0]["type"] == "counter"
    assert meta["seen_total"][0]["type"] == "counter"


def test_a_name_clash_leaves_the_counter_and_warns(prom: TestClient) -> None:
    body = get(prom, "/api/v1/query", query="seen_total", time=str(NOW))
    (line,) = body["data"]["result"]
    assert line["value"][1] == "3"  # the counter's total, not a distinct count
    assert any(
        "seen_total, seen.total (unique) all map to seen_total" in w for w in body["warnings"]
    ), body["warnings"]


def test_a_selector_of_both_kinds(prom: TestClient) -> None:
    """Listed together; a sum over them cannot be both a union and a sum: refused."""
    body = get(prom, "/api/v1/query", query='{route="/a"}', time=str(NOW - 30))
    names = sorted(line["metric"]["__name__"] for line in body["data"]["result"])
    assert names == ["api_users", "hits_total"]
    response = prom.get("/api/v1/query", params={"query": 'sum({route="/a"})', "time": NOW})
    assert response.status_code == 400
    assert "matches unique series and counters" in response.json()["error"]


def test_the_budget_counts_the_slices_a_union_reads(prom: TestClient) -> None:
    params = {"query": "sum(api_users)", "start": str(NOW - 6990), "end": str(NOW - 30)}
    params["step"] = "60"
    response = prom.get("/api/v1/query_range", params=params)
    assert response.status_code == 422, response.text
    assert "slices of unique series" in response.json()["error"]
