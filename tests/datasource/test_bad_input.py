"""Bad input gets a clear 4xx with a JSON message, never a 5xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.datasource.app import create_app
from slicecount.store import Store
from tests.datasource.conftest import HOUR, NOW, iso, legacy_body, write_known_data


def query(target: str, start: float = NOW - HOUR, end: float = NOW, **extra: Any) -> dict[str, Any]:
    return legacy_body([{"target": target, "refId": "A"}], start, end, **extra)


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        (query("rate("), 400, "expected a metric name"),
        (query("frobnicate(http.requests)"), 400, "function frobnicate() is unknown"),
        (query('http.requests{route=~"("}'), 400, "invalid regex"),
        (query('x{a=~"' + "a" * 1001 + '"}'), 400, "limit of 1000"),
        (query("http.requests", NOW, NOW - 60), 400, "is after"),
        (query("http.requests", 0, NOW * 10), 422, "days, more than the limit"),
        (query("http.requests", intervalMs="fast"), 400, "'intervalMs'"),
        ({**query("x"), "range": {"from": "yesterday", "to": iso(NOW)}}, 400, "ISO-8601"),
        ({**query("x"), "range": "now-1h"}, 400, "'range' must be a JSON object"),
        ({**query("x"), "targets": "http.requests"}, 400, "'targets' must be a list"),
        ({**query("x"), "targets": [5]}, 400, "targets[0] must be a JSON object"),
        ({**query("x"), "targets": [{"target": 5}]}, 400, "targets[0].target must be a string"),
        (legacy_body([{"target": "x"}] * 6, NOW - 60, NOW), 422, "6 targets"),
        (query("http.requests", NOW - 86400, NOW, maxDataPoints=0, intervalMs=0), 200, ""),
        ({**query("x"), "targets": [{"target": "x", "payload": {"precision": "7"}}]}, 400,
         "unknown precision 7"),
        ({**query("x"), "targets": [{"target": "x", "payload": {"function": "median"}}]}, 400,
         "payload.function"),
        ({**query("x"), "adhocFilters": [{"key": "a", "operator": "~~", "value": "b"}]}, 400,
         "unknown matcher operator"),
        ({**query("x"), "adhocFilters": "route=/"}, 400, "ad-hoc filters must be a list"),
    ],
)  # fmt: skip
def test_bad_queries_are_4xx_with_a_message(
    client: TestClient, body: dict[str, Any], status: int, fragment: str
) -> None:
    response = client.post("/query", json=body)
    assert response.status_code == status, response.text
    if status != 200:
        assert fragment in response.json()["message"]


def test_limits_on_series_and_points(client: TestClient) -> None:
    # the fixture's limits: 50 series per query, 2000 points per series
    points = client.post(
        "/query", json=query("db.queries", NOW - 86400, NOW, maxDataPoints=100_000, intervalMs=1)
    )
    assert points.status_code == 200  # auto precision keeps within the limit
    pinned = legacy_body(
        [{"target": "db.queries", "payload": {"precision": "60"}}], NOW - 5 * 86400, NOW
    )
    response = client.post("/query", json=pinned)
    assert response.status_code == 422
    assert "points per series" in response.json()["message"]


def test_series_limit(client: TestClient, store: Any) -> None:
    store.apply({f'many{{i="{i}"}}': {NOW - 10: 1} for i in range(60)})
    response = client.post("/query", json=query("many"))
    assert response.status_code == 422
    assert "more than 50 series" in response.json()["message"]
    assert client.post("/query", json=query("sum(many)")).status_code == 422
    assert client.post("/query", json=query('many{i=~"1."}')).status_code == 200
    # every target is compiled before any series is discovered: the malformed one is reported
    both = [{"target": "many", "refId": "A"}, {"target": "rate(", "refId": "B"}]
    response = client.post("/query", json=legacy_body(both, NOW - HOUR, NOW))
    assert response.status_code == 400 and "expected a metric name" in response.json()["message"]


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'"text"', "must be a JSON object"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_malformed_bodies(client: TestClient, raw: bytes, fragment: str) -> None:
    for path in ("/query", "/search", "/metrics", "/variable", "/tag-values", "/annotations"):
        response = client.post(path, content=raw, headers={"content-type": "application/json"})
        assert response.status_code == 400, (path, response.text)
        assert fragment in response.json()["message"]


def test_body_size_limit(client: TestClient) -> None:
    big = query("http.requests")
    big["padding"] = "x" * 30_000
    response = client.post("/query", json=big)
    assert response.status_code == 400
    assert "more than the limit of 20000" in response.json()["message"]


def test_unknown_paths_and_methods(client: TestClient) -> None:
    response = client.post("/nope", json={})
    assert response.status_code == 404 and "no such endpoint" in response.json()["message"]
    response = client.get("/query")
    assert response.status_code == 405 and response.json()["message"]


def test_wrong_types_in_pickers(client: TestClient) -> None:
    assert client.post("/tag-values", json={"key": 5}).status_code == 400
    assert (
        client.post("/metric-payload-options", json={"metric": 1, "name": "x"}).status_code == 400
    )
    assert client.post("/variable", json={"payload": {"target": ["x"]}}).status_code == 400
    assert client.post("/variable", json={"payload": "x"}).status_code == 400
    assert (
        client.post("/variable", json={"payload": {"target": "label_values(x, )"}}).status_code
        == 400
    )
    assert client.post("/annotations", json={"range": {"from": 1, "to": 0}}).status_code == 400


def test_redis_down_is_503_not_500(ds_settings: Any) -> None:
    from slicecount.config import Settings
    from slicecount.datasource.app import create_app

    settings = Settings(redis_url="redis://127.0.0.1:1/0", socket_timeout=0.5)
    with TestClient(create_app(settings)) as client:
        response = client.post("/query", json=query("http.requests"))
        assert response.status_code == 503
        assert "redis unavailable" in response.json()["message"]
        assert client.get("/").status_code == 503  # the health check says so (issue 22)
        assert client.get("/livez").status_code == 200  # the process itself serves


@pytest.fixture
def roomy_client(ds_settings: Settings, store: Store) -> Iterator[TestClient]:
    """The known data behind the default limits (a 1 MiB body, the default work budget)."""
    write_known_data(store)
    with TestClient(create_app(ds_settings, clock=lambda: NOW)) as client:
        yield client


def raw_query(target: str = "http.requests", /, **range_: object) -> bytes:
    span = {"from": iso(NOW - HOUR), "to": iso(NOW), **range_}
    return json.dumps({"range": span, "targets": [{"target": target, "refId": "A"}]}).encode()


# Each way of making the datasource answer 500 that issue 11 lists, now a 4xx with a message.
@pytest.mark.parametrize(
    ("path", "raw", "fragment"),
    [
        ("/query", raw_query("1e400"), "number 1e400 is out of range"),
        ("/query", raw_query("sum(" * 795 + "x" + ")" * 795), "nests more than 100"),
        ("/query", raw_query("/".join(["x"] * 1900)), "nests more than 100"),
        ("/query", b"[" * 100_000, "nests arrays and objects more than 64 deep"),
        ("/query", b'{"a":' * 50_000 + b"1" + b"}" * 50_000, "more than 64 deep"),
        ("/query", raw_query(**{"from": "9" * 5000}), "range.from is out of range"),
        ("/query", raw_query(**{"to": "9" * 30}), "range.to is out of range"),
        ("/query", raw_query(**{"from": 1e300}), "range.from is out of range"),
        ("/query", raw_query(**{"from": 10**400}), "range.from is out of range"),
        ("/query", raw_query(**{"from": "²"}), "not an ISO-8601 time"),
        ("/query", raw_query(**{"from": "0001-01-01T00:00:00"}), "ISO-8601"),
        ("/query", raw_query(**{"to": "9999-12-31T23:59:59+00:00"}), "more than the limit"),
        ("/query", b'{"range": {"from": NaN, "to": 1}, "targets": []}', "contains NaN"),
        ("/query", b'{"intervalMs": Infinity, "targets": []}', "contains Infinity"),
        ("/query", b'{"maxDataPoints": -Infinity}', "contains -Infinity"),
        ("/query", b'{"intervalMs": 1e400}', "number 1e400 in the request body"),
        ("/query", raw_query()[:-1] + b', "maxDataPoints": 1' + b"0" * 400 + b"}",
         "'maxDataPoints'"),
        ("/annotations", b'{"range": {"from": 0, "to": 1}, "annotation": {"query": "\\ud800"}}',
         "is not valid Unicode text"),
        ("/search", b'{"target": NaN}', "contains NaN"),
        ("/variable", b'{"payload": {"target": "label_values(' + b"sum(" * 300 + b'x, a)"}}',
         "nests more than"),
    ],
)  # fmt: skip
def test_inputs_that_answered_500_answer_4xx_with_a_message(
    roomy_client: TestClient, path: str, raw: bytes, fragment: str
) -> None:
    response = roomy_client.post(path, content=raw, headers={"content-type": "application/json"})
    assert 400 <= response.status_code < 500, response.text
    assert response.headers["content-type"] == "application/json"
    assert fragment in response.json()["message"]


def test_results_that_are_not_finite_are_null(roomy_client: TestClient) -> None:
    for target in ('http.requests{route="/a"} * 1e308 * 10', "sum(http.requests * 1e308 * 10)"):
        response = roomy_client.post("/query", json=query(target))
        assert response.status_code == 200, response.text
        frames = response.json()
        values = [v for frame in frames for v, _ in frame["datapoints"]]
        assert values and None in values and set(values) <= {None, 0}
    table = {
        **query("x"),
        "targets": [{"target": "http.requests * 1e308 * 1e308", "type": "table"}],
    }
    rows = roomy_client.post("/query", json=table).json()[0]["rows"]
    assert [row[-2] for row in rows] == [None, None, None]  # the totals overflow


def test_lone_surrogates_are_echoed_as_escapes(roomy_client: TestClient) -> None:
    raw = raw_query().replace(b'"refId": "A"', b'"refId": "\\ud800x"')
    response = roomy_client.post("/query", content=raw)
    assert response.status_code == 200
    assert b'"refId":"\\ud800x"' in response.content
    assert {frame["refId"] for frame in response.json()} == {"\ud800x"}
    annotations = json.dumps(
        {"range": {"from": iso(NOW - HOUR), "to": iso(NOW)}, "annotation": {"name": "\udfff"}}
    )
    response = roomy_client.post("/annotations", content=annotations.encode())
    assert response.status_code == 200 and response.json()[0]["annotation"]["name"] == "\udfff"
    response = roomy_client.post("/query", content=raw.replace(b"http.requests", b"\\ud800"))
    assert response.status_code == 400 and "unexpected character" in response.json()["message"]


@pytest.mark.layouts("book", "blocks")
def test_over_the_work_budget_is_422_before_any_slice_is_read(
    ds_settings: Settings, store: Store, redis_client: Any
) -> None:
    # what reads slices: the book's HMGET of the fields, or the open hash's HGETALL (+ GETRANGE)
    reads = "cmdstat_hmget" if ds_settings.layout == "book" else "cmdstat_hgetall"
    write_known_data(store)
    # 3 series of 61 points: one point too many (the blocks layout reads 8 for the cost of one)
    budget = 3 * 60 if ds_settings.layout == "book" else 183 // 8
    limits = Limits(max_request_points=budget)
    with TestClient(create_app(ds_settings, limits=limits, clock=lambda: NOW)) as client:
        redis_client.config_resetstat()
        response = client.post("/query", json=query("http.requests"))
        assert response.status_code == 422
        message = response.json()["message"]
        assert message.startswith("the query reads 183 points (series x points per series")
        assert "target 'A': 3 series x 61 points at precision 60 s" in message
        assert f"more than the work budget max_request_points = {budget}" in message
        commands = redis_client.info("commandstats")
        assert "cmdstat_zrangebylex" in commands  # its series were discovered...
        assert reads not in commands  # ...and not one slice was read
        assert client.post("/query", json=query('http.requests{route="/a"}')).status_code == 200
        assert reads in redis_client.info("commandstats")


def test_the_blocks_layout_reads_8_points_for_the_cost_of_a_hash_field(
    ds_settings: Settings,
) -> None:
    blocks = Settings(
        redis_url=ds_settings.redis_url, layout="blocks"
    )  # its ladder: 5 s for 2 days
    with Store(blocks, clock=lambda: NOW) as store:
        write_known_data(store)
    for budget, status in ((271, 200), (270, 422)):  # 3 series x 721 slices of 5 s: 270.4
        limits = Limits(max_request_points=budget)
        with TestClient(create_app(blocks, limits=limits, clock=lambda: NOW)) as client:
            response = client.post("/query", json=query("http.requests"))
        assert response.status_code == status, response.text
    assert response.json()["message"].startswith("the query reads 2,163 points (series x")
    assert (
        "more than the work budget max_request_points = 270 (2,160 points in the blocks layout, "
        "which reads 8 for the cost of a hash field)" in response.json()["message"]
    )


@pytest.mark.layouts("book")  # its 5.5 M points cost the blocks layout 0.7 M: under the budget
def test_the_query_of_issue_11_is_over_the_default_budget(
    roomy_client: TestClient, store: Store, redis_client: Any
) -> None:
    """500 series at precision 1 over 10 999 s, inside every other limit: it took 14.3 s and
    answered 115 MB; now a 422 before any slice is read."""
    store.apply({f'wide{{i="{i}"}}': {NOW - 10: 1} for i in range(500)})
    target = {"target": "wide", "refId": "W", "payload": {"precision": "1"}}
    body = legacy_body([target], NOW - 10_999, NOW)
    redis_client.config_resetstat()
    response = roomy_client.post("/query", json=body)
    assert response.status_code == 422
    assert response.json()["message"].startswith(
        "the query reads 5,500,000 points (series x points per series, summed over its "
        "targets; target 'W': 500 series x 11,000 points at precision 1 s), more than the "
        "work budget max_request_points = 2,000,000"
    )
    assert "cmdstat_hmget" not in redis_client.info("commandstats")
