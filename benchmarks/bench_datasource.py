"""/query latency for a 12-panel dashboard and for one 12-target panel, beside the raw
pipelined HMGET floor.

    python benchmarks/bench_datasource.py [--loads 50] [--json]

Each panel target selects 10 series over 1 hour (60 s slices: 61 points each); a dashboard
load is 12 such panels, then one panel holding all 12 targets (120 series in one /query). The
app is called in-process through httpx's ASGI transport (no sockets); the floor is the same
HMGETs of the same 61 fields (keys of the book layout, DESIGN.md) sent as one pipeline on a
plain redis-py asyncio client, measured in the same run. Target (issue 4): /query p99 within 3x
the floor's p99.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import httpx2 as httpx
import redis.asyncio

from figures import Figure, emit, json_flag  # beside this file (python puts it on sys.path)
from slicecount import AsyncStore, Store, series_id
from slicecount.datasource.app import create_app
from slicecount.embedded import EmbeddedRedis

PANELS, SERIES, HOUR = 12, 10, 3600


@dataclass
class Timings:
    """Milliseconds per request of /query and of its floor, one pair per request."""

    query: list[float] = field(default_factory=list)
    floor: list[float] = field(default_factory=list)


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat().replace("+00:00", "Z")


def body(panels: list[int], start: float, end: float) -> dict[str, Any]:
    return {
        "range": {"from": iso(start), "to": iso(end), "raw": {"from": "now-1h", "to": "now"}},
        "intervalMs": 2000,
        "maxDataPoints": 1114,
        "targets": [{"refId": f"T{p}", "target": f'http.requests{{panel="{p}"}}'} for p in panels],
    }


def series_key(panel: int, i: int) -> str:
    """The book layout with no prefix: count:<precision>:<series>."""
    return f"count:60:{series_id('http.requests', {'panel': panel, 'i': i})}"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def timed(
    client: httpx.AsyncClient,
    floor_client: redis.asyncio.Redis,
    request: dict[str, Any],
    keys: list[str],
    fields: list[int],
    into: Timings | None,
) -> None:
    started = time.perf_counter()
    response = await client.post("/query", json=request)
    elapsed = (time.perf_counter() - started) * 1000
    frames = response.json()
    assert response.status_code == 200 and len(frames) == len(keys), response.text
    assert all(len(frame["datapoints"]) == len(fields) for frame in frames)

    started = time.perf_counter()
    async with floor_client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.hmget(key, fields)
        replies = await pipe.execute()
    floor = (time.perf_counter() - started) * 1000
    assert all(any(reply) for reply in replies), "the floor read nothing: key layout changed?"
    if into is not None:
        into.query.append(elapsed)
        into.floor.append(floor)


async def run(url: str, loads: int, now: float) -> tuple[Timings, Timings]:
    store = AsyncStore.from_url(url, clock=lambda: now)
    app = create_app(store=store, clock=lambda: now)
    start, end = now - HOUR, now
    fields = list(range(int(start // 60) * 60, int(end // 60) * 60 + 1, 60))
    keys = [[series_key(p, i) for i in range(SERIES)] for p in range(PANELS)]
    everything = [key for panel in keys for key in panel]
    floor_client = redis.asyncio.Redis.from_url(url)
    panels, combined = Timings(), Timings()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        for load in range(loads + 2):  # two warm-up loads fill the discovery cache and pools
            warm = load >= 2
            for p in range(PANELS):
                request = body([p], start, end)
                await timed(
                    client, floor_client, request, keys[p], fields, panels if warm else None
                )
            request = body(list(range(PANELS)), start, end)
            await timed(
                client, floor_client, request, everything, fields, combined if warm else None
            )
    await floor_client.aclose()
    await store.close()
    return panels, combined


def summary(name: str, timings: Timings, key: str, label: str) -> list[Figure]:
    q50, q99 = statistics.median(timings.query), percentile(timings.query, 0.99)
    f50, f99 = statistics.median(timings.floor), percentile(timings.floor, 0.99)
    print(name)
    print(f"  /query in-process    p50 {q50:7.2f} ms   p99 {q99:7.2f} ms")
    print(f"  raw pipelined HMGET  p50 {f50:7.2f} ms   p99 {f99:7.2f} ms   (the floor)")
    ratio = f"p50 {q50 / f50:7.2f}x     p99 {q99 / f99:7.2f}x"
    print(f"  ratio                {ratio}   (target p99 <= 3x)")
    return [
        Figure(f"{key}.p50", f"{label} p50", q50, "ms", "lower"),
        Figure(f"{key}.p99", f"{label} p99", q99, "ms", "lower"),
        Figure(f"{key}.floor_p50", f"{label} floor (HMGET) p50", f50, "ms", "lower"),
        Figure(f"{key}.over_floor", f"{label} p99 / floor p99", q99 / f99, "x", "lower"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=50, help="dashboard loads to time")
    json_flag(parser)
    args = parser.parse_args()
    now = float(int(time.time()))
    with EmbeddedRedis() as server, Store.from_url(server.url) as store:
        batch = {
            series_id("http.requests", {"panel": p, "i": i}): {
                s: 1 + (s // 60 + i) % 7 for s in range(int(now) - HOUR, int(now), 20)
            }
            for p in range(PANELS)
            for i in range(SERIES)
        }
        store.apply(batch)
        panels, combined = asyncio.run(run(server.url, args.loads, now))
    print(f"{args.loads} dashboard loads, 1 h at 60 s")
    figures = summary(
        f"{PANELS} panels x 1 target x {SERIES} series", panels, "panel", "1-target panel"
    )
    figures += summary(
        f"1 panel x {PANELS} targets x {SERIES} series", combined, "panel12", "12-target panel"
    )
    if args.json:
        emit("datasource", figures)


if __name__ == "__main__":
    main()
