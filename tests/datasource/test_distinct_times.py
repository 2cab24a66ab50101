"""A query is evaluated once per distinct reading of its times, and answers the same as when
it is evaluated at every time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.datasource.app import create_app
from slicecount.promql.parser import parse
from slicecount.promql.values import Grid, Series
from slicecount.query.distinct_times import collapse, expand
from slicecount.query.precision import evaluation_times
from slicecount.store import Store
from tests.datasource.conftest import HOUR, NOW, write_known_data

T0 = NOW // 60 * 60


def grid(times: list[float], p: int = 60, partial: bool = False) -> Grid:
    return Grid(tuple(times), p, T0 - 7200, T0 - 7200, T0 + 60, NOW, partial)


def test_times_reading_the_same_boundaries_are_evaluated_once() -> None:
    times = evaluation_times(T0 - 3600, T0, 15)  # 241 times over 1-minute slices
    collapsed = collapse(grid(times), parse("sum(rate(x[1m]))"))
    assert collapsed is not None
    on, where = collapsed
    assert len(on.times) == 61 and on.times[:3] == (T0 - 3600, T0 - 3585, T0 - 3525)
    assert where[:6] == [0, 1, 1, 1, 1, 2] and len(where) == 241
    # an offset that is not whole slices reads other boundaries: more readings
    shifted = collapse(grid(times), parse("x - x offset 30s"))
    assert shifted is not None and len(shifted[0].times) == 121
    assert expand([Series({}, [1.0, 2.0, 3.0])], [0, 0, 1, 2, 2])[0].values == [1, 1, 2, 3, 3]  # type: ignore[union-attr]
    assert expand([5.0, 6.0], [1, 0, 1]) == [6.0, 5.0, 6.0]


@pytest.mark.parametrize(
    ("query", "times", "partial"),
    [
        ("time() - 1", evaluation_times(T0 - 600, T0, 15), False),  # reads its times
        ("timestamp(x)", evaluation_times(T0 - 600, T0, 15), False),
        ("sum(x)", evaluation_times(T0 - 600, T0, 60), False),  # each time its own slice
        ("sum(x)", evaluation_times(T0 - 600, T0, 15), True),  # a simPod grid
        ("vector(1)", evaluation_times(T0 - 600, T0, 15), False),  # no selector
    ],
)
def test_what_is_evaluated_at_every_time(query: str, times: list[float], partial: bool) -> None:
    assert collapse(grid(times, partial=partial), parse(query)) is None


@pytest.fixture
def prom(settings: Settings, store: Store) -> Iterator[TestClient]:
    write_known_data(store)
    with TestClient(create_app(settings, limits=Limits(), clock=lambda: NOW)) as client:
        yield client


def values(client: TestClient, query: str, start: float, end: float, step: float) -> Any:
    form = {"query": query, "start": str(start), "end": str(end), "step": str(step)}
    response = client.post("/api/v1/query_range", data=form)
    assert response.status_code == 200, response.text
    result = response.json()["data"]["result"]
    unnamed = [({k: v for k, v in r["metric"].items() if k != "__name__"}, r) for r in result]
    return sorted((sorted(labels.items()), r["values"]) for labels, r in unnamed)


@pytest.mark.parametrize(
    "query",
    [
        "sum by (status) (rate(http_requests_total[1m]))",
        "histogram_quantile(0.9, sum by (le) (rate(http_request_duration_seconds_bucket[2m])))",
        "sum(increase(http_requests_total[5m] offset 90s)) / sum(http_requests_total)",
        "topk(1, http_requests_total offset 1m)",
    ],
)
def test_answers_are_those_of_every_time(prom: TestClient, query: str) -> None:
    """Each query beside itself plus ``0 * time()`` (evaluated at every time), over the last
    hour at 15 s steps and past now (times without samples)."""
    start, end = NOW - HOUR - 7, NOW + 45
    once = values(prom, query, start, end, 15)
    every = values(prom, f"({query}) + 0 * time()", start, end, 15)
    assert once and once == every
