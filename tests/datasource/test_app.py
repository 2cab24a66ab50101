"""Every endpoint with request bodies in the shapes the Grafana plugins send, answered from
counts written through the Store on a known timeline."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.datasource.conftest import HOUR, NOW, legacy_body, simpod_body

pytestmark = pytest.mark.topologies

MS = 1000
SLICE = NOW - NOW % 60  # start of the current 60 s slice


def frames(client: TestClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = client.post("/query", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert isinstance(result, list)
    return result


def by_target(result: list[dict[str, Any]]) -> dict[str, list[list[Any]]]:
    return {f["target"]: f["datapoints"] for f in result}


def test_health_for_save_and_test(client: TestClient) -> None:
    assert client.get("/").status_code == 200
    assert client.head("/").status_code == 200


def test_legacy_query_timeseries_hidden_target_omitted(client: TestClient) -> None:
    body = legacy_body(
        [
            {"target": "http.requests", "refId": "A", "type": "timeserie"},
            {"target": "db.queries", "refId": "B", "hide": True, "type": "table"},
            {"target": "select metric", "refId": "C", "type": "timeserie"},
        ],
        NOW - HOUR,
        NOW,
    )
    result = frames(client, body)
    assert {f["refId"] for f in result} == {"A"}
    series = by_target(result)
    assert set(series) == {
        'http.requests{method="GET",route="/a",status="200"}',
        'http.requests{method="GET",route="/a",status="500"}',
        'http.requests{method="POST",route="/b",status="200"}',
    }
    points = series['http.requests{method="GET",route="/a",status="200"}']
    stamps = [t for _, t in points]
    assert stamps == sorted(stamps) and stamps[0] == (NOW - HOUR) // 60 * 60 * MS
    assert stamps[-1] == SLICE * MS  # 60 s slices: the panel range of 1 h picks precision 60
    assert [v for v, _ in points[1:-1]] == [60] * (len(points) - 2)
    assert points[-1][0] == 30  # the current slice holds the last 30 s
    assert sum(v for v, _ in points) == HOUR
    tags = result[0]["tags"]
    assert set(tags) == {"method", "route", "status"}


def test_sum_by_label_and_rate(client: TestClient) -> None:
    body = legacy_body(
        [{"target": "sum by (status) (rate(http.requests))", "refId": "A"}], NOW - HOUR, NOW
    )
    series = by_target(frames(client, body))
    assert set(series) == {'http.requests{status="200"}', 'http.requests{status="500"}'}
    ok = series['http.requests{status="200"}']
    full_minute = ok[5][0]
    assert full_minute == 1.0  # 60 per 60 s slice (no /b traffic then)
    assert ok[-1][0] == pytest.approx(30 / 30)  # current slice: 30 events over 30 elapsed s
    errors = series['http.requests{status="500"}']
    assert errors[5][0] == pytest.approx(2 / 60)


def test_avg_max_min_over_labels(client: TestClient) -> None:
    target = 'max(http.requests{route=~"/a|/b"})'
    series = by_target(
        frames(client, legacy_body([{"target": target, "refId": "A"}], NOW - 700, NOW - 540))
    )
    (values,) = series.values()
    assert [v for v, _ in values] == [60, 60, 60, 60]  # /a 200 beats /a 500 and /b everywhere
    target = 'min(http.requests{route="/a"})'
    (low,) = by_target(
        frames(client, legacy_body([{"target": target, "refId": "A"}], NOW - 700, NOW - 540))
    ).values()
    assert [v for v, _ in low] == [2, 2, 2, 2]
    target = 'avg(http.requests{route="/a"})'
    (mean,) = by_target(
        frames(client, legacy_body([{"target": target, "refId": "A"}], NOW - 700, NOW - 540))
    ).values()
    assert [v for v, _ in mean] == [31, 31, 31, 31]


def test_zeros_inside_retention_nulls_before(client: TestClient) -> None:
    # precision pinned to 60 s over 3 h: retention is 120 slices, so the first hour is null
    body = simpod_body(
        [{"refId": "A", "target": 'http.requests{route="/b"}', "payload": {"precision": "60"}}],
        NOW - 3 * HOUR,
        NOW,
    )
    (frame,) = frames(client, body)
    values = [v for v, _ in frame["datapoints"]]
    oldest = SLICE - 119 * 60
    first = (NOW - 3 * HOUR) // 60 * 60
    n_null = (oldest - first) // 60
    assert values[:n_null] == [None] * n_null
    assert values[n_null] == 0
    assert sum(v for v in values if v) == 5
    assert values.count(None) == n_null


def test_future_slices_are_null(client: TestClient) -> None:
    body = legacy_body([{"target": "db.queries", "refId": "A"}], NOW - 300, NOW + 300)
    (frame,) = frames(client, body)
    future = [v for v, t in frame["datapoints"] if t > NOW * MS]
    assert future and all(v is None for v in future)
    assert sum(v for v, _ in frame["datapoints"] if v) == 7


def test_histogram_quantiles(client: TestClient) -> None:
    body = legacy_body(
        [{"target": 'histogram_quantile(0.5, http.request.duration{route="/a"})', "refId": "A"}],
        NOW - HOUR,
        NOW - 120,
    )
    (frame,) = frames(client, body)
    assert frame["target"] == 'p50 http.request.duration.bucket{method="GET",route="/a"}'
    # per minute: 6 in (0, 0.1], 3 in (0.1, 0.5], 1 above: rank 5 of 10 -> 0.1 * 5/6
    assert frame["datapoints"][3][0] == pytest.approx(0.1 * 5 / 6, rel=1e-4)
    p99 = legacy_body(
        [{"target": "histogram_quantile(0.99, sum(http.request.duration))", "refId": "A"}],
        NOW - HOUR,
        NOW - 120,
    )
    (frame99,) = frames(client, p99)
    assert frame99["datapoints"][3][0] == 0.5  # rank 9.9 falls in +Inf: highest finite bound


def test_simpod_builder_payload(client: TestClient) -> None:
    body = simpod_body(
        [
            {
                "refId": "A",
                "target": "http.requests",
                "editorMode": "builder",
                "payload": {"function": "rate", "group_by": ["route"], "status": ["2.."],
                            "precision": "300"},
            },
            {"refId": "B", "target": "http.request.duration", "payload": {"function": "p95"}},
        ],
        NOW - HOUR,
        NOW,
    )  # fmt: skip
    result = frames(client, body)
    a = [f for f in result if f["refId"] == "A"]
    assert {f["target"] for f in a} == {'http.requests{route="/a"}', 'http.requests{route="/b"}'}
    stamps = [t for _, t in a[0]["datapoints"]]
    assert all(t % (300 * MS) == 0 for t in stamps)
    b = [f for f in result if f["refId"] == "B"]
    assert len(b) == 1 and b[0]["target"].startswith("p95 ")


def test_payload_shapes_from_every_plugin_version(client: TestClient) -> None:
    payloads: list[object] = [{}, "", None, "not json"]
    for payload in payloads:
        target: dict[str, Any] = {"refId": "A", "target": "db.queries"}
        if payload is not None:
            target["payload"] = payload
        assert frames(client, simpod_body([target], NOW - HOUR, NOW))
    old = {"refId": "A", "target": "db.queries", "data": {"precision": "3600"}}
    (frame,) = frames(client, simpod_body([old], NOW - HOUR, NOW))
    assert frame["datapoints"][-1][1] % (3600 * MS) == 0


def test_adhoc_filters_from_both_fields(client: TestClient) -> None:
    filters = [{"key": "route", "operator": "=", "value": "/b", "condition": ""}]
    scenes = simpod_body(
        [{"refId": "A", "target": "http.requests"}], NOW - HOUR, NOW, filters=filters
    )
    assert set(by_target(frames(client, scenes))) == {
        'http.requests{method="POST",route="/b",status="200"}'
    }
    legacy = legacy_body(
        [{"target": "http.requests", "refId": "A"}], NOW - HOUR, NOW,
        adhocFilters=[{"key": "status", "operator": "!=", "value": "200"}],
    )  # fmt: skip
    assert set(by_target(frames(client, legacy))) == {
        'http.requests{method="GET",route="/a",status="500"}'
    }
    multi = simpod_body(
        [{"refId": "A", "target": "http.requests"}], NOW - HOUR, NOW,
        filters=[{"key": "route", "operator": "=|", "values": ["/a", "/b"]},
                 {"key": "status", "operator": ">", "value": "299"}],
    )  # fmt: skip
    assert set(by_target(frames(client, multi))) == {
        'http.requests{method="GET",route="/a",status="500"}'
    }


def test_template_variables_arrive_regex_escaped(client: TestClient) -> None:
    target = r'sum(http\.requests{route=~"(\/a|\/b)",status="200"})'
    (frame,) = frames(client, legacy_body([{"target": target, "refId": "A"}], NOW - HOUR, NOW))
    assert sum(v for v, _ in frame["datapoints"] if v) == HOUR + 5
    glob = "{http.requests,db.queries}"
    assert len(frames(client, legacy_body([{"target": glob, "refId": "A"}], NOW - HOUR, NOW))) == 4


def test_table_format_has_labels_total_and_last(client: TestClient) -> None:
    body = legacy_body(
        [{"target": 'http.requests{route="/a"}', "refId": "T", "type": "table"}], NOW - HOUR, NOW
    )
    (table,) = frames(client, body)
    assert table["type"] == "table" and table["refId"] == "T"
    columns = [c["text"] for c in table["columns"]]
    assert columns == ["series", "method", "route", "status", "total", "last"]
    rows = {row[3]: row for row in table["rows"]}
    assert rows["200"][4] == HOUR and rows["200"][5] == 30
    assert rows["500"][4] == 120


def test_unknown_metric_is_an_empty_answer_not_an_error(client: TestClient) -> None:
    body = legacy_body(
        [{"target": "never.incremented", "refId": "A"}, {"target": "db.queries", "refId": "B"}],
        NOW - HOUR,
        NOW,
    )
    result = frames(client, body)
    assert [f["refId"] for f in result] == ["B"]


def test_search_lists_metrics_and_histograms(client: TestClient) -> None:
    names = client.post("/search", json={"target": ""}).json()
    assert names == [
        "db.queries",
        "http.request.duration",
        "http.request.duration.bucket",
        "http.requests",
    ]
    assert client.post("/search", json={"target": "http\\.requests"}).json() == ["http.requests"]
    assert client.post("/search", json={"target": "DURATION"}).json() == [
        "http.request.duration", "http.request.duration.bucket",
    ]  # fmt: skip
    assert client.post("/search", json={"target": "label_values(http.requests, route)"}).json() == [
        "/a",
        "/b",
    ]
    assert client.post("/search", json={}).status_code == 200


def test_metrics_and_payload_options_for_the_builder(client: TestClient) -> None:
    metrics = client.post("/metrics", json={}).json()
    assert [m["value"] for m in metrics][:2] == ["db.queries", "http.request.duration"]
    duration = next(m for m in metrics if m["value"] == "http.request.duration")
    function = next(p for p in duration["payloads"] if p["name"] == "function")
    assert [o["value"] for o in function["options"]] == [
        "count",
        "rate",
        "p50",
        "p90",
        "p95",
        "p99",
    ]
    detailed = client.post("/metrics", json={"metric": "http.requests", "payload": {}}).json()
    requests = next(m for m in detailed if m["value"] == "http.requests")
    names = [p["name"] for p in requests["payloads"]]
    assert names == ["function", "group_by", "precision", "method", "route", "status"]
    route = next(p for p in requests["payloads"] if p["name"] == "route")
    assert route["options"] == [{"label": "/a", "value": "\\/a"}, {"label": "/b", "value": "\\/b"}]
    options = client.post(
        "/metric-payload-options", json={"metric": "http.requests", "payload": {}, "name": "status"}
    ).json()
    assert options == [{"label": "200", "value": "200"}, {"label": "500", "value": "500"}]
    group = client.post(
        "/metric-payload-options", json={"metric": "http.requests", "name": "group_by"}
    ).json()
    assert [o["value"] for o in group] == ["method", "route", "status"]


def test_variables(client: TestClient) -> None:
    def values(target: str) -> list[str]:
        response = client.post("/variable", json={"payload": {"target": target}, "range": {}})
        assert response.status_code == 200, response.text
        items = response.json()
        assert all(i["__text"] == i["__value"] for i in items)
        return [i["__value"] for i in items]

    assert values("label_values(route)") == ["/a", "/b"]
    assert values('label_values(http.requests{status="500"}, route)') == ["/a"]
    assert values("label_names(http.requests)") == ["method", "route", "status"]
    assert values("metrics(http\\..*)") == [
        "http.request.duration",
        "http.request.duration.bucket",
        "http.requests",
    ]
    assert values("db") == ["db.queries"]


def test_tag_keys_and_values_for_adhoc_filters(client: TestClient) -> None:
    for body in ({}, {"filters": [], "timeRange": {"from": "now-1h", "to": "now"}}):
        keys = client.post("/tag-keys", json=body).json()
        assert {"type": "string", "text": "route"} in keys
        assert {"type": "string", "text": "le"} not in keys
    assert client.post("/tag-values", json={"key": "operation"}).json() == [{"text": "SELECT"}]
    assert client.post("/tag-values", json={"key": "method", "filters": []}).json() == [
        {"text": "GET"}, {"text": "POST"},
    ]  # fmt: skip


def test_legacy_annotations(client: TestClient) -> None:
    body: dict[str, Any] = {
        "range": {"from": "2023-11-15T00:00:00.000Z", "to": "2023-11-16T00:00:00.000Z",
                  "raw": {"from": "now-1h", "to": "now"}},
        "rangeRaw": {"from": "now-1h", "to": "now"},
        "annotation": {"name": "Deploys", "datasource": {"type": "grafana-simple-json-datasource",
                       "uid": "P2"}, "enable": True, "iconColor": "red", "query": "#deploy"},
    }  # fmt: skip
    result = client.post("/annotations", json=body).json()
    assert len(result) == 1
    (item,) = result
    assert item["time"] == (NOW - 1800) * MS and item["title"] == "deploy v1.2"
    assert item["tags"] == ["deploy"] and item["annotation"]["name"] == "Deploys"
    body["annotation"]["query"] = ""
    assert len(client.post("/annotations", json=body).json()) == 2


def test_simpod_annotations_arrive_at_query_as_a_table(client: TestClient) -> None:
    body = simpod_body([{"refId": "Anno", "target": "deploy"}], NOW - HOUR, NOW)
    del body["rangeRaw"]
    body["scopedVars"]["__annotation"] = {"value": {"name": "deploys"}}
    (table,) = frames(client, body)
    assert [c["text"] for c in table["columns"]] == ["time", "timeEnd", "title", "text", "tags"]
    assert table["columns"][0]["type"] == "time"
    assert table["rows"] == [
        [(NOW - 1800) * MS, (NOW - 1800) * MS, "deploy v1.2", "deployed v1.2", "deploy"]
    ]


def test_openapi_describes_every_endpoint(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    assert document["openapi"].startswith("3.")
    assert set(document["paths"]) == {
        "/", "/readyz", "/livez", "/query", "/search", "/metrics", "/metric-payload-options",
        "/variable", "/tag-keys", "/tag-values", "/annotations",
        "/api/v1/query", "/api/v1/query_range", "/api/v1/labels", "/api/v1/label/{name}/values",
        "/api/v1/series", "/api/v1/metadata", "/api/v1/status/buildinfo", "/api/v1/rules",
    }  # fmt: skip


def test_ratios_and_scaling(client: TestClient) -> None:
    target = 'sum(rate(http.requests{status=~"5.."})) / sum(rate(http.requests)) * 100'
    (frame,) = frames(client, legacy_body([{"target": target, "refId": "A"}], NOW - 900, NOW - 700))
    # per full minute on /a: 2 errors among 62 requests (/b adds 5 requests in one minute)
    values = [v for v, _ in frame["datapoints"]]
    assert values[0] == pytest.approx(2 / 62 * 100)
    by_status = legacy_body(
        [{"target": "sum by (status) (http.requests) / sum by (status) (http.requests)",
          "refId": "A"}], NOW - 900, NOW - 700,
    )  # fmt: skip
    assert {f["target"]: f["datapoints"][0][0] for f in frames(client, by_status)} == {
        'http.requests{status="200"}': 1,
        'http.requests{status="500"}': 1,
    }
    zero = legacy_body([{"target": "db.queries / 0", "refId": "A"}], NOW - 300, NOW)
    assert all(v is None for v, _ in frames(client, zero)[0]["datapoints"])
