"""unique(...) through the real datasource app: distinct counts per point, unions for sum and
for points wider than a slice, refusals, and discovery. Data from Store.add_unique at times
close to now (the keys expire with real time), so the truth is known exactly."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from slicecount.config import Settings
from slicecount.datasource.app import create_app
from slicecount.store import Store
from tests.datasource.conftest import SMALL_LIMITS, simpod_body
from tests.unique_data import current

NOW = current(3600) + 1830  # 30 min 30 s into this hour
MINUTE = NOW // 60 * 60  # the current minute
FIRST = MINUTE - 3600  # the hour of data ends with the current minute
MS = 1000

Truth = dict[tuple[str, int], set[str]]


def visitors(route: str, start: int) -> set[str]:
    """Who visited ``route`` in the minute at ``start``: overlapping between minutes, and
    six of /b's eight are on /a in the same minute."""
    m = (start - FIRST) // 60
    if route == "/a":
        return {f"u{(m * 3 + i) % 50}" for i in range(10)}
    return {f"u{(m * 3 + 4 + i) % 50}" for i in range(8)}


@pytest.fixture
def uclient(settings: Settings) -> Iterator[TestClient]:
    with Store(settings, clock=lambda: NOW) as store:
        for start in range(FIRST, MINUTE + 1, 60):
            for route in ("/a", "/b"):
                chosen = visitors(route, start)
                store.add_unique("visitors", chosen, {"route": route}, exact=True, now=start + 5)
        # 3 routes x 3 minutes x 2 000 values from a pool of 6 000: unions by HLL
        for i, route in enumerate(("/x", "/y", "/z")):
            for m in range(3):
                chosen = {f"k{(i * 1500 + m * 700 + j) % 6000}" for j in range(2000)}
                store.add_unique("keys", chosen, {"route": route}, now=MINUTE - 60 * m + 1)
        store.incr("http.requests", 3, {"route": "/a"}, now=NOW)
    app = create_app(settings, limits=SMALL_LIMITS, clock=lambda: NOW)
    with TestClient(app) as client:
        yield client


def query(client: TestClient, target: str, interval_s: int = 60, **payload: Any) -> Any:
    body = simpod_body(
        [{"refId": "A", "target": target, "payload": payload}],
        FIRST,
        NOW,
        intervalMs=interval_s * MS,
    )
    response = client.post("/query", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def refused(client: TestClient, target: str, **payload: Any) -> str:
    body = simpod_body([{"refId": "A", "target": target, "payload": payload}], FIRST, NOW)
    response = client.post("/query", json=body)
    assert response.status_code == 400, response.text
    message: str = response.json()["message"]
    return message


def points(frame: dict[str, Any]) -> dict[int, Any]:
    return {t // MS: v for v, t in frame["datapoints"]}


def near(got: float, true: float) -> bool:
    return abs(got - true) <= max(1.0, 0.02 * true)


@pytest.mark.topologies
def test_unique_counts_each_series_exactly_per_minute(uclient: TestClient) -> None:
    frames = query(uclient, 'unique(visitors{route=~"/a|/b"})')
    assert [f["target"] for f in frames] == ['visitors{route="/a"}', 'visitors{route="/b"}']
    for frame, route in zip(frames, ("/a", "/b"), strict=True):
        got = points(frame)
        assert set(got) == set(range(FIRST, MINUTE + 1, 60))
        assert got == {s: len(visitors(route, s)) for s in got}  # exact mode: exact


@pytest.mark.topologies
def test_sum_is_a_union_not_a_sum(uclient: TestClient) -> None:
    (frame,) = query(uclient, "sum(unique(visitors))")
    assert frame["target"] == "visitors"
    for start, value in points(frame).items():
        union = visitors("/a", start) | visitors("/b", start)
        assert near(value, len(union)), (start, value, len(union))
        assert value < len(visitors("/a", start)) + len(visitors("/b", start))
    by_route = query(uclient, "sum by (route) (unique(visitors))")
    assert [points(f) for f in by_route] == [points(f) for f in query(uclient, "unique(visitors)")]


@pytest.mark.topologies
def test_a_step_wider_than_the_slices_unions_them(uclient: TestClient) -> None:
    (a,) = query(uclient, 'unique(visitors{route="/a"})', interval_s=120)
    got = points(a)
    assert all(s % 120 == 0 for s in got) and len(got) == len(range(FIRST // 120, NOW // 120 + 1))
    for start, value in got.items():
        seen = visitors("/a", start) if start >= FIRST else set()
        if start + 60 <= MINUTE:
            seen = seen | visitors("/a", start + 60)
        assert near(value, len(seen)), (start, value, len(seen))
    (both,) = query(uclient, "sum(unique(visitors))", interval_s=600)
    for start, value in points(both).items():
        covered = [s for s in range(start, start + 600, 60) if FIRST <= s <= MINUTE]
        union = set().union(*(visitors(r, s) for r in ("/a", "/b") for s in covered))
        assert near(value, len(union))


@pytest.mark.topologies
def test_hll_unions_of_thousands_within_2_percent(uclient: TestClient) -> None:
    truth: Truth = {
        (route, MINUTE - 60 * m): {f"k{(i * 1500 + m * 700 + j) % 6000}" for j in range(2000)}
        for i, route in enumerate(("/x", "/y", "/z"))
        for m in range(3)
    }
    (frame,) = query(uclient, "sum(unique(keys))", interval_s=180)
    got = points(frame)
    start = MINUTE // 180 * 180
    covered = [s for s in range(start, start + 180, 60) if s >= MINUTE - 120]
    union = set().union(*(v for (_, s), v in truth.items() if s in covered))
    assert abs(got[start] - len(union)) <= 0.02 * len(union)
    (x,) = query(uclient, 'unique(keys{route="/x"})')
    assert abs(points(x)[MINUTE] - 2000) <= 40


def test_statistics_of_counts_are_fine_other_combinations_refused(uclient: TestClient) -> None:
    (top,) = query(uclient, "max(unique(visitors))")
    assert points(top)[MINUTE] == max(len(visitors(r, MINUTE)) for r in ("/a", "/b"))
    (low,) = query(uclient, "min(sum by (route) (unique(visitors))) * 2")
    assert points(low)[MINUTE] == 2 * min(len(visitors(r, MINUTE)) for r in ("/a", "/b"))
    (mean,) = query(uclient, "avg(unique(visitors))")
    assert points(mean)[MINUTE] == sum(len(visitors(r, MINUTE)) for r in ("/a", "/b")) / 2
    (routes,) = query(uclient, "count(unique(visitors))")
    assert points(routes)[MINUTE] == 2
    assert "union" in refused(uclient, "sum(max by (route) (unique(visitors)))")
    assert "rate() over unique series" in refused(uclient, "rate(unique(visitors))")
    assert "rate() over unique series" in refused(uclient, "unique(visitors)", function="rate")
    # one engine: unique series and counters in one target (their own target before)
    (mixed,) = query(uclient, "sum(unique(visitors)) / sum(http.requests)")
    assert mixed["target"] == "visitors"
    assert "takes a metric selector" in refused(uclient, "unique(sum(visitors))")
    assert "not 5 s" in refused(uclient, "unique(visitors)", precision="5")


def test_builder_payload_on_a_unique_entry(uclient: TestClient) -> None:
    frames = query(uclient, "unique(visitors)", group_by=["route"], route=["\\/b"], precision="300")
    assert [f["target"] for f in frames] == ['visitors{route="/b"}']
    got = points(frames[0])
    start = MINUTE // 300 * 300
    covered = [s for s in range(start, start + 300, 60) if s <= MINUTE]
    assert near(got[start], len(set().union(*(visitors("/b", s) for s in covered))))


def test_discovery_offers_unique_metrics(uclient: TestClient) -> None:
    listed = uclient.post("/metrics", json={}).json()
    assert [m["value"] for m in listed] == ["http.requests", "unique(keys)", "unique(visitors)"]
    detailed = uclient.post("/metrics", json={"metric": "unique(visitors)"}).json()
    entry = next(m for m in detailed if m["value"] == "unique(visitors)")
    by_name = {p["name"]: p for p in entry["payloads"]}
    assert by_name["function"]["options"] == [{"label": "distinct count", "value": "count"}]
    assert [o["value"] for o in by_name["precision"]["options"]] == [
        "auto", "60", "300", "3600", "18000", "86400",
    ]  # fmt: skip
    assert by_name["route"]["options"] == [
        {"label": "/a", "value": "\\/a"}, {"label": "/b", "value": "\\/b"},
    ]  # fmt: skip
    options = uclient.post(
        "/metric-payload-options", json={"metric": "unique(keys)", "name": "group_by"}
    ).json()
    assert options == [{"label": "route", "value": "route"}]
    assert uclient.post("/search", json={"target": "vis"}).json() == ["unique(visitors)"]

    def variable(target: str) -> list[str]:
        found = uclient.post("/variable", json={"payload": {"target": target}}).json()
        return [v["__value"] for v in found]

    assert variable('label_values(unique(visitors{route!="/a"}), route)') == ["/b"]
    assert variable("label_names(unique(keys))") == ["route"]
    assert {"type": "string", "text": "route"} in uclient.post("/tag-keys", json={}).json()
    values = uclient.post("/tag-values", json={"key": "route"}).json()
    assert [v["text"] for v in values] == ["/a", "/b", "/x", "/y", "/z"]
