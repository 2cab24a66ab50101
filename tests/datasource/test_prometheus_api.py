"""The Prometheus HTTP API as Grafana's built-in datasource calls it: every endpoint in the three
request shapes (POST form, POST with the parameters in the URL and an empty body, GET),
envelopes checked field by field, errors with Prometheus' errorType and status code."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from starlette.testclient import TestClient

from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.datasource.app import create_app
from slicecount.embedded import EmbeddedRedis
from slicecount.store import Store
from tests.datasource.conftest import NOW, iso, write_known_data

FORM = {"content-type": "application/x-www-form-urlencoded"}


def call(client: TestClient, shape: str, path: str, params: list[tuple[str, str]]) -> Any:
    """One request in one of Grafana's shapes."""
    if shape == "post-form":
        return client.post(path, content=urlencode(params), headers=FORM)
    if shape == "post-url":
        return client.post(f"{path}?{urlencode(params)}", content=b"", headers=FORM)
    return client.get(f"{path}?{urlencode(params)}")


SHAPES = ["post-form", "post-url", "get"]


@pytest.fixture
def prom(client: TestClient) -> TestClient:
    return client


def ok(response: Any) -> Any:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["status"] == "success"
    assert set(body) <= {"status", "data", "warnings", "infos"}
    return body


def failed(response: Any, status: int, kind: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"status", "errorType", "error"}
    assert body["status"] == "error"
    assert body["errorType"] == kind
    assert isinstance(body["error"], str) and body["error"]
    return str(body["error"])


@pytest.mark.parametrize("shape", SHAPES)
def test_health_check_query(prom: TestClient, shape: str) -> None:
    """Grafana's "Save & test": ``1+1`` at time=4."""
    body = ok(call(prom, shape, "/api/v1/query", [("query", "1+1"), ("time", "4")]))
    assert body == {"status": "success", "data": {"resultType": "scalar", "result": [4, "2"]}}


@pytest.mark.parametrize("shape", SHAPES)
def test_instant_vector(prom: TestClient, shape: str) -> None:
    params = [
        ("query", 'sum by (status) (increase(http_requests_total{route="/a"}[1m]))'),
        ("time", str(NOW - 30)),  # aligned to the minute
        ("timeout", "30s"),  # ignored, as Prometheus would use it
    ]
    body = ok(call(prom, shape, "/api/v1/query", params))
    assert body["data"]["resultType"] == "vector"
    result = sorted(body["data"]["result"], key=lambda r: r["metric"]["status"])
    # /a: 200 once a second, 500 twice at second 10 of each minute
    assert result == [
        {"metric": {"status": "200"}, "value": [NOW - 30, "60"]},
        {"metric": {"status": "500"}, "value": [NOW - 30, "2"]},
    ]
    assert any("precision 1 s" in info for info in body["infos"])


@pytest.mark.parametrize("shape", SHAPES)
def test_range_matrix(prom: TestClient, shape: str) -> None:
    start, end = NOW - 630, NOW - 30
    params = [
        ("query", 'rate(http_requests_total{route="/a",status="200"}[5m])'),
        ("start", str(start)),
        ("end", str(end)),
        ("step", "60"),
    ]
    body = ok(call(prom, shape, "/api/v1/query_range", params))
    data = body["data"]
    assert data["resultType"] == "matrix"
    (line,) = data["result"]
    assert line["metric"] == {"method": "GET", "route": "/a", "status": "200"}
    assert line["values"] == [[start + 60 * k, "1"] for k in range(11)]


def test_range_times_in_rfc3339_and_steps_as_durations(prom: TestClient) -> None:
    params = [
        ("query", 'increase(http_requests_total{route="/a",status="500"}[1m0s])'),
        ("start", iso(NOW - 630)),
        ("end", iso(NOW - 30)),
        ("step", "1m"),
    ]
    body = ok(call(prom, "post-form", "/api/v1/query_range", params))
    (line,) = body["data"]["result"]
    assert [v for _, v in line["values"]] == ["2"] * 11
    assert line["values"][0][0] == NOW - 630


def test_range_evaluates_at_start_plus_k_steps(prom: TestClient) -> None:
    """``end`` not on the grid: the last time is the last ``start + k * step <= end``."""
    params = [("query", "time()"), ("start", "100.5"), ("end", "130"), ("step", "10")]
    body = ok(call(prom, "get", "/api/v1/query_range", params))
    assert body["data"]["result"] == [
        {"metric": {}, "values": [[100.5, "100.5"], [110.5, "110.5"], [120.5, "120.5"]]}
    ]


def test_values_are_strings_nan_and_inf(prom: TestClient) -> None:
    for query, value in (("0/0", "NaN"), ("1/0", "+Inf"), ("-1/0", "-Inf"), ("0.1*3", "0.3")):
        body = ok(call(prom, "get", "/api/v1/query", [("query", query), ("time", "10")]))
        if value == "0.3":
            value = "0.30000000000000004"  # float64 arithmetic, as Go prints it
        assert body["data"]["result"] == [10, value], query


def test_string_literal(prom: TestClient) -> None:
    body = ok(call(prom, "get", "/api/v1/query", [("query", '"hello"'), ("time", "10")]))
    assert body["data"] == {"resultType": "string", "result": [10, "hello"]}


@pytest.mark.parametrize("shape", SHAPES)
def test_labels(prom: TestClient, shape: str) -> None:
    # promtool sends a wide range by default: any range is accepted
    params = [("start", str(NOW - 36_000_000)), ("end", str(NOW + 36_000_000))]
    body = ok(call(prom, shape, "/api/v1/labels", params))
    assert body["data"] == ["__name__", "le", "method", "operation", "route", "status"]
    matched = ok(call(prom, shape, "/api/v1/labels", [("match[]", "db_queries_total")]))
    assert matched["data"] == ["__name__", "operation"]


@pytest.mark.parametrize("shape", SHAPES)
def test_label_values(prom: TestClient, shape: str) -> None:
    names = ok(call(prom, shape, "/api/v1/label/__name__/values", []))["data"]
    assert names == [
        "db_queries_total",
        "http_request_duration_seconds_bucket",
        "http_request_duration_seconds_count",
        "http_requests_total",
    ]  # (the deprecated http_request_duration_bucket answers, but is not listed)
    routes = ok(call(prom, shape, "/api/v1/label/route/values", []))["data"]
    assert routes == ["/a", "/b"]
    matched = call(
        prom, shape, "/api/v1/label/status/values", [("match[]", 'http_requests_total{route="/b"}')]
    )
    assert ok(matched)["data"] == ["200"]
    les = ok(call(prom, shape, "/api/v1/label/le/values", []))["data"]
    assert sorted(les) == ["+Inf", "0.1", "0.5"]


@pytest.mark.parametrize("shape", SHAPES)
def test_series(prom: TestClient, shape: str) -> None:
    params = [
        ("match[]", 'http_requests_total{status="500"}'),
        ("match[]", "db_queries_total"),  # repeated match[]: the union
        ("start", str(NOW - 3600)),
        ("end", str(NOW)),
    ]
    body = ok(call(prom, shape, "/api/v1/series", params))
    assert body["data"] == [
        {"__name__": "db_queries_total", "operation": "SELECT"},
        {"__name__": "http_requests_total", "method": "GET", "route": "/a", "status": "500"},
    ]


def test_series_needs_a_match(prom: TestClient) -> None:
    failed(call(prom, "get", "/api/v1/series", []), 400, "bad_data")
    error = failed(
        call(prom, "get", "/api/v1/series", [("match[]", "rate(x[5m])")]), 400, "bad_data"
    )
    assert "match[]" in error


@pytest.mark.parametrize("shape", SHAPES)
def test_metadata(prom: TestClient, shape: str) -> None:
    data = ok(call(prom, shape, "/api/v1/metadata", []))["data"]
    assert data["http_requests_total"] == [
        {"type": "counter", "help": "slicecount http.requests", "unit": ""}
    ]
    assert data["http_request_duration_seconds"] == [
        {"type": "histogram", "help": "slicecount http.request.duration", "unit": "seconds"}
    ]
    assert "http_request_duration" not in data  # the deprecated family: only when named
    one = ok(call(prom, shape, "/api/v1/metadata", [("metric", "db_queries_total")]))["data"]
    assert list(one) == ["db_queries_total"]
    old = [("metric", "http_request_duration")]
    assert ok(call(prom, shape, "/api/v1/metadata", old))["data"] == {
        "http_request_duration": [
            {"type": "histogram", "help": "slicecount http.request.duration", "unit": ""}
        ]
    }


@pytest.mark.parametrize("shape", SHAPES)
def test_buildinfo_rules_exemplars(prom: TestClient, shape: str) -> None:
    info = ok(call(prom, shape, "/api/v1/status/buildinfo", []))["data"]
    major, minor, _ = (int(x) for x in info["version"].split("."))
    assert (major, minor) >= (2, 24)
    assert "features" not in info  # with it, Grafana would take us for Mimir
    assert ok(call(prom, shape, "/api/v1/rules", []))["data"] == {"groups": []}
    # the exemplar probe sends milliseconds
    ms = [("query", "http_requests_total"), ("start", "1700000000000"), ("end", "1700003600000")]
    assert ok(call(prom, shape, "/api/v1/query_exemplars", ms))["data"] == []


def test_other_method_is_405_unknown_path_404(prom: TestClient) -> None:
    for method in ("PUT", "DELETE", "PATCH"):
        response = prom.request(method, "/api/v1/query", params={"query": "1"})
        assert response.status_code == 405, method
        assert response.json()["status"] == "error"
    # Grafana probes /status/flags to detect Thanos: it must be a 404
    failed(prom.get("/api/v1/status/flags"), 404, "not_found")


@pytest.mark.parametrize(
    ("path", "params", "needle"),
    [
        ("/api/v1/query", [], "'query'"),
        ("/api/v1/query", [("query", "sum(")], "parse error"),
        ("/api/v1/query", [("query", "rate(x)")], "range vector"),
        ("/api/v1/query", [("query", "delta(x[5m])")], "delta() is not supported"),
        ("/api/v1/query", [("query", "x[5m:1m]")], "subqueries"),
        ("/api/v1/query", [("query", "x"), ("time", "yesterday")], "'time'"),
        ("/api/v1/query", [("query", "x[5m]")], "range vector alone"),
        ("/api/v1/query_range", [("query", "1"), ("start", "10"), ("end", "5"), ("step", "1")],
         "before start"),
        ("/api/v1/query_range", [("query", "1"), ("start", "1"), ("end", "5"), ("step", "0")],
         "positive"),
        ("/api/v1/query_range", [("query", "1"), ("start", "1"), ("end", "5"), ("step", "1x")],
         "'step'"),
        ("/api/v1/query_range", [("query", "1"), ("start", "0"), ("end", "20000"), ("step", "1")],
         "11,000 points"),
        ("/api/v1/query_range", [("query", '"s"'), ("start", "0"), ("end", "1"), ("step", "1")],
         "string"),
        ("/api/v1/label/not-a-label/values", [], "invalid label name"),
        # a slicecount name as stored: the Prometheus name is suggested
        ("/api/v1/query", [("query", "rate(http.requests[1m])")],
         "unexpected character '.' in 'http.requests' (PromQL writes '.' as '_'): did you mean "
         "http_requests_total?"),
        ("/api/v1/query", [("query", "rate(http.request.duration.bucket[1m])")],
         "did you mean http_request_duration_seconds_bucket?"),
        ("/api/v1/series", [("match[]", "db.queries")], "did you mean db_queries_total?"),
    ],
)  # fmt: skip
def test_bad_data(prom: TestClient, path: str, params: list[tuple[str, str]], needle: str) -> None:
    for shape in SHAPES:
        error = failed(call(prom, shape, path, params), 400, "bad_data")
        assert needle in error, (shape, error)


def test_execution_errors_are_422(prom: TestClient) -> None:
    # two series on the right match one on the left: many-to-many is refused
    query = 'http_requests_total{status="200"} / ignoring(route, method) http_requests_total'
    error = failed(call(prom, "get", "/api/v1/query", [("query", query)]), 422, "execution")
    assert "matching" in error or "duplicate" in error
    # more stored series than the limit (the fixture's max_series is 50)
    over = [("query", "x"), ("time", str(NOW))]
    assert ok(call(prom, "get", "/api/v1/query", over))["data"]["result"] == []


def test_limits_answer_422(settings: Settings, store: Store) -> None:
    write_known_data(store)
    app = create_app(settings, limits=Limits(max_series=2), clock=lambda: NOW)
    with TestClient(app) as client:
        error = failed(
            call(client, "get", "/api/v1/query", [("query", "http_requests_total")]),
            422,
            "execution",
        )
        assert "limit of 2" in error


def test_redis_down_is_503(private_redis: EmbeddedRedis) -> None:
    app = create_app(Settings(redis_url=private_redis.url), clock=lambda: NOW)
    private_redis.stop()
    with TestClient(app) as client:
        failed(
            call(client, "get", "/api/v1/query", [("query", "http_requests_total")]),
            503,
            "unavailable",
        )
        # Grafana's "Save & test" (``1+1``) is green only when a query of data would work
        failed(
            call(client, "get", "/api/v1/query", [("query", "1+1"), ("time", "4")]),
            503,
            "unavailable",
        )


def test_token_guards_the_api_but_not_buildinfo(settings: Settings, store: Store) -> None:
    app = create_app(Settings(redis_url=settings.redis_url, token="s3cret"), clock=lambda: NOW)
    with TestClient(app) as client:
        assert client.get("/api/v1/query?query=1").status_code == 401
        assert client.get("/api/v1/status/buildinfo").status_code == 200
        answer = client.get("/api/v1/query?query=1", headers={"authorization": "Bearer s3cret"})
        assert answer.status_code == 200


def test_name_collisions_are_warned(settings: Settings, store: Store) -> None:
    store.apply({"jobs.done": {NOW - 5: 1}, "jobs_done": {NOW - 5: 2}})
    app = create_app(settings, clock=lambda: NOW)
    with TestClient(app) as client:
        body = ok(call(client, "get", "/api/v1/query", [("query", "jobs_done_total")]))
        assert body["warnings"] == [
            "jobs.done, jobs_done all map to jobs_done_total: only jobs.done is answered "
            "under that name"
        ]
        assert [r["value"][1] for r in body["data"]["result"]] == ["1"]


@pytest.fixture
def empty_client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings, clock=lambda: NOW)) as client:
        yield client


def test_empty_store_answers_empty(empty_client: TestClient) -> None:
    assert ok(call(empty_client, "get", "/api/v1/labels", []))["data"] == []
    body = ok(call(empty_client, "get", "/api/v1/query", [("query", "http_requests_total")]))
    assert body["data"] == {"resultType": "vector", "result": []}
