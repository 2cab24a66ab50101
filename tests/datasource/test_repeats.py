"""Answers remembered with the counts they were computed from (``reads/repeats.py``), on a
real Redis through the Prometheus API: a query asked again is answered without computing
only from the very same counts, so a late write inside its range, or a cleaner's pass in
between, gives exactly what computing gives (the same app with nothing remembered, asked
in turn); the counts held stay within their bound."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from starlette.testclient import TestClient

from slicecount.cleaner.compaction import Compactor
from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.datasource.app import create_app
from slicecount.promql.engine import settled
from slicecount.promql.values import CLOCK_SKEW, Grid
from slicecount.query.catalogue import parse_promql
from slicecount.reads.reader import Reader
from slicecount.reads.repeats import Inputs, Repeats
from slicecount.store import Store

pytestmark = pytest.mark.layouts("book", "blocks")

NOW = 1_700_006_400 + 1800
STEP = 15
ROUTES = [f"/r{i}" for i in range(8)]
QUERIES = [
    "sum by (route) (rate(http_requests_total[1m]))",
    'sum(rate(http_requests_total{status=~"5.."}[1m])) / sum(rate(http_requests_total[1m]))',
    "histogram_quantile(0.9, sum by (le) (rate(http_request_duration_seconds_bucket[1m])))",
]


def series(route: str, status: str) -> str:
    return f'http.requests{{method="GET",route="{route}",status="{status}"}}'


def bucket(route: str, le: str) -> str:
    return f'http.request.duration.bucket{{le="{le}",method="GET",route="{route}"}}'


@pytest.fixture
def clock() -> list[float]:
    return [float(NOW)]


@pytest.fixture
def apps(settings: Settings, store: Store, clock: list[float]) -> Iterator[dict[str, Any]]:
    """The app that remembers answers and one that remembers none (bound of 1 byte)."""
    rng = random.Random(5)
    batch: dict[str, dict[int, int]] = {}
    for route in ROUTES:
        for status in ("200", "500"):
            batch[series(route, status)] = {
                t: rng.randint(1, 4) for t in range(NOW - 900, NOW) if rng.random() < 0.4
            }
        for le in ("0.1", "0.5", "+Inf"):
            batch[bucket(route, le)] = {t: rng.randint(1, 3) for t in range(NOW - 900, NOW, 7)}
    store.apply(batch)
    made = {
        "remembering": create_app(settings, limits=Limits(), clock=lambda: clock[0]),
        "computing": create_app(
            settings, limits=Limits(repeated_answer_bytes=1), clock=lambda: clock[0]
        ),
    }
    with TestClient(made["remembering"]) as remembering, TestClient(made["computing"]) as fresh:
        yield {"remembering": remembering, "computing": fresh, "apps": made}


def ask(client: TestClient, query: str, end: float) -> Any:
    end = end // STEP * STEP  # aligned to the step, as Grafana asks
    form = {"query": query, "start": str(end - 300), "end": str(end), "step": str(STEP)}
    response = client.post("/api/v1/query_range", data=form)
    assert response.status_code == 200, response.text
    return response.json()["data"]["result"]


def repeats(apps: dict[str, Any]) -> Any:
    reader: Reader = apps["apps"]["remembering"].state.datasource
    return reader.repeats


def both(apps: dict[str, Any], query: str, end: float) -> Any:
    answer = ask(apps["remembering"], query, end)
    assert answer == ask(apps["computing"], query, end), query
    assert answer  # every query matches series
    return answer


def test_a_query_asked_again_is_computed_once_until_its_counts_change(
    apps: dict[str, Any], store: Store, settings: Settings, clock: list[float]
) -> None:
    for query in QUERIES:
        both(apps, query, NOW)
    held = repeats(apps)
    assert held.hits == 0 and held.held > 0
    # a few seconds on, counts written after the range's end: the same answers, not computed
    clock[0] = NOW + 4
    store.apply({series(ROUTES[0], "200"): {NOW + 2: 9}, bucket(ROUTES[0], "0.1"): {NOW + 3: 1}})
    for query in QUERIES:
        both(apps, query, NOW)
    assert held.hits == len(QUERIES)
    # a late write inside the range: read, and the times whose windows reach it computed
    # from it; the times before it taken (NOW - 300 to NOW - 105 for the counters written
    # at NOW - 100, to NOW - 45 for the bucket written at NOW - 40)
    store.apply(
        {series(ROUTES[1], "500"): {NOW - 100: 5}, bucket(ROUTES[2], "+Inf"): {NOW - 40: 2}}
    )
    before, taken = held.hits, held.times_taken
    for query in QUERIES:
        both(apps, query, NOW)
    assert held.hits == before + len(QUERIES)
    assert held.times_taken == taken + 14 + 14 + 18
    before = held.hits
    if settings.layout == "blocks":  # a cleaner's pass: the same counts, from blocks now
        Compactor(store).run(NOW + 60)
        for query in QUERIES:
            both(apps, query, NOW)
        assert held.hits == before + len(QUERIES)


def test_an_offset_window_takes_the_times_whose_windows_end_before_a_late_write(
    apps: dict[str, Any], store: Store
) -> None:
    """A selector's offset moves the boundary each time reads: a late write at NOW - 100
    reaches the windows of the times from NOW - 40 on under ``offset 1m``, so 18 times are
    taken (NOW - 300 to NOW - 45), against 14 without it."""
    query = "sum by (route) (rate(http_requests_total[1m] offset 1m))"
    both(apps, query, NOW)
    held = repeats(apps)
    store.apply({series(ROUTES[1], "200"): {NOW - 100: 5}})
    both(apps, query, NOW)
    assert (held.hits, held.times_taken) == (1, 18)


def test_a_series_discovered_takes_the_answers_of_the_queries_that_read_it_only(
    apps: dict[str, Any], store: Store
) -> None:
    """Discovery asked again at every request: a series of another metric makes the
    catalogue, and every selector's list, anew; equal lists are the same series, so the
    answers are taken whole. A series the queries read is computed into them."""
    for app in apps["apps"].values():
        app.state.datasource.ttl = 0.0
    for query in QUERIES:
        both(apps, query, NOW)
    held = repeats(apps)
    store.apply({'jobs.done{queue="mail"}': {NOW - 10: 1}})
    for query in QUERIES:
        both(apps, query, NOW)
    assert held.hits == len(QUERIES)
    store.apply({series(ROUTES[0], "404"): {NOW - 10: 2}})  # read by the first two
    for query in QUERIES:
        both(apps, query, NOW)
    assert held.hits == len(QUERIES) + 1


def test_the_counts_held_stay_within_their_bound_and_every_answer_is_exact(
    settings: Settings, store: Store, clock: list[float]
) -> None:
    rng = random.Random(8)
    store.apply({series(r, "200"): {t: 1 for t in range(NOW - 900, NOW, 3)} for r in ROUTES})
    probe = create_app(settings, limits=Limits(), clock=lambda: clock[0])
    with TestClient(probe) as client:
        ask(client, "sum by (route) (rate(http_requests_total[60s]))", NOW)
    bound = int(3.5 * probe.state.datasource.repeats.held)  # about three queries' counts
    remembering = create_app(
        settings, limits=Limits(repeated_answer_bytes=bound), clock=lambda: clock[0]
    )
    computing = create_app(settings, limits=Limits(repeated_answer_bytes=1), clock=lambda: clock[0])
    held = remembering.state.datasource.repeats
    kept: set[int] = set()
    with TestClient(remembering) as a, TestClient(computing) as b:
        for _ in range(40):
            end = NOW - STEP * rng.randrange(3)
            query = f"sum by (route) (rate(http_requests_total[{rng.choice((30, 60))}s]))"
            if rng.random() < 0.3:
                store.apply({series(rng.choice(ROUTES), "200"): {end - rng.randrange(300): 1}})
            assert ask(a, query, end) == ask(b, query, end)
            assert 0 < held.held <= bound
            kept.add(len(held))
    assert held.hits > 0 and max(kept) < 6  # six queries asked, not all held


def grid(times: tuple[float, ...], now: float, oldest: int = NOW - 3600) -> Grid:
    return Grid(times, 5, first=NOW - 1200, oldest=oldest, newest=NOW // 5 * 5 + 5, now=now)


def test_only_an_answer_that_leaves_now_out_is_settled() -> None:
    rate = parse_promql("sum(rate(x[1m]))")
    past = tuple(float(t) for t in range(NOW - 300, NOW + 1, STEP))
    assert settled(rate, grid(past, NOW))
    assert settled(rate, grid(past, NOW - CLOCK_SKEW))  # the last time at most skew ahead
    # a time past now (and the skew): no sample now, one later
    assert not settled(rate, grid(past, NOW - CLOCK_SKEW - 1))
    # a window reaching before retention: no sample now, none ever, but not the same grid
    assert not settled(rate, grid(past, NOW, oldest=NOW - 330))
    assert settled(rate, grid(past, NOW, oldest=NOW - 360))
    offset = parse_promql("sum(rate(x[1m] offset 10m))")
    assert not settled(offset, grid(past, NOW, oldest=NOW - 900))
    partial = Grid(past, 5, NOW - 1200, NOW - 3600, NOW + 5, NOW, partial=True)
    assert not settled(rate, partial)


def test_a_remembered_answer_keeps_each_body_it_was_encoded_into(apps: dict[str, Any]) -> None:
    """An instant query and a range query of one time may compute the same answer: each is
    answered in its own shape, however often asked."""
    query, t = QUERIES[0], NOW - 60
    for _ in range(3):
        for client in (apps["remembering"], apps["computing"]):
            instant = client.post("/api/v1/query", data={"query": query, "time": str(t)})
            form = {"query": query, "start": str(t), "end": str(t), "step": "15"}
            ranged = client.post("/api/v1/query_range", data=form)
            assert instant.json()["data"]["resultType"] == "vector"
            assert ranged.json()["data"]["resultType"] == "matrix"
            assert [s["value"] for s in instant.json()["data"]["result"]] == [
                s["values"][0] for s in ranged.json()["data"]["result"]
            ]
    assert repeats(apps).hits >= 4


def test_times_moved_on_take_the_times_both_ask_from_the_last_answer(
    apps: dict[str, Any], store: Store, settings: Settings, clock: list[float]
) -> None:
    """The next step's refresh: the times both ask are taken from the last answer when the
    slices both read hold the same counts, and only the new ones computed; after a late
    write in the slices both read, the times both ask before it; a bare selector's only while
    the grid's first boundary, where its totals count from, stays. Every answer is what
    computing gives."""
    for query in QUERIES:
        both(apps, query, NOW)
    held = repeats(apps)
    clock[0] = NOW + 2 * STEP + 3
    store.apply({series(ROUTES[3], "200"): {NOW + 5: 4, NOW + 20: 1}})  # after the first range
    for query in QUERIES:
        moved = both(apps, query, NOW + STEP)
    assert held.hits == len(QUERIES)
    assert moved != both(apps, QUERIES[0], NOW)  # (the counts after NOW do move the answer)
    late = {series(ROUTES[4], "500"): {NOW - 30: 3}, bucket(ROUTES[4], "0.5"): {NOW - 30: 2}}
    store.apply(late)  # in the slices both read: NOW - 270 to NOW - 30 taken, 17 times
    before, taken = held.hits, held.times_taken
    for query in QUERIES:
        both(apps, query, NOW + 2 * STEP)
    assert held.hits == before + len(QUERIES)
    assert held.times_taken == taken + 3 * 17
    # a bare selector's totals count from the oldest slice kept, which moves with the
    # clock: its times are taken while it stays, never once it moved
    bare = "sum by (route) (http_requests_total)"
    for k in range(12):
        clock[0] = NOW + k * STEP + 3
        both(apps, bare, NOW + k * STEP)


def test_answers_of_equal_counts_hold_them_once_within_the_bound() -> None:
    """The p50, p95 and p99 panels read the same buckets: one copy of their counts, held
    until the last of them goes."""
    ids = ["a", "b", "c"]
    counts, sizes = np.arange(12, dtype=np.int64).reshape(3, 4), np.full(3, 4, dtype=np.int64)
    one = counts.nbytes + sizes.nbytes
    held = Repeats(3 * one)
    held.put("p50", 1, Inputs((), ids, counts, sizes), "p50's", 1)
    held.put("p95", 1, Inputs((), ids, counts.copy(), sizes.copy()), "p95's", 1)
    assert held.held == one and len(held) == 2
    held.put("other", 1, Inputs((), ids, counts + 1, sizes), "other's", 1)
    held.put("p50", 2, Inputs((), ids, counts, sizes), "p50's again", 1)  # replaces its own
    assert held.held == 2 * one and len(held) == 3
    held.put("more", 1, Inputs((), list(ids), counts + 2, sizes), "more's", 1)
    held.put("yet more", 1, Inputs((), list(ids), counts + 3, sizes), "yet more's", 1)
    assert held.held <= 3 * one
    assert held.last("p95") is None and held.last("other") is None  # least recently asked
    survivor = held.last("p50")
    assert survivor is not None and survivor.answer == "p50's again"
    assert np.array_equal(survivor.inputs.counts, counts)
