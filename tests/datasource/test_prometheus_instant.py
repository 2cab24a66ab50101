"""An instant selector at now sees every series with counts in retention, as a Prometheus
counter stays exposed while it is quiet, its value the running total of what is retained."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from slicecount.cleaner import Cleaner
from slicecount.config import Settings
from slicecount.datasource.app import create_app
from slicecount.promql.parser import parse
from slicecount.promql.values import CLOCK_SKEW
from slicecount.query.execute import reading_now
from slicecount.query.planning import Query
from slicecount.store import Store
from tests.datasource.conftest import NOW

WRITTEN = {  # route: (seconds before now, count): quiet for a second to two days
    "/now": (1, 2),
    "/minutes": (180, 3),
    "/hour": (3000, 1),
    "/days": (2 * 86400, 4),
}


@pytest.fixture(params=["book", "blocks"])
def quiet(request: pytest.FixtureRequest, settings: Settings) -> Iterator[TestClient]:
    laid = settings.with_changes(layout=request.param)
    with Store(laid, clock=lambda: NOW) as store:
        store.apply(
            {f'x{{route="{route}"}}': {NOW - ago: n} for route, (ago, n) in WRITTEN.items()}
        )
        # the cleaner at now, as in production: series gone from the fine precisions'
        # registries (the book's), slices sealed into blocks (the blocks layout's)
        Cleaner(store, clock=lambda: NOW).run_once()
    with TestClient(create_app(laid, clock=lambda: NOW)) as client:
        yield client


def instant(client: TestClient, query: str) -> dict[str, Any]:
    response = client.post("/api/v1/query", data={"query": query, "time": str(NOW)})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_count_sees_every_series_in_retention(quiet: TestClient) -> None:
    body = instant(quiet, "count(x_total)")
    assert body["data"]["result"] == [{"metric": {}, "value": [NOW, str(len(WRITTEN))]}]
    assert body["infos"][0].startswith("answered from the slices of precision 86400 s")


def test_each_series_is_its_running_total(quiet: TestClient) -> None:
    result = instant(quiet, "x_total")["data"]["result"]
    got = {r["metric"]["route"]: r["value"] for r in result}
    assert got == {route: [NOW, str(n)] for route, (_, n) in WRITTEN.items()}
    assert all(r["metric"]["__name__"] == "x_total" for r in result)
    by_total = instant(quiet, "topk(1, x_total)")["data"]["result"]
    assert [r["metric"]["route"] for r in by_total] == ["/days"]
    assert instant(quiet, "sum(x_total)")["data"]["result"][0]["value"] == [NOW, "10"]


def test_a_window_still_reads_the_finest_covering_precision(quiet: TestClient) -> None:
    body = instant(quiet, "sum(increase(x_total[1m]))")
    assert body["data"]["result"] == [{"metric": {}, "value": [NOW, "2"]}]
    assert body["infos"][0].startswith("answered from the slices of precision 1 s")


def test_a_time_just_past_the_clock_reads_what_is_counted_so_far(quiet: TestClient) -> None:
    """Grafana sends its own now: a clock a little ahead of the datasource's must not blank a
    panel. A time up to CLOCK_SKEW past the clock reads the slices counted so far (those after
    now hold nothing yet), as Prometheus answers from the samples it has; past that, nothing
    is known of the window."""

    def at(t: float, query: str) -> list[Any]:
        response = quiet.post("/api/v1/query", data={"query": query, "time": str(t)})
        assert response.status_code == 200, response.text
        return [r["value"] for r in response.json()["data"]["result"]]

    for ahead in (0.5, 1, CLOCK_SKEW):
        t = NOW + ahead
        assert at(t, "sum(increase(x_total[1m]))") == [[t, "2"]], ahead
        assert at(t, 'x_total{route="/now"}') == [[t, "2"]], ahead
        assert at(t, "count(x_total)") == [[t, str(len(WRITTEN))]], ahead
    beyond = NOW + CLOCK_SKEW + 60
    assert at(beyond, "sum(increase(x_total[1m]))") == []


def test_only_the_prometheus_surface_moves_now_to_a_time_ahead() -> None:
    """``reading_now``: a Prometheus query's time up to CLOCK_SKEW ahead becomes the now it is
    planned at; a simPod target's grid (its points dated by their slices' ends, after now)
    keeps the clock's, which its last point's elapsed rate divides by."""
    node = parse("x_total")
    at = NOW + 3
    assert reading_now(NOW, [Query(node, (NOW - 60, at), 60.0)]) == at
    assert reading_now(NOW, [Query(node, (at + CLOCK_SKEW,), None)]) == NOW
    assert reading_now(NOW, [Query(node, (NOW - 60, at), 60.0, partial=True)]) == NOW
    assert reading_now(NOW, [Query(node, (NOW - 5,), None)]) == NOW
