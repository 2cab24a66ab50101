"""One engine: a simPod target written with slicecount's dotted names and the same PromQL on
the Prometheus API answer the same numbers at the same times, on the same data in a real
Redis (a simPod point is dated by the start of its slice, the API's by its end)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from slicecount.config import Settings
from slicecount.core.slices import slice_start
from slicecount.datasource.app import create_app
from slicecount.store import Store
from tests.datasource.conftest import HOUR, NOW, legacy_body, write_known_data

P = 60  # the precision both surfaces read an hour at (1 s and 5 s keep less than an hour)


@pytest.fixture
def client(ds_settings: Settings, store: Store) -> Iterator[TestClient]:
    write_known_data(store)
    with TestClient(create_app(ds_settings, clock=lambda: NOW)) as client:
        yield client


Points = dict[tuple[tuple[tuple[str, str], ...], float], float]
"""A value per (labels, time the value is for: the end of its slice)."""


def simpod(client: TestClient, target: str, to: float = NOW) -> Points:
    body = legacy_body([{"target": target, "refId": "A"}], NOW - HOUR, to)
    response = client.post("/query", json=body)
    assert response.status_code == 200, response.text
    out: Points = {}
    for frame in response.json():
        labels = tuple(sorted(frame["tags"].items()))
        for value, ms in frame["datapoints"]:
            if value is not None:
                out[(labels, ms / 1000 + P)] = value
    return out


def promql(client: TestClient, query: str) -> Points:
    first, last = slice_start(NOW - HOUR, P) + P, slice_start(NOW, P)  # finished slices
    params = {"query": query, "start": str(first), "end": str(last), "step": str(P)}
    response = client.get("/api/v1/query_range", params=params)
    assert response.status_code == 200, response.text
    out: Points = {}
    for series in response.json()["data"]["result"]:
        labels = tuple(sorted((k, v) for k, v in series["metric"].items() if k != "__name__"))
        for t, value in series["values"]:
            if value != "NaN":
                out[(labels, float(t))] = float(value)
    return out


def finished(points: Points) -> Points:
    """The points of finished slices (the API has no sample for a time after now)."""
    return {key: v for key, v in points.items() if key[1] <= NOW}


def bucket_name(client: TestClient) -> str:
    names = client.get("/api/v1/label/__name__/values").json()["data"]
    (name,) = [n for n in names if n.startswith("http_request_duration") and n.endswith("bucket")]
    return str(name)


def same(a: Points, b: Points) -> None:
    assert a.keys() == b.keys()
    for key, value in a.items():
        assert math.isclose(value, b[key], rel_tol=1e-9, abs_tol=1e-12), key


CASES = [
    ("http.requests", "increase({c}[1m])"),
    ("rate(http.requests)", "rate({c}[1m])"),
    ("sum by (status) (rate(http.requests))", "sum by (status) (rate({c}[1m]))"),
    ("topk(2, sum by (route) (rate(http.requests[5m])))",
     "topk(2, sum by (route) (rate({c}[5m])))"),
    ("clamp_max(sum by (status) (http.requests), 10)",
     "clamp_max(sum by (status) (increase({c}[1m])), 10)"),
    ('label_replace(http.requests, "r", "$1", "route", "/(.*)")',
     'label_replace(increase({c}[1m]), "r", "$1", "route", "/(.*)")'),
    ("abs(sum(http.requests) - 100)", "abs(sum(increase({c}[1m])) - 100)"),
    ("sort_desc(sum by (route) (rate(http.requests[5m])))",
     "sort_desc(sum by (route) (rate({c}[5m])))"),
    ("histogram_quantile(0.5, sum by (le) (rate(http.request.duration[5m])))",
     "histogram_quantile(0.5, sum by (le) (rate({h}[5m])))"),
    ("histogram_quantile(0.9, sum(http.request.duration))",
     "histogram_quantile(0.9, sum by (le) (increase({h}[1m])))"),
    ("sum by (status) (rate(http.requests)) / sum(rate(http.requests))",
     "sum by (status) (rate({c}[1m])) / on() group_left sum(rate({c}[1m]))"),
]  # fmt: skip


@pytest.mark.parametrize(("target", "query"), CASES)
def test_both_surfaces_give_the_same_numbers_at_the_same_times(
    client: TestClient, target: str, query: str
) -> None:
    expression = query.format(c="http_requests_total", h=bucket_name(client))
    expected = promql(client, expression)
    assert expected  # the data answers something to compare
    same(finished(simpod(client, target)), expected)


def test_rate_without_a_window_still_answers_without_a_dip_at_the_right_edge(
    client: TestClient,
) -> None:
    got = simpod(client, 'rate(http.requests{route="/a",status="200"})')
    ((labels, _),) = {(k[0], 0) for k in got}
    now_slice = slice_start(NOW, P)
    # /a answers 200 once a second: 30 so far in the slice holding now, 30 s into it
    assert got[(labels, now_slice + P)] == pytest.approx(1.0)
    assert got[(labels, now_slice)] == pytest.approx(1.0)  # a finished slice: 60 / 60 s
    # Grafana's clock a few seconds ahead: the slice has still lasted 30 s, not 33
    ahead = simpod(client, 'rate(http.requests{route="/a",status="200"})', to=NOW + 3)
    assert ahead[(labels, now_slice + P)] == pytest.approx(1.0)
