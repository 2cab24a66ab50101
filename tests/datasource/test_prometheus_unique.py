"""Unique series through the Prometheus API against known values: each point the distinct
count of its slice (within 2 % of the truth by HyperLogLog, exact in exact mode), ``sum`` the
union of the series (not the sum of their counts), a step coarser than the precision the union
of the slices it covers; uses that would add distinct counts refused with a 400. On one server
and a Redis Cluster (where the union of series spans shards)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from slicecount.config import DEFAULT_PRECISIONS, Settings
from slicecount.datasource.app import create_app
from slicecount.store import Store
from tests.conftest import TOPOLOGIES, flushed_url

NOW = int(time.time()) // 60 * 60 - 30  # 30 s into a minute, near now: the keys expire
MINUTES = 120  # the retention at 60 s: 120 slices
FIRST = NOW - 30 - MINUTES * 60  # start of the oldest minute written
ROUTES = ("/a", "/b")
PLANS = ("free", "paid")
PAGES = ("home", "docs")

Known = dict[tuple[str, str], dict[int, set[str]]]  # labels -> minute start -> values


def _users(m: int, route: str, plan: str) -> set[str]:
    """Sliding ranges of ids: consecutive minutes, routes and plans share many values."""
    base = 100 * m + (200 if route == "/b" else 0) + (150 if plan == "paid" else 0)
    return {f"user-{i}" for i in range(base, base + 400 + 5 * (m % 5))}


def _visitors(m: int, page: str) -> set[str]:
    offset = 7 if page == "docs" else 0
    return {f"v{(3 * m + offset + j) % 40}" for j in range(4 + m % 6)}


@pytest.fixture(scope="module")
def known() -> tuple[Known, Known]:
    starts = [FIRST + 60 * m for m in range(MINUTES)]
    users = {
        (r, p): {s: _users(m, r, p) for m, s in enumerate(starts)} for r in ROUTES for p in PLANS
    }
    visitors = {(page, ""): {s: _visitors(m, page) for m, s in enumerate(starts)} for page in PAGES}
    return users, visitors


@pytest.fixture(
    scope="module", params=[t for t in TOPOLOGIES if "sentinel" not in str(t)], name="prom"
)
def prom_fixture(
    known: tuple[Known, Known], request: pytest.FixtureRequest
) -> Iterator[TestClient]:
    """The known values written once per topology (the tests only read)."""
    users, visitors = known
    url = flushed_url(request.param, request)  # the book's ladder (the steps the cases name):
    with Store(Settings(redis_url=url, precisions=DEFAULT_PRECISIONS)) as store:
        for (route, plan), slices in users.items():
            for start, values in slices.items():
                store.add_unique("api.users", values, {"route": route, "plan": plan}, now=start)
        for (page, _), slices in visitors.items():
            for start, values in slices.items():
                labels = {"page": page}
                store.add_unique("api.visitors", values, labels, exact=True, now=start)
        with TestClient(create_app(store.settings, clock=lambda: NOW)) as client:
            yield client


def union(slices: dict[int, set[str]], first: int, end: int) -> set[str]:
    """The values of the slices starting in ``[first, end)``."""
    out: set[str] = set()
    for start, values in slices.items():
        if first <= start < end:
            out |= values
    return out


def query_range(client: TestClient, text: str, start: int, end: int, step: int) -> Any:
    data = {"query": text, "start": str(start), "end": str(end), "step": str(step)}
    response = client.post("/api/v1/query_range", data=data)
    assert response.status_code == 200, response.text
    return response.json()


def lines(body: Any, *labels: str) -> dict[tuple[str, ...], dict[int, float]]:
    return {
        tuple(line["metric"].get(k, "") for k in labels): {t: float(v) for t, v in line["values"]}
        for line in body["data"]["result"]
    }


def close(got: float, truth: int) -> bool:
    return abs(got - truth) <= 0.02 * truth


def test_each_point_is_its_slice_count_within_2_percent(
    prom: TestClient, known: tuple[Known, Known]
) -> None:
    users, _ = known
    start, end = NOW - 30 - 50 * 60, NOW - 30
    body = query_range(prom, "api_users", start, end, 60)
    assert any("precision 60 s" in info for info in body["infos"])
    got = lines(body, "route", "plan")
    assert set(got) == set(users)
    for (route, plan), points in got.items():
        assert sorted(points) == list(range(start, end + 1, 60))
        for t, value in points.items():
            assert close(value, len(users[route, plan][t - 60])), (route, plan, t, value)


def test_exact_mode_is_exact(prom: TestClient, known: tuple[Known, Known]) -> None:
    _, visitors = known
    start, end = NOW - 30 - 50 * 60, NOW - 30
    got = lines(query_range(prom, "api_visitors", start, end, 60), "page")
    assert set(got) == {("home",), ("docs",)}
    for (page,), points in got.items():
        assert points == {t: len(visitors[(page, "")][t - 60]) for t in points}


@pytest.mark.parametrize(
    ("text", "by"),
    [
        ("sum(api_users)", ()),
        ("sum by (route) (api_users)", ("route",)),
        ("sum without (plan) (api_users)", ("route",)),
        ("sum by (plan) (api_users{route=~'/a|/b'})", ("plan",)),
    ],
)
def test_sum_is_the_union_not_the_sum(
    prom: TestClient, known: tuple[Known, Known], text: str, by: tuple[str, ...]
) -> None:
    users, _ = known
    start, end = NOW - 30 - 20 * 60, NOW - 30
    got = lines(query_range(prom, text, start, end, 60), *by)
    groups: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for route, plan in users:
        labels = {"route": route, "plan": plan}
        groups.setdefault(tuple(labels[k] for k in by), []).append((route, plan))
    assert set(got) == set(groups)
    for group, members in groups.items():
        for t, value in got[group].items():
            truth = len(set().union(*(users[m][t - 60] for m in members)))
            added = sum(len(users[m][t - 60]) for m in members)
            assert close(value, truth), (group, t, value, truth)
            assert added > 1.15 * truth and value < 0.9 * added  # not the sum of the counts


@pytest.mark.parametrize(("step", "precision"), [(120, 60), (600, 300), (900, 300), (3600, 3600)])
def test_a_coarse_step_unions_the_slices_it_covers(
    prom: TestClient, known: tuple[Known, Known], step: int, precision: int
) -> None:
    users, _ = known
    end = (NOW - 30) // step * step
    start = end - 3 * step
    for text, members in (
        ('api_users{route="/a",plan="free"}', [("/a", "free")]),
        ("sum(api_users)", list(users)),
    ):
        body = query_range(prom, text, start, end, step)
        assert any(f"precision {precision} s" in info for info in body["infos"]), body["infos"]
        ((points),) = lines(body).values()
        assert sorted(points) == list(range(start, end + 1, step))
        for t, value in points.items():
            truth = set().union(*(union(users[m], t - step, t) for m in members))
            assert close(value, len(truth)), (text, t, value, len(truth))
            if t - step >= FIRST:  # the union is wider than any one minute of it
                minutes = range(t - step, t, 60)
                assert len(truth) > 1.1 * max(len(users[m][s]) for m in members for s in minutes)


def test_instant_query_reads_the_slice_holding_t(
    prom: TestClient, known: tuple[Known, Known]
) -> None:
    users, _ = known
    t = NOW - 30 - 5 * 60
    response = prom.post("/api/v1/query", data={"query": "api_users", "time": str(t)})
    assert response.status_code == 200, response.text
    result = response.json()["data"]["result"]
    assert len(result) == 4
    for line in result:
        labels = (line["metric"]["route"], line["metric"]["plan"])
        assert line["metric"]["__name__"] == "api_users"
        assert line["value"][0] == t
        assert close(float(line["value"][1]), len(users[labels][t - 60]))


def _slice(users: Known, t: int) -> list[set[str]]:
    return [slices[t - 60] for slices in users.values()]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("count(api_users)", lambda users, t: 4),
        ("max(api_users)", lambda users, t: max(map(len, _slice(users, t)))),
        ("topk(1, api_users)", lambda users, t: max(map(len, _slice(users, t)))),
        ("api_users{route='/a',plan='free'} * 2", lambda u, t: 2 * len(u["/a", "free"][t - 60])),
        ("sum(count by (route) (api_users))", lambda users, t: 4),
        ("sum(api_users) / count(api_users)", lambda u, t: len(set().union(*_slice(u, t))) / 4),
    ],
)
def test_numbers_made_of_distinct_counts(
    prom: TestClient, known: tuple[Known, Known], text: str, expected: Any
) -> None:
    users, _ = known
    t = NOW - 30 - 10 * 60
    response = prom.post("/api/v1/query", data={"query": text, "time": str(t)})
    assert response.status_code == 200, response.text
    (line,) = response.json()["data"]["result"]
    truth = expected(users, t)
    assert abs(float(line["value"][1]) - truth) <= 0.02 * truth, (text, line, truth)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("rate(api_users[5m])", ["rate() over unique series api_users", "do not add up"]),
        ("increase(api_users[5m])", ["increase() over unique series api_users"]),
        ("sum_over_time(api_users[5m])", ["sum_over_time() over unique series"]),
        ('avg_over_time(api_users{route="/a"}[1h])', ["avg_over_time() over unique series"]),
        ("sum(api_users * 2)", ["sum over an expression of unique series (api_users)"]),
        ("sum(max by (route) (api_users))", ["sum over an expression of unique series"]),
        ("sum(sum by (route) (api_users))", ["counts a value seen in two series twice"]),
        ("1 + sum(-api_visitors)", ["(api_visitors)"]),
    ],
)
def test_adding_distinct_counts_is_refused(prom: TestClient, text: str, words: list[str]) -> None:
    for path, params in (
        ("/api/v1/query", {"time": str(NOW)}),
        ("/api/v1/query_range", {"start": str(NOW - 600), "end": str(NOW), "step": "60"}),
    ):
        response = prom.post(path, data={"query": text, **params})
        assert response.status_code == 400, response.text
        body = response.json()
        assert body["errorType"] == "bad_data"
        assert all(word in body["error"] for word in words), body["error"]
