"""``/api/v1/query_exemplars`` as Grafana's Prometheus datasource calls it: the exemplars of
the series a query's selectors select, in Prometheus's shape, on one server, a Cluster and
Sentinel alike."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from slicecount.config import Settings
from slicecount.datasource.app import create_app
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from tests.datasource.test_prometheus_api import SHAPES, call, failed, ok

pytestmark = pytest.mark.topologies

T0 = 1_700_006_400
HISTOGRAM = "http_request_duration_seconds_bucket"
P99 = f"histogram_quantile(0.99, sum by (le) (rate({HISTOGRAM}[5m])))"
# (route, value, seconds after T0, n): the exemplars written
OBSERVED = [
    ("/a", 0.003, 10.5, 1),
    ("/a", 0.004, 50.25, 2),  # the same bucket and minute: the last one stays
    ("/a", 0.2, 70.125, 3),
    ("/b", 0.02, 20.0, 4),
    ("/b", 7.0, 130.0, 5),
]


def ids(n: int) -> dict[str, str]:
    return {"trace_id": f"{n:032x}", "span_id": f"{n:016x}"}


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with Store(settings) as store:
        recorder = Recorder(store, flush_interval=3600, clock=lambda: T0 + 600)
        for route, value, after, n in OBSERVED:
            labels = {"method": "GET", "route": route}
            recorder.observe(
                "http.request.duration", value, labels, exemplar=ids(n), now=T0 + after
            )
        recorder.observe("queue.wait", 1.5, {"queue": "mail"}, exemplar={"trace_id": "q"}, now=T0)
        recorder.add("http.requests", 1, {"route": "/a"}, now=T0)
        assert recorder.flush()
        recorder.close()
    with TestClient(create_app(settings, clock=lambda: T0 + 600)) as client:
        yield client


def exemplar(n: int, value: str, at: float) -> dict[str, Any]:
    return {"labels": ids(n), "value": value, "timestamp": at}


def series(route: str, le: str, name: str = HISTOGRAM) -> dict[str, str]:
    return {"__name__": name, "le": le, "method": "GET", "route": route}


EVERY = [  # sorted by labels as Prometheus sorts them: by name, then value, as text
    {"seriesLabels": series("/a", "0.005"), "exemplars": [exemplar(2, "0.004", T0 + 50.25)]},
    {"seriesLabels": series("/b", "0.025"), "exemplars": [exemplar(4, "0.02", T0 + 20)]},
    {"seriesLabels": series("/a", "0.25"), "exemplars": [exemplar(3, "0.2", T0 + 70.125)]},
    {"seriesLabels": series("/b", "10"), "exemplars": [exemplar(5, "7", T0 + 130)]},
]


Params = list[tuple[str, str | int | float | bool | None]]


def asked(query: str, start: float = T0, end: float = T0 + 600) -> Params:
    return [("query", query), ("start", str(start)), ("end", str(end))]


@pytest.mark.parametrize("shape", SHAPES)
def test_the_selectors_of_a_latency_panel_get_their_buckets_exemplars(
    client: TestClient, shape: str
) -> None:
    params = [("query", P99), ("start", str(T0)), ("end", str(T0 + 600))]
    body = ok(call(client, shape, "/api/v1/query_exemplars", params))
    assert body == {"status": "success", "data": EVERY}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (f'{HISTOGRAM}{{route="/b"}}', [EVERY[1], EVERY[3]]),
        (f'rate({HISTOGRAM}{{le="0.25"}}[1m])', [EVERY[2]]),
        ('{__name__=~"http_request_duration_seconds_.+",le=~"0.0.+"}', EVERY[:2]),
        (f'{HISTOGRAM}{{route="/a"}} / on(le) {HISTOGRAM}{{route="/b",le="10"}}',
         [EVERY[0], EVERY[2], EVERY[3]]),
        ("http_request_duration_seconds_count", []),  # counts and sums have none
        ("http_request_duration_seconds_sum", []),
        ("http_requests_total", []),
        ("no_such_metric", []),
        ("1 + 1", None),  # no selector: Prometheus answers null
    ],
)  # fmt: skip
def test_what_each_query_selects(
    client: TestClient, query: str, expected: list[dict[str, Any]] | None
) -> None:
    assert ok(client.get("/api/v1/query_exemplars", params=asked(query)))["data"] == expected


def test_the_range_and_an_app_histogram(client: TestClient) -> None:
    inside = ok(client.get("/api/v1/query_exemplars", params=asked(HISTOGRAM, T0 + 60, T0 + 71)))
    assert inside["data"] == [EVERY[2]]
    rfc: Params = [("query", HISTOGRAM), ("start", "2023-11-15T00:01:00Z"),
                   ("end", "2023-11-15T00:01:11.000Z")]  # fmt: skip
    assert ok(client.get("/api/v1/query_exemplars", params=rfc))["data"] == [EVERY[2]]
    everything = ok(client.get("/api/v1/query_exemplars", params=[("query", HISTOGRAM)]))
    assert everything["data"] == EVERY  # no start nor end: all of them
    queue = ok(client.get("/api/v1/query_exemplars", params=asked("queue_wait_seconds_bucket")))
    assert queue["data"] == [
        {"seriesLabels": {"__name__": "queue_wait_seconds_bucket", "le": "2.5", "queue": "mail"},
         "exemplars": [{"labels": {"trace_id": "q"}, "value": "1.5", "timestamp": T0}]}
    ]  # fmt: skip


def test_the_deprecated_name_answers_when_named(client: TestClient) -> None:
    old = "http_request_duration_bucket"
    data = ok(client.get("/api/v1/query_exemplars", params=asked(old)))["data"]
    assert [item["seriesLabels"]["__name__"] for item in data] == [old] * 4


def test_grafanas_probe_in_milliseconds_is_answered(client: TestClient) -> None:
    probe: Params = [("query", "test"), ("start", "1700000000000"), ("end", "1700001800000")]
    assert ok(client.get("/api/v1/query_exemplars", params=probe))["data"] == []


@pytest.mark.parametrize(
    "params",
    [
        asked(HISTOGRAM, T0 + 10, T0),
        asked("sum(", T0, T0 + 1),
        [("query", HISTOGRAM), ("start", "yesterday")],
        [("start", str(T0))],  # no query at all
    ],
)
def test_bad_requests_are_bad_data(client: TestClient, params: Params) -> None:
    failed(client.get("/api/v1/query_exemplars", params=params), 400, "bad_data")
