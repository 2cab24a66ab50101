"""Known traffic for the overview tests, and the routes table's figures computed from it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from slicecount.core.histogram import parse_bound
from slicecount.store import Store

STEP = 10
"""Seconds between the written points; the first is 3000 s ago, the last 120 s ago."""
DEPLOY = "v1.2 deployed"


@dataclass(frozen=True)
class Route:
    method: str
    statuses: dict[str, tuple[int, int]]
    """status: (count, every n-th point), e.g. 3 at every point, 1 at every 3rd."""
    bucket: dict[str, str]
    """status: the duration bucket (``le``) its requests fall in."""


ROUTES = {
    "/api/items": Route("GET", {"200": (3, 1), "500": (1, 3)}, {"200": "0.05", "500": "0.5"}),
    "/login": Route("POST", {"200": (1, 1), "429": (1, 2)}, {"200": "0.05", "429": "0.005"}),
    "/reports/{id}": Route("GET", {"200": (1, 6)}, {"200": "1"}),
}


def times(now: int) -> list[int]:
    return list(range(now - 3000, now - 120, STEP))


def write(store: Store, now: int) -> None:
    """Requests, durations, DB queries, throttled requests, unique clients and a deploy."""
    batch: dict[str, dict[int, int]] = {}

    def add(series: str, t: int, n: int) -> None:
        batch.setdefault(series, {})
        batch[series][t] = batch[series].get(t, 0) + n

    for i, t in enumerate(times(now)):
        for route, r in ROUTES.items():
            for status, (n, every) in r.statuses.items():
                if i % every:
                    continue
                add(f'http.requests{{method="{r.method}",route="{route}",status="{status}"}}', t, n)
                le = r.bucket[status]
                add(f'http.request.duration.bucket{{le="{le}",method="{r.method}",route="{route}"}}',
                    t, n)  # fmt: skip
        add('db.queries{operation="SELECT"}', t, 7)
        add('http.request.queries.bucket{le="5",method="GET",route="/api/items"}', t, 3)
        add('http.request.queries.sum_us{method="GET",route="/api/items"}', t, 6_000_000)
        if i % 2 == 0:
            add('db.queries{operation="INSERT"}', t, 1)
            add('http.throttled{limit="5/minute",method="POST",route="/login"}', t, 1)
    store.apply(batch)
    for t in times(now)[::6]:
        clients = [f"c{k}" for k in range(5)]
        store.add_unique("http.unique_clients", clients, {"route": "/api/items"}, now=t)
        store.add_unique("http.unique_clients", ["c0", "x1"], {"route": "/login"}, now=t)
    store.annotate(DEPLOY, tags=["deploy"], when=now - 1500)


@dataclass(frozen=True)
class Row:
    route: str
    requests: int
    rate: float
    error_ratio: float
    p95: float


def expected_rows(now: int, seconds: float) -> list[Row]:
    """The routes table over a range of ``seconds`` holding all the data, busiest first."""
    rows = []
    for route, r in ROUTES.items():
        counts = {s: sum(n for i, _ in enumerate(times(now)) if i % every == 0)
                  for s, (n, every) in r.statuses.items()}  # fmt: skip
        total = sum(counts.values())
        errors = sum(n for s, n in counts.items() if s.startswith("5"))
        buckets: dict[str, int] = {}
        for status, n in counts.items():
            buckets[r.bucket[status]] = buckets.get(r.bucket[status], 0) + n
        bounds = sorted(buckets, key=parse_bound)
        p95 = quantile(0.95, [parse_bound(b) for b in bounds], [buckets[b] for b in bounds])
        assert p95 is not None and not math.isnan(p95)
        rows.append(Row(route, total, total / seconds, errors / total, float(p95)))
    return sorted(rows, key=lambda row: -row.requests)


def quantile(q: float, bounds: list[float], counts: list[int]) -> float | None:
    """routes.js' estimate from non-cumulative bucket counts (the page sums a route's buckets
    over the range): linear inside the bucket holding rank q, 0 below the first bucket, the
    highest finite bound for +Inf."""
    total = sum(counts)
    if not total > 0:
        return None
    rank = q * total
    cumulative, lower = 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=True):
        if count > 0 and cumulative + count >= rank:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * (rank - cumulative) / count
        cumulative += count
        if not math.isinf(bound):
            lower = bound
    return lower
