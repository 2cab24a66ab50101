"""PromQL answers against the truth computed from known events: increase/rate over windows of
1, 5 and 60 slices at precisions 1, 5 and 60, sums by label, histogram_quantile against the
quantile of the raw observations' buckets, vector matching, offset and comparison filters; on
one server, a Redis Cluster and behind Sentinel."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from slicecount.config import DEFAULT_PRECISIONS, DEFAULT_RETENTION, Settings
from slicecount.core.histogram import DEFAULT_DURATION_BUCKETS, format_bound
from slicecount.datasource.app import create_app
from slicecount.store import Store
from tests.conftest import TOPOLOGIES, _name, flushed_url

T0 = 1_700_006_400  # a multiple of 86400
NOW = T0 + 3 * 3600 + 30  # 30 s into a minute
ROUTES = ("/a", "/b", "/c")
STATUSES = ("200", "500")
BOUNDS = (*DEFAULT_DURATION_BUCKETS, math.inf)

Events = dict[tuple[str, str], dict[int, int]]  # (route, status) -> second -> count


def _events(rng: random.Random) -> Events:
    """Three hours of requests: busier in the last ten minutes (every second), sparser before."""
    events: Events = {}
    for route in ROUTES:
        for status in STATUSES:
            heavy = 3 if status == "200" else 1
            per_second = {}
            for second in range(NOW - 3 * 3600, NOW + 1):
                recent = second > NOW - 700
                if recent or rng.random() < 0.2:
                    count = rng.randint(0, heavy * (2 if route == "/a" else 1))
                    if count:
                        per_second[second] = count
            events[(route, status)] = per_second
    return events


def _observations(rng: random.Random) -> dict[str, dict[int, list[float]]]:
    """Request durations per route, by second, for the last 40 minutes."""
    out: dict[str, dict[int, list[float]]] = {}
    for route in ROUTES:
        scale = {"/a": 0.05, "/b": 0.3, "/c": 1.5}[route]
        out[route] = {
            s: [rng.expovariate(1 / scale) for _ in range(rng.randint(0, 3))]
            for s in range(NOW - 2400, NOW + 1)
        }
    return out


@pytest.fixture(scope="module")
def known() -> tuple[Events, dict[str, dict[int, list[float]]]]:
    rng = random.Random(12)
    return _events(rng), _observations(rng)


SETUPS = [
    pytest.param(("standalone", "book"), id="standalone-book"),
    *(pytest.param((_name(t), "blocks"), marks=getattr(t, "marks", ()), id=f"{_name(t)}-blocks")
      for t in TOPOLOGIES),
]  # fmt: skip
"""Both layouts on one server; the default one (blocks) on every topology."""


@pytest.fixture(scope="module", params=SETUPS)
def prom(
    known: tuple[Events, dict[str, dict[int, list[float]]]], request: pytest.FixtureRequest
) -> Iterator[TestClient]:
    """The known data written once per topology and layout (the tests only read), with the
    book's ladder (the precisions the cases name)."""
    topology, layout = request.param
    settings = Settings(
        redis_url=flushed_url(topology, request),
        layout=layout,
        precisions=DEFAULT_PRECISIONS,
        retention=DEFAULT_RETENTION,
    )
    with Store(settings) as store:
        yield from _serve(store, known)


def _serve(
    store: Store, known: tuple[Events, dict[str, dict[int, list[float]]]]
) -> Iterator[TestClient]:
    events, observations = known
    batch: dict[str, dict[int, int]] = {}
    for (route, status), per_second in events.items():
        batch[f'http.requests{{method="GET",route="{route}",status="{status}"}}'] = per_second
    for route, by_second in observations.items():
        for second, values in by_second.items():
            for value in values:
                le = format_bound(next(b for b in BOUNDS if value <= b))
                series = f'http.request.duration.bucket{{le="{le}",route="{route}"}}'
                batch.setdefault(series, {}).setdefault(second, 0)
                batch[series][second] += 1
    store.apply(batch)
    with TestClient(create_app(store.settings, clock=lambda: NOW)) as client:
        yield client


def truth(per_second: dict[int, int], t: float, window: int, p: int) -> int:
    """Events of the d/p slices that end with the one holding t."""
    end = -int(-t // p) * p
    return sum(n for s, n in per_second.items() if end - window <= s < end)


def query_range(client: TestClient, query: str, start: int, end: int, step: int) -> Any:
    response = client.post(
        "/api/v1/query_range",
        data={"query": query, "start": str(start), "end": str(end), "step": str(step)},
    )
    assert response.status_code == 200, response.text
    return response.json()


def query(client: TestClient, text: str, t: float) -> Any:
    response = client.post("/api/v1/query", data={"query": text, "time": str(t)})
    assert response.status_code == 200, response.text
    return response.json()


def by_labels(body: Any, *labels: str) -> dict[tuple[str, ...], list[tuple[float, float]]]:
    return {
        tuple(line["metric"].get(k, "") for k in labels): [
            (t, float(v)) for t, v in line.get("values", [line.get("value")])
        ]
        for line in body["data"]["result"]
    }


CASES = [  # precision, step, end before NOW, span of the range: windows of 1, 5 and 60 slices
    (1, 1, 30, 20),
    (5, 5, 30, 240),
    (60, 60, 30, 1800),
]


@pytest.mark.parametrize(("precision", "step", "back", "span"), CASES)
@pytest.mark.parametrize("slices", [1, 5, 60])
@pytest.mark.parametrize("function", ["increase", "rate"])
def test_increase_and_rate_are_exact(
    prom: TestClient,
    known: tuple[Events, Any],
    precision: int,
    step: int,
    back: int,
    span: int,
    slices: int,
    function: str,
) -> None:
    events, _ = known
    window = slices * precision
    end = NOW - back
    start = end - span
    text = f"{function}(http_requests_total[{window}s])"
    body = query_range(prom, text, start, end, step)
    assert f"precision {precision} s" in body["infos"][0], body["infos"]
    got = by_labels(body, "route", "status")
    assert set(got) == set(events)
    for (route, status), samples in got.items():
        times = [t for t, _ in samples]
        assert times == list(range(start, end + 1, step))
        for t, value in samples:
            expected = truth(events[(route, status)], t, window, precision)
            if function == "rate":
                assert value == pytest.approx(expected / window, rel=1e-12)
            else:
                assert value == expected, (route, status, t)


def test_sum_by_label(prom: TestClient, known: tuple[Events, Any]) -> None:
    events, _ = known
    end = NOW - 30
    body = query_range(
        prom, "sum by (status) (increase(http_requests_total[5m]))", end - 1800, end, 60
    )
    got = by_labels(body, "status")
    assert set(got) == {("200",), ("500",)}
    for (status,), samples in got.items():
        for t, value in samples:
            expected = sum(truth(events[(r, status)], t, 300, 60) for r in ROUTES)
            assert value == expected


def test_at_now_the_current_slice_counts_as_it_stands(
    prom: TestClient, known: tuple[Events, Any]
) -> None:
    """At an unaligned now, the window is the d/p slices ending with the one holding now."""
    events, _ = known
    body = query(prom, "sum(increase(http_requests_total[5m]))", NOW)
    assert "precision 5 s" in body["infos"][0]
    (sample,) = by_labels(body)[()]
    expected = sum(truth(per_second, NOW, 300, 5) for per_second in events.values())
    assert sample == (NOW, expected)


def test_offset(prom: TestClient, known: tuple[Events, Any]) -> None:
    events, _ = known
    t = NOW - 30
    body = query(prom, 'increase(http_requests_total{route="/b"}[1m] offset 30m)', t)
    for (status,), [(_, value)] in by_labels(body, "status").items():
        assert value == truth(events[("/b", status)], t - 1800, 60, 60)


def test_error_ratio_with_vector_matching(prom: TestClient, known: tuple[Events, Any]) -> None:
    events, _ = known
    t = NOW - 30
    text = (
        'sum by (route) (increase(http_requests_total{status=~"5.."}[10m]))'
        " / on(route) sum by (route) (increase(http_requests_total[10m]))"
    )
    got = by_labels(query(prom, text, t), "route")
    assert set(got) == {(r,) for r in ROUTES}
    for (route,), [(_, value)] in got.items():
        errors = truth(events[(route, "500")], t, 600, 60)
        total = errors + truth(events[(route, "200")], t, 600, 60)
        assert value == pytest.approx(errors / total, rel=1e-12)


def test_group_left_share_of_each_status(prom: TestClient, known: tuple[Events, Any]) -> None:
    events, _ = known
    t = NOW - 30
    text = (
        "increase(http_requests_total[10m]) / ignoring(status) group_left"
        " sum without (status) (increase(http_requests_total[10m]))"
    )
    got = by_labels(query(prom, text, t), "route", "status")
    assert set(got) == set(events)
    for (route, status), [(_, value)] in got.items():
        mine = truth(events[(route, status)], t, 600, 60)
        total = sum(truth(events[(route, s)], t, 600, 60) for s in STATUSES)
        assert value == pytest.approx(mine / total, rel=1e-12)


def test_comparison_filters_and_bool(prom: TestClient, known: tuple[Events, Any]) -> None:
    events, _ = known
    t = NOW - 30
    counts = {k: truth(v, t, 60, 60) for k, v in events.items()}
    threshold = sorted(counts.values())[len(counts) // 2]
    kept = by_labels(
        query(prom, f"increase(http_requests_total[1m]) > {threshold}", t), "route", "status"
    )
    assert set(kept) == {k for k, n in counts.items() if n > threshold}
    for (route, status), [(_, value)] in kept.items():
        assert value == counts[(route, status)]  # a filter keeps the value
    flags = query(prom, f"increase(http_requests_total[1m]) > bool {threshold}", t)
    for line in flags["data"]["result"]:
        k = (line["metric"]["route"], line["metric"]["status"])
        assert "__name__" not in line["metric"]
        assert line["value"][1] == ("1" if counts[k] > threshold else "0")


def _prometheus_quantile(q: float, cumulative: list[tuple[float, float]]) -> float:
    """Prometheus' bucketQuantile, written again here from its documentation: linear inside the
    bucket holding rank q * total, 0 as the lower bound of the first, the highest finite bound
    when the rank falls in +Inf."""
    total = cumulative[-1][1]
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, count in cumulative:
        if count >= rank:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


@pytest.mark.parametrize("q", [0.5, 0.9, 0.95, 0.99])
def test_histogram_quantile_matches_the_raw_observations(
    prom: TestClient, known: tuple[Events, Any], q: float
) -> None:
    _, observations = known
    t = NOW - 30
    text = (
        f"histogram_quantile({q}, sum by (le, route) "
        "(increase(http_request_duration_seconds_bucket[10m])))"
    )
    got = by_labels(query(prom, text, t), "route")
    assert set(got) == {(r,) for r in ROUTES}
    for (route,), [(_, value)] in got.items():
        seen = [v for s, vs in observations[route].items() if t - 600 <= s < t for v in vs]
        cumulative = [(b, float(sum(1 for v in seen if v <= b))) for b in BOUNDS]
        assert value == pytest.approx(_prometheus_quantile(q, cumulative), rel=1e-9), route


def test_a_dashboard_at_a_15s_step_is_exact_where_it_is_evaluated_on_sums_of_slices(
    prom: TestClient, known: tuple[Events, Any]
) -> None:
    """Grafana's "last 10 minutes" (step 15 s, [1m] windows): the blocks layout reads 5 s
    slices and evaluates on their sums by three (``plan.grouped``), the book on 5 s ones."""
    events, observations = known
    end = NOW - 30
    start = end - 480
    body = query_range(prom, "sum by (route) (increase(http_requests_total[1m]))", start, end, 15)
    assert "precision 5 s" in body["infos"][0], body["infos"]
    got = by_labels(body, "route")
    assert set(got) == {(r,) for r in ROUTES}
    for (route,), samples in got.items():
        assert [t for t, _ in samples] == list(range(start, end + 1, 15))
        for t, value in samples:
            assert value == sum(truth(events[(route, s)], t, 60, 5) for s in STATUSES), t
    text = (
        "histogram_quantile(0.9, sum by (le, route) "
        "(rate(http_request_duration_seconds_bucket[1m])))"
    )
    for (route,), samples in by_labels(query_range(prom, text, start, end, 15), "route").items():
        for t, value in samples:
            seen = [v for s, vs in observations[route].items() if t - 60 <= s < t for v in vs]
            cumulative = [(b, float(sum(1 for v in seen if v <= b))) for b in BOUNDS]
            assert value == pytest.approx(_prometheus_quantile(0.9, cumulative), rel=1e-9)


def test_histogram_count_and_sum_parts(prom: TestClient, known: tuple[Events, Any]) -> None:
    _, observations = known
    t = NOW - 30
    text = "increase(http_request_duration_seconds_count[10m])"
    got = by_labels(query(prom, text, t), "route")
    for (route,), [(_, value)] in got.items():
        assert value == sum(len(vs) for s, vs in observations[route].items() if t - 600 <= s < t)
