"""Edges of the Prometheus API found in review: Go's float arithmetic where Python raises,
bounded parsing and work, Prometheus' grid and parameter rules, sparse histogram buckets and
times after now."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from slicecount.config import Settings
from slicecount.datasource.app import create_app
from slicecount.datasource.limits import Limits
from slicecount.store import Store
from tests.datasource.conftest import NOW

FORM = {"content-type": "application/x-www-form-urlencoded"}


@pytest.fixture
def prom(settings: Settings, store: Store) -> Iterator[TestClient]:
    store.apply(
        {
            'lat.bucket{le="0.5",route="/b"}': {NOW - 60: 2},
            'lat.bucket{le="0.1",route="/a"}': {NOW - 60: 3},
            "hits": {s: 1 for s in range(NOW - 600, NOW + 1)},
        }
    )
    limits = Limits(max_computed_points=200_000)
    with TestClient(create_app(settings, limits=limits, clock=lambda: NOW)) as client:
        yield client


def value(client: TestClient, query: str, t: float = 10) -> Any:
    response = client.get("/api/v1/query", params={"query": query, "time": str(t)})
    assert response.status_code == 200, response.text
    return response.json()["data"]["result"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("round(vector(1), Inf)", "NaN"),
        ("round(vector(1), NaN)", "NaN"),
        ("round(vector(2.5), 0)", "NaN"),
        ("round(vector(2.4), 0.5)", "2.5"),
        ("exp(vector(50))", "5184705528587072000000"),
        ("vector(1e22)", "10000000000000000000000"),
        ("vector(1e-7)", "0.0000001"),
        ("vector(-0 ^ -1)", "-Inf"),
        (
            'histogram_quantile(0, label_replace(vector(0), "le", "1", "", "")'
            ' or label_replace(vector(5), "le", "+Inf", "", ""))',
            "NaN",
        ),
    ],
)
def test_go_float_arithmetic(prom: TestClient, query: str, expected: str) -> None:
    (sample,) = value(prom, query)
    assert sample["value"][1] == expected


@pytest.mark.parametrize(
    "query",
    [
        "-" * 3000 + "1",
        "1" + "^1" * 3000,
        "x offset " + "9" * 400 + "y",
        "rate(x[" + "9" * 400 + "s])",
    ],
)
def test_deep_or_huge_input_is_bad_data(prom: TestClient, query: str) -> None:
    response = prom.get("/api/v1/query", params={"query": query})
    assert response.status_code == 400, response.text
    assert response.json()["errorType"] == "bad_data"


def test_scalar_work_is_charged(prom: TestClient) -> None:
    query = " + ".join(["time()"] * 50)
    response = prom.get(
        "/api/v1/query_range", params={"query": query, "start": "0", "end": "10999", "step": "1"}
    )
    assert response.status_code == 422, response.text
    assert "max_computed_points" in response.json()["error"]


def test_grid_counts_milliseconds_and_allows_11000_steps(prom: TestClient) -> None:
    def times(start: str, end: str, step: str) -> list[float]:
        response = prom.get(
            "/api/v1/query_range", params={"query": "1", "start": start, "end": end, "step": step}
        )
        assert response.status_code == 200, response.text
        return [t for t, _ in response.json()["data"]["result"][0]["values"]]

    assert times("0", "0.3", "0.1") == [0, 0.1, 0.2, 0.3]
    assert len(times("0", "11000", "1")) == 11001
    assert times("1.0006", "1.0006", "1") == [1.001]  # milliseconds, as Prometheus keeps


def test_the_form_wins_over_the_url(prom: TestClient) -> None:
    response = prom.post("/api/v1/query?query=1", content="query=2&time=5", headers=FORM)
    assert response.json()["data"]["result"] == [5, "2"]


def test_a_bucket_below_a_label_sets_stored_ones_reads_zero(prom: TestClient) -> None:
    result = value(prom, 'lat_bucket{route="/b"}', NOW)
    assert sorted((r["metric"]["le"], r["value"][1]) for r in result) == [
        ("+Inf", "2"), ("0.1", "0"), ("0.5", "2"),
    ]  # fmt: skip


def test_no_sample_after_now(prom: TestClient) -> None:
    response = prom.get(
        "/api/v1/query_range",
        params={"query": "hits_total", "start": str(NOW - 60), "end": str(NOW + 600), "step": "10"},
    )
    (line,) = response.json()["data"]["result"]
    assert line["values"][-1][0] <= NOW + 1


def test_windows_round_half_up(prom: TestClient) -> None:
    body = prom.get(
        "/api/v1/query",
        params={"query": "increase(hits_total[150s])", "time": str(NOW - 30 - 3600)},
    ).json()
    assert any("counted over [3m]" in info for info in body["infos"]), body["infos"]


def test_unicode_escapes(prom: TestClient) -> None:
    query = 'label_replace(vector(1), "x", "\\U0001F600\\101", "", "")'
    (sample,) = value(prom, query)
    assert sample["metric"] == {"x": "\U0001f600A"}
