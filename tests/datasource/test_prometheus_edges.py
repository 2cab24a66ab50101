"""Edges of the Prometheus API found in review: Go's float arithmetic where Python raises,
bounded parsing and work, Prometheus' grid and parameter rules, sparse histogram buckets and
times after now."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.datasource.app import create_app
from slicecount.query.budget import POINT_BYTES, answer_points
from slicecount.store import Store
from tests.datasource.conftest import NOW, legacy_body

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


def test_an_answer_past_its_budget_is_refused_before_it_is_encoded(
    settings: Settings, store: Store
) -> None:
    """``max_answer_points`` charges series x times and the labels' text: 3 series of 101
    times, whose labels (``__name__="hits_total"`` and ``route="/rN"``: 38 bytes each) are 114
    bytes, are 309 points; a budget of 308 refuses them on both surfaces (422 naming the
    figures) and one of 309 answers."""
    store.apply({f'hits{{route="/r{i}"}}': {NOW - 60: 1} for i in range(3)})
    for budget, status in ((308, 422), (309, 200)):
        limits = Limits(max_answer_points=budget)
        with TestClient(create_app(settings, limits=limits, clock=lambda: NOW)) as client:
            params = {"query": "hits_total", "start": str(NOW - 100), "end": str(NOW), "step": "1"}
            response = client.get("/api/v1/query_range", params=params)
            assert response.status_code == status, response.text
            if status == 422:
                error = response.json()
                assert error["errorType"] == "execution"
                assert "309 points" in error["error"] and "3 series x 101 times" in error["error"]
                assert "max_answer_points = 308" in error["error"]
            else:
                assert len(response.json()["data"]["result"]) == 3
    target = {"target": "hits", "refId": "A", "payload": {"precision": "1"}}
    body = legacy_body([target], NOW - 100, NOW, maxDataPoints=1000, intervalMs=1000)
    for budget, status in ((300, 422), (1_000, 200)):  # 3 series of 100 or 101 points
        limits = Limits(max_answer_points=budget)
        with TestClient(create_app(settings, limits=limits, clock=lambda: NOW)) as client:
            response = client.post("/query", json=body)
            assert response.status_code == status, response.text
            assert status == 200 or "max_answer_points = 300" in response.json()["message"]


def test_answer_points_charge_labels_as_bytes_of_json() -> None:
    assert answer_points([], 100) == 0
    assert answer_points([{}], 100) == 100  # a scalar: one line
    labels = {"route": "/users/<int:id>", "status": "200"}  # 5 + 15 + 6 + 6 + 3 + 6 = 41 bytes
    assert answer_points([labels, labels], 10) == 20 + -(-82 // POINT_BYTES)


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
