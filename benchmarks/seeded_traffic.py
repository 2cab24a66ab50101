"""Seeded traffic of an N-route app over a span of simulated time, as slicecount's middleware
counts it and as a Prometheus client library exposes it at every scrape. Pure: no Redis, no
server (``bench_vs_prometheus.py`` writes the first into slicecount and backfills the second
into Prometheus).

Each route has a template, a request rate (Zipf-like: a few busy routes, a long quiet tail,
about 1 request a second on average), the methods a real endpoint answers (a collection GET
and POST, an item GET/PUT/PATCH/DELETE, an action POST), per-method statuses with rare errors
(a route's error rate varies), and a log-normal latency of its own; the rate of every route
follows a slow wave with a phase of its own, so the totals keep changing. Events arrive as a
Poisson process per route and minute. Every event is mapped by the middleware's own mapping
(``RequestMapping.entries``) to the series and counts slicecount records for it.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from slicecount import parse_series, series_id
from slicecount.middleware.mapping import DURATION_METRIC, REQUESTS_METRIC, RequestMapping

SCRAPE_INTERVAL = 15
"""Seconds between two Prometheus scrapes (a common setting, and Grafana's default step floor)."""
RESOURCES = (
    "users", "orders", "items", "carts", "payments", "invoices", "products", "reviews",
    "sessions", "shipments", "coupons", "accounts", "teams", "projects", "tickets", "comments",
    "files", "reports", "webhooks", "tokens",
)  # fmt: skip
ACTIONS = ("cancel", "refund", "archive", "export", "share", "approve")
STATUSES = {  # method -> (status, share) of its answers when the route errs at the base rate
    "GET": ((200, 0.90), (304, 0.04), (404, 0.03), (400, 0.01), (401, 0.006), (403, 0.004),
            (500, 0.006), (503, 0.004)),
    "POST": ((201, 0.86), (200, 0.04), (400, 0.05), (409, 0.02), (422, 0.02), (500, 0.006),
             (503, 0.004)),
    "PUT": ((200, 0.92), (400, 0.03), (404, 0.03), (409, 0.01), (500, 0.01)),
    "PATCH": ((200, 0.93), (400, 0.04), (404, 0.02), (500, 0.01)),
    "DELETE": ((204, 0.93), (404, 0.05), (403, 0.01), (500, 0.01)),
}  # fmt: skip


@dataclass(frozen=True)
class Route:
    template: str
    methods: tuple[tuple[str, float], ...]  # (method, share of the route's requests)
    rate: float  # mean requests per second
    median: float  # seconds
    sigma: float  # of the log-normal latency
    errors: float  # multiplier of the error statuses' shares
    phase: float  # of the rate's wave


def app_routes(n: int, rng: random.Random) -> list[Route]:
    """``n`` distinct routes; their mean rates sum to about ``n`` requests per second."""
    weights = [1 / (i + 1) ** 0.9 for i in range(n)]
    scale = n / sum(weights)
    routes = []
    for i, weight in enumerate(weights):
        kind, resource = i % 3, RESOURCES[(i // 3) % len(RESOURCES)]
        version = f"v{1 + i // (3 * len(RESOURCES))}"
        methods: tuple[tuple[str, float], ...]
        if kind == 0:
            template, methods = f"/api/{version}/{resource}", (("GET", 0.75), ("POST", 0.25))
        elif kind == 1:
            template = f"/api/{version}/{resource}/{{id}}"
            methods = (("GET", 0.8), ("PUT", 0.1), ("PATCH", 0.05), ("DELETE", 0.05))
        else:
            action = ACTIONS[i % len(ACTIONS)]
            template, methods = f"/api/{version}/{resource}/{{id}}/{action}", (("POST", 1.0),)
        routes.append(
            Route(
                template, methods, weight * scale,
                median=rng.choice((0.004, 0.012, 0.03, 0.08, 0.2)) * rng.uniform(0.7, 1.4),
                sigma=rng.uniform(0.4, 1.1), errors=rng.choice((0.3, 1.0, 1.0, 2.5)),
                phase=rng.uniform(0, 2 * math.pi),
            )
        )  # fmt: skip
    return routes


@functools.cache
def _total(choices: tuple[tuple[str, float], ...]) -> float:
    return sum(share for _, share in choices)


@functools.cache
def _weighted(method: str, errors: float) -> tuple[tuple[tuple[int, float], ...], float]:
    """A method's statuses weighted by a route's error multiplier, and their sum (the same
    floats for every request: computed once, for a 7-day history's 6 million requests)."""
    weighted = tuple((s, share * (errors if s >= 400 else 1.0)) for s, share in STATUSES[method])
    return weighted, sum(w for _, w in weighted)


def _pick(rng: random.Random, choices: tuple[tuple[str, float], ...]) -> str:
    roll = rng.random() * _total(choices)
    for choice, share in choices:
        roll -= share
        if roll < 0:
            return choice
    return choices[-1][0]


def _status(rng: random.Random, method: str, errors: float) -> int:
    weighted, total = _weighted(method, errors)
    roll = rng.random() * total
    for status, weight in weighted:
        roll -= weight
        if roll < 0:
            return status
    return weighted[-1][0]


@dataclass
class Traffic:
    """What ``routes`` routes served over [end - seconds, end): slicecount's counts per series
    id and second (``counts``, what the middleware adds), and the requests per route and
    second (the truth of ``increase``)."""

    routes: int
    end: int
    seconds: int
    counts: dict[str, dict[int, int]] = field(default_factory=dict)
    per_route: dict[str, list[int]] = field(default_factory=dict)
    events: int = 0

    @property
    def start(self) -> int:
        return self.end - self.seconds

    def request_series(self) -> int:
        """Distinct (method, route, status) with a request: the true
        ``count(http_requests_total)``."""
        return sum(1 for s in self.counts if parse_series(s)[0] == REQUESTS_METRIC)

    def requests_in(self, route: str | None, first: int, end: int) -> int:
        """Requests of ``route`` (of every route: None) handled in [first, end)."""
        lo, hi = max(first, self.start) - self.start, max(0, end - self.start)
        rows = self.per_route.values() if route is None else [self.per_route[route]]
        return sum(sum(row[lo:hi]) for row in rows)

    def minutes(self, width: int = 60) -> list[tuple[int, dict[str, dict[int, int]]]]:
        """(end, the counts of the ``width`` seconds before it) in time order: what a writer
        flushes, a minute at a time by default."""
        chunks: list[dict[str, dict[int, int]]] = [{} for _ in range(0, self.seconds, width)]
        for series, seconds in self.counts.items():
            for t, n in seconds.items():
                chunks[(t - self.start) // width].setdefault(series, {})[t] = n
        ends = (min(self.start + width * (i + 1), self.end) for i in range(len(chunks)))
        return list(zip(ends, chunks, strict=True))

    def shifted(self, end: int) -> Traffic:
        """The same traffic ending at ``end`` (the generator's draws do not depend on the
        clock, so this is what ``generate`` gives for that end)."""
        by = end - self.end
        counts = {s: {t + by: n for t, n in seconds.items()} for s, seconds in self.counts.items()}
        return Traffic(self.routes, end, self.seconds, counts, self.per_route, self.events)

    def until(self, at: int) -> Traffic:
        """What was served before ``at``: the history of a store that goes on live from it."""
        counts = {}
        for series, seconds in self.counts.items():
            kept = {t: n for t, n in seconds.items() if t < at}
            if kept:
                counts[series] = kept
        cut = at - self.start
        per_route = {route: row[:cut] for route, row in self.per_route.items()}
        events = sum(sum(row) for row in per_route.values())
        return Traffic(self.routes, at, cut, counts, per_route, events)

    def by_second(self, since: int) -> dict[int, list[tuple[str, int]]]:
        """The (series id, n) counted in each second from ``since`` on: what a live app adds."""
        out: dict[int, list[tuple[str, int]]] = {}
        for series, seconds in self.counts.items():
            for t, n in seconds.items():
                if t >= since:
                    out.setdefault(t, []).append((series, n))
        return out

    def totals(self) -> dict[str, int]:
        """Every series' count over the whole traffic."""
        return {series: sum(seconds.values()) for series, seconds in self.counts.items()}


def generate(routes: int, end: int, seconds: int, seed: int) -> Traffic:
    """The seeded traffic of a ``routes``-route app over [end - seconds, end)."""
    rng = random.Random(seed)
    mapping = RequestMapping(series_id)
    traffic = Traffic(routes, end, seconds)
    counts = traffic.counts
    for route in app_routes(routes, rng):
        row = traffic.per_route.setdefault(route.template, [0] * seconds)
        for minute in range(0, seconds, 60):
            wave = 1 + 0.35 * math.sin(2 * math.pi * minute / 3600 + route.phase)
            rate, at = route.rate * wave, float(minute)
            while True:
                at += rng.expovariate(rate)
                if at >= min(minute + 60, seconds):
                    break
                method = _pick(rng, route.methods)
                status = _status(rng, method, route.errors)
                latency = route.median * math.exp(rng.gauss(0, route.sigma))
                second = traffic.start + int(at)
                for series, n in mapping.entries(method, route.template, status, latency, None):
                    by_second = counts.setdefault(series, {})
                    by_second[second] = by_second.get(second, 0) + n
                row[int(at)] += 1
                traffic.events += 1
    return traffic


# -- the same traffic as a Prometheus client exposes it, scraped every SCRAPE_INTERVAL s ------


def scrape_times(traffic: Traffic, offset: int) -> list[int]:
    """Scrapes at ``offset`` s past each SCRAPE_INTERVAL (Prometheus spreads targets so), up to
    the end; a scrape at s sees the requests of the seconds before s."""
    return list(range(traffic.start + offset, traffic.end + 1, SCRAPE_INTERVAL))


def _cumulative(seconds: dict[int, int], scrapes: list[int]) -> list[int]:
    """The running total at each scrape (counts of the seconds before it)."""
    ordered, totals, total, i = sorted(seconds.items()), [], 0, 0
    for scrape in scrapes:
        while i < len(ordered) and ordered[i][0] < scrape:
            total += ordered[i][1]
            i += 1
        totals.append(total)
    return totals


def _labels(labels: dict[str, str]) -> str:
    escaped = (
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in labels.items()
    )
    return "{" + ",".join(escaped) + "}"


def _series_lines(
    name: str, labels: dict[str, str], values: list[int] | list[float], scrapes: list[int],
    first: int,
) -> Iterator[str]:  # fmt: skip
    """One series' samples from scrape ``first`` on (an int as an int, a float as repr)."""
    head = name + _labels(labels)
    for value, at in zip(values[first:], scrapes[first:], strict=True):
        yield f"{head} {value} {at}\n"


def openmetrics(traffic: Traffic, scrapes: list[int]) -> Iterator[str]:
    """The OpenMetrics text of every scrape (for ``promtool tsdb create-blocks-from
    openmetrics``): ``http_requests_total`` and the ``http_request_duration_seconds``
    histogram (cumulative ``le`` buckets, ``_sum``, ``_count``), each series from the first
    scrape after its first request, as a client library creates it then."""
    requests: dict[str, list[int]] = {}
    buckets: dict[tuple[str, str], dict[str, list[int]]] = {}  # (method, route) -> le -> totals
    sums: dict[tuple[str, str], list[int]] = {}
    for series, seconds in traffic.counts.items():
        name, labels = parse_series(series)
        text = {k: str(v) for k, v in labels.items()}
        totals = _cumulative(seconds, scrapes)
        if name == REQUESTS_METRIC:
            requests[series] = totals
        elif name == f"{DURATION_METRIC}.bucket":
            buckets.setdefault((text["method"], text["route"]), {})[text["le"]] = totals
        elif name == f"{DURATION_METRIC}.sum_us":
            sums[(text["method"], text["route"])] = totals
    yield "# TYPE http_requests counter\n# HELP http_requests Requests handled.\n"
    for series, totals in requests.items():
        labels = {k: str(v) for k, v in parse_series(series)[1].items()}
        first = next((i for i, total in enumerate(totals) if total), None)
        if first is not None:  # a series first requested after the last scrape is not yet
            yield from _series_lines("http_requests_total", labels, totals, scrapes, first)
    yield "# TYPE http_request_duration_seconds histogram\n"
    yield "# HELP http_request_duration_seconds Request duration.\n"
    les = RequestMapping(series_id).duration.les
    for (method, route), by_le in buckets.items():
        labels = {"method": method, "route": route}
        zero = [0] * len(scrapes)
        running = zero
        cumulative = []  # the bucket counts below each bound, summed up to it
        for le in les:
            running = [a + b for a, b in zip(running, by_le.get(le, zero), strict=True)]
            cumulative.append((le, running))
        count = cumulative[-1][1]
        first = next((i for i, total in enumerate(count) if total), None)
        if first is None:
            continue
        for le, totals in cumulative:
            yield from _series_lines("http_request_duration_seconds_bucket",
                                     {**labels, "le": le}, totals, scrapes, first)  # fmt: skip
        seconds_sum = [us / 1e6 for us in sums[(method, route)]]
        yield from _series_lines("http_request_duration_seconds_sum", labels, seconds_sum,
                                 scrapes, first)  # fmt: skip
        yield from _series_lines("http_request_duration_seconds_count", labels, count,
                                 scrapes, first)  # fmt: skip
    yield "# EOF\n"


def exposition(totals: dict[str, int]) -> str:
    """What a client library's ``/metrics`` shows for these totals (the text format, no
    timestamps: the scrape dates them): the same families and labels as ``openmetrics``."""
    lines = ["# TYPE http_requests_total counter"]
    buckets: dict[tuple[str, str], dict[str, int]] = {}
    sums: dict[tuple[str, str], int] = {}
    for series, total in totals.items():
        name, labels = parse_series(series)
        text = {k: str(v) for k, v in labels.items()}
        if name == REQUESTS_METRIC:
            lines.append(f"http_requests_total{_labels(text)} {total}")
        elif name == f"{DURATION_METRIC}.bucket":
            buckets.setdefault((text["method"], text["route"]), {})[text["le"]] = total
        elif name == f"{DURATION_METRIC}.sum_us":
            sums[(text["method"], text["route"])] = total
    lines.append("# TYPE http_request_duration_seconds histogram")
    les = RequestMapping(series_id).duration.les
    for (method, route), by_le in buckets.items():
        labels = {"method": method, "route": route}
        running = 0
        for le in les:
            running += by_le.get(le, 0)
            bucket = _labels({**labels, "le": le})
            lines.append(f"http_request_duration_seconds_bucket{bucket} {running}")
        head = _labels(labels)
        lines.append(
            f"http_request_duration_seconds_sum{head} {sums.get((method, route), 0) / 1e6}"
        )
        lines.append(f"http_request_duration_seconds_count{head} {running}")
    return "\n".join(lines) + "\n"
