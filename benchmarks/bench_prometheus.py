"""Prometheus API latency: a 12-panel dashboard refresh and an alert query, beside the raw
pipelined HMGET floor.

    python benchmarks/bench_prometheus.py [--rounds 40] [--quick] [--profile N] [--json]

Two hours of traffic (10 routes x 3 methods x 4 statuses of http.requests, and the 12-bucket
http.request.duration histogram per route and method) written with Store.apply. A refresh is
the 12 queries of a "last 1 hour" PromQL dashboard as Grafana sends them (form POSTs, start
and end aligned to the 15 s step, $__rate_interval = 1m0s), one after the other, then all at
once (as Grafana does). The floor is every HMGET of those queries (recorded from the store's
reads: same keys, same fields) in one pipeline on a plain redis-py asyncio client; store.read
of the same reads is a second one. The alert: a 5xx ratio over 10 minutes at a 1 s step (601
points), and as an instant query. The app is called in-process (httpx's ASGI transport);
measured requests and floors alternate in the same run. Targets: refresh p99 <= 2x the floor
p99, alert p99 <= 50 ms. The machine is shared and noisy: compare runs, not one figure.

The duration histogram is asked for by the name the tree under test lists
(``http_request_duration_seconds_bucket`` since 0.2, ``http_request_duration_bucket`` before),
so ``compare.py`` runs the same dashboard against older revisions too.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import random
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any
from urllib.parse import urlencode

import anyio.to_thread
import httpx2 as httpx
import redis.asyncio

from figures import Figure, emit, json_flag  # beside this file (python puts it on sys.path)
from slicecount import AsyncStore, Store, series_id
from slicecount.datasource.app import create_app
from slicecount.embedded import EmbeddedRedis

ROUTES, METHODS = [f"/api/items/{i}" for i in range(10)], ["GET", "POST", "PUT"]
STATUSES, STATUS_WEIGHTS = ["200", "304", "404", "500"], [88, 5, 5, 2]
BOUNDS = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"]
BUCKET_WEIGHTS = [5, 15, 30, 20, 12, 8, 5, 2, 1, 1, 0.5, 0.5]
BUCKET_US = [3, 8, 20, 40, 80, 200, 400, 800, 2000, 4000, 8000, 12000]  # x 1000: a value in each
HISTORY, FINE = 7200, 600  # seconds written; the last FINE also at precisions 1 and 5
STEP, SEL = 15, '{route=~".*",method=~".*"}'
RATE = f"rate(http_requests_total{SEL}[1m0s])"
QUANTILE = "histogram_quantile({q}, sum by (le, {by}) (rate({h}_bucket{s}[1m0s])))"


def dashboard(h: str) -> list[tuple[str, str]]:
    """(path, query): the "HTTP overview (Prometheus)" panels, and more of the kind; ``h`` is
    the duration histogram's base name (``http_request_duration_seconds``)."""
    return [
        ("query_range", f"sum by (status) ({RATE})"),
        ("query_range", f'(sum(rate(http_requests_total{{status=~"5..",route=~".*",method=~".*"}}'
                        f"[1m0s])) or vector(0)) / sum({RATE}) * 100"),
        *(("query_range", QUANTILE.format(q=q, by="route", h=h, s=SEL))
          for q in ("0.5", "0.95", "0.99")),
        ("query", f"topk(10, sum by (route) (increase(http_requests_total{SEL}[3600s])))"),
        ("query_range", f"sum by (route) (increase(http_requests_total{SEL}[1m0s]))"),
        ("query_range", f"topk(5, sum by (route) ({RATE}))"),
        ("query_range", f"sum by (method) ({RATE})"),
        ("query_range", f"sum(rate({h}_sum[1m0s])) / sum(rate({h}_count[1m0s]))"),
        ("query_range", 'sum by (route) (rate(http_requests_total{status=~"5.."}[1m0s])) / '
                        "sum by (route) (rate(http_requests_total[1m0s]))"),
        ("query_range", QUANTILE.format(q="0.95", by="method", h=h, s="")),
    ]  # fmt: skip


ALERT = 'sum(rate(http_requests_total{status=~"5.."}[1m])) / sum(rate(http_requests_total[1m]))'
Request = tuple[str, dict[str, str]]  # (path, form)
Read = tuple[list[str], int, int, int]  # one store.read: ids, precision, first, last slice
Job = Callable[[], Awaitable[Any]]


def traffic(now: int) -> dict[str, dict[int, int]]:
    """``{series id: {second: count}}``: 0 to 4 requests a second per route and method."""
    rng, batch = random.Random(7), dict[str, dict[int, int]]()
    for route in ROUTES:
        for method in METHODS:
            labels = {"route": route, "method": method}
            ids = [series_id("http.requests", {**labels, "status": s}) for s in STATUSES]
            ids += [series_id("http.request.duration.bucket", {**labels, "le": b}) for b in BOUNDS]
            counts = [batch.setdefault(i, {}) for i in ids]
            sums = batch.setdefault(series_id("http.request.duration.sum_us", labels), {})
            for t in range(now - HISTORY, now):
                n = rng.randint(0, 4)
                for i in rng.choices(range(len(STATUSES)), STATUS_WEIGHTS, k=n):
                    counts[i][t] = counts[i].get(t, 0) + 1
                for b in rng.choices(range(len(BOUNDS)), BUCKET_WEIGHTS, k=n):
                    bucket = counts[len(STATUSES) + b]
                    bucket[t] = bucket.get(t, 0) + 1
                    sums[t] = sums.get(t, 0) + BUCKET_US[b] * 1000
    return batch


def write(url: str, now: int) -> None:
    """What a cleaned store holds: precisions 1 and 5 only for the last FINE seconds (the
    cleaner trims them to 120 slices; 7200 fields per hash would be unlike production)."""
    batch = traffic(now)
    coarse = {s: {t: n for t, n in c.items() if t < now - FINE} for s, c in batch.items()}
    fine = {s: {t: n for t, n in c.items() if t >= now - FINE} for s, c in batch.items()}
    with Store.from_url(url, precisions=(60, 300, 3600, 18000, 86400)) as store:
        assert store.apply(coarse) == 0
    with Store.from_url(url) as store:
        assert store.apply(fine) == 0


def requests(now: int, histogram: str) -> tuple[list[Request], list[Request]]:
    """The dashboard's 12 requests; the alert's range and instant requests."""
    start, end = (now - 3600) // STEP * STEP, now // STEP * STEP  # Grafana aligns to the step
    span = {"start": str(start), "end": str(end), "step": str(STEP)}
    panels = [(p, {"query": q, **span} if p == "query_range" else {"query": q, "time": str(end)})
              for p, q in dashboard(histogram)]  # fmt: skip
    alert = {"query": ALERT, "start": str(now - 600), "end": str(now), "step": "1"}
    return panels, [("query_range", alert), ("query", {"query": ALERT, "time": str(now)})]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Bench:
    def __init__(self, url: str, now: int) -> None:
        self.store = AsyncStore.from_url(url, clock=lambda: now)
        transport = httpx.ASGITransport(app=create_app(store=self.store, clock=lambda: now))
        self.client = httpx.AsyncClient(transport=transport, base_url="http://bench")
        self.redis = redis.asyncio.Redis.from_url(url)  # the floor's plain client
        self.reads: list[Read] = []

    async def ask(self, request: Request) -> dict[str, Any]:
        path, form = request
        kind = {"content-type": "application/x-www-form-urlencoded"}
        response = await self.client.post(f"/api/v1/{path}", content=urlencode(form), headers=kind)
        answer: dict[str, Any] = response.json()
        assert response.status_code == 200 and answer["status"] == "success", response.text
        assert answer["data"]["result"], f"no series for {form['query']}"
        return answer

    async def histogram(self) -> str:
        """The duration histogram's base name as this tree lists it (``_seconds`` since 0.2)."""
        response = await self.client.get("/api/v1/label/__name__/values")
        names: list[str] = response.json()["data"]
        bases = [n.removesuffix("_bucket") for n in names if n.endswith("_bucket")]
        assert len(bases) == 1 and bases[0].startswith("http_request_duration"), names
        return bases[0]

    async def recorded(self, request: Request) -> tuple[list[Read], list[str]]:
        """The store reads one request makes, and the infos of its answer."""
        original, self.reads = self.store.read, []

        async def spy(
            series_ids: Sequence[str], precision: int, start: float, end: float
        ) -> dict[str, list[int | None]]:
            self.reads.append((list(series_ids), precision, int(start), int(end)))
            return await original(series_ids, precision, start, end)

        self.store.read = spy  # type: ignore[method-assign]
        infos: list[str] = (await self.ask(request)).get("infos", [])
        self.store.read = original  # type: ignore[method-assign]
        return self.reads, infos

    async def floor(self, reads: list[Read]) -> None:
        async with self.redis.pipeline(transaction=False) as pipe:
            for ids, p, first, last in reads:
                fields = [str(s) for s in range(first // p * p, last + 1, p)]  # as the store
                for i in ids:
                    pipe.hmget(f"count:{p}:{i}", fields)  # the book layout, no prefix
            replies = await pipe.execute()
        assert any(any(r) for r in replies), "the floor read nothing: key layout changed?"

    async def via_store(self, reads: list[Read]) -> None:
        for ids, p, first, last in reads:
            await self.store.read(ids, p, first, last)

    async def refresh(self, panels: list[Request], concurrent: bool) -> None:
        if concurrent:
            await asyncio.gather(*(self.ask(request) for request in panels))
        else:
            for request in panels:
                await self.ask(request)


async def inline(func: Callable[..., Any], *args: Any, **_: Any) -> Any:
    return func(*args)


async def run(url: str, now: int, rounds: int, profile: int) -> dict[str, list[float]]:
    bench = Bench(url, now)
    panels, alerts = requests(now, await bench.histogram())
    reads: list[Read] = []
    for request in panels:
        got, infos = await bench.recorded(request)
        reads += got
        print(f"  {infos[0] if infos else 'no infos'}: {request[1]['query'][:56]}")
    alert_reads = [(await bench.recorded(a))[0] for a in alerts]
    fields = sum(len(ids) * ((last - first) // p + 1) for ids, p, first, last in reads)
    print(f"  one refresh reads {sum(len(r[0]) for r in reads)} hashes, {fields} fields")
    if profile:  # the heavy work inline, not in a worker thread, so that one profiler sees it
        original = anyio.to_thread.run_sync
        setattr(anyio.to_thread, "run_sync", inline)  # noqa: B010
        with cProfile.Profile() as profiler:
            for _ in range(profile):
                await bench.refresh(panels, False)
        setattr(anyio.to_thread, "run_sync", original)  # noqa: B010
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    work: dict[str, tuple[Job, list[Read], int]] = {  # name: (request(s), their reads, repeats)
        "sequential": (partial(bench.refresh, panels, False), reads, 1),
        "concurrent": (partial(bench.refresh, panels, True), reads, 1),
        "alert_range": (partial(bench.ask, alerts[0]), alert_reads[0], 5),
        "alert_instant": (partial(bench.ask, alerts[1]), alert_reads[1], 5),
    }
    out: dict[str, list[float]] = {}
    for r in range(rounds + 2):  # two warm-up rounds
        for name, (measured, read, repeats) in work.items():
            jobs: list[tuple[str, Job]] = [
                (name, measured),
                (f"{name}_floor", partial(bench.floor, read)),
                (f"{name}_store", partial(bench.via_store, read)),
            ]
            for _ in range(repeats):
                for key, job in jobs[r % 3 :] + jobs[: r % 3]:  # who goes first rotates
                    started = time.perf_counter()
                    await job()
                    if r >= 2:
                        out.setdefault(key, []).append((time.perf_counter() - started) * 1000)
    await bench.client.aclose()
    await bench.redis.aclose()
    await bench.store.close()
    return out


def summary(label: str, values: list[float], key: str) -> tuple[float, float, list[Figure]]:
    p50, p99 = statistics.median(values), percentile(values, 0.99)
    print(f"  {label:<34} p50 {p50:8.2f} ms   p99 {p99:8.2f} ms   ({len(values)} samples)")
    pairs = [(50, p50), (99, p99)]
    figures = [Figure(f"{key}.p{q}", f"{label} p{q}", v, "ms", "lower") for q, v in pairs]
    return p50, p99, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40, help="refreshes of each kind timed")
    parser.add_argument("--quick", action="store_true", help="3 rounds: checks it all works")
    parser.add_argument("--profile", type=int, default=0, help="cProfile N refreshes first")
    json_flag(parser)
    args = parser.parse_args()
    rounds, now = 3 if args.quick else args.rounds, int(time.time())
    with EmbeddedRedis() as server:
        started = time.perf_counter()
        write(server.url, now)
        print(f"wrote {HISTORY // 3600} h of traffic in {time.perf_counter() - started:.1f} s")
        t = asyncio.run(run(server.url, now, rounds, args.profile))
    print(f"{rounds} rounds, measured requests and floors alternating (a shared, noisy machine)")
    floor, store = (
        t["sequential_floor"] + t["concurrent_floor"],
        t["sequential_store"] + t["concurrent_store"],
    )
    f50, f99, figures = summary("refresh floor: redis-py HMGET", floor, "refresh.floor")
    s50, s99, more = summary("refresh floor 2: store.read", store, "refresh.store")
    figures += more
    for kind in ("sequential", "concurrent"):
        q50, q99, more = summary(f"refresh, 12 {kind}", t[kind], f"refresh.{kind}")
        print(
            f"  {'':<34} over the floor: p99 {q99 / f99:.2f}x (target <= 2x), p50 "
            f"{q50 / f50:.2f}x; over store.read: p99 {q99 / s99:.2f}x, p50 {q50 / s50:.2f}x"
        )
        ratio = Figure(f"refresh.{kind}.over_floor", f"refresh ({kind}) p99 / floor p99",
                       q99 / f99, "x", "lower")  # fmt: skip
        figures += [*more, ratio]
    print("  alert query (target p99 <= 50 ms):")
    for kind in ("range", "instant"):
        figures += summary(f"alert {kind}", t[f"alert_{kind}"], f"alert.{kind}")[2]
        for floor_kind, what in (("floor", "redis-py HMGET"), ("store", "store.read")):
            label, values = f"alert {kind} floor: {what}", t[f"alert_{kind}_{floor_kind}"]
            figures += summary(label, values, f"alert.{kind}.{floor_kind}")[2]
    if args.json:
        emit("prometheus", figures)


if __name__ == "__main__":
    main()
