"""/query latency for a 12-panel dashboard, beside the raw pipelined HMGET floor.

    python benchmarks/bench_datasource.py [--loads 50]

Each panel asks for 10 series over 1 hour (60 s slices: 61 points each). The app is called
in-process through httpx's ASGI transport (no sockets); the floor is the same 10 HMGETs of the
same 61 fields sent as one pipeline on the same Redis connection pool, measured in the same run.
Target (issue 4): /query p99 within 3x the floor's p99.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from datetime import datetime, timezone
from typing import Any

import httpx2 as httpx

from slicecount.datasource.app import create_app
from slicecount.embedded import EmbeddedRedis
from slicecount.keys import KeySpace
from slicecount.series import encode
from slicecount.slices import slice_starts
from slicecount.store import Store
from slicecount.store_async import AsyncStore

PANELS, SERIES, HOUR = 12, 10, 3600


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat().replace("+00:00", "Z")


def body(panel: int, start: float, end: float) -> dict[str, Any]:
    return {
        "range": {"from": iso(start), "to": iso(end), "raw": {"from": "now-1h", "to": "now"}},
        "intervalMs": 2000,
        "maxDataPoints": 1114,
        "targets": [{"refId": "A", "target": f'http.requests{{panel="{panel}"}}'}],
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(url: str, loads: int, now: float) -> tuple[list[float], list[float]]:
    app = create_app(store=AsyncStore.from_url(url, clock=lambda: now), clock=lambda: now)
    start, end = now - HOUR, now
    bodies = [body(p, start, end) for p in range(PANELS)]
    keys = KeySpace()
    fields = list(slice_starts(60, start, end))
    panel_keys = [
        [keys.counter(60, encode("http.requests", {"panel": p, "i": i})) for i in range(SERIES)]
        for p in range(PANELS)
    ]
    floor_store = AsyncStore.from_url(url)
    query_ms: list[float] = []
    floor_ms: list[float] = []
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        for load in range(loads + 2):  # two warm-up loads fill the discovery cache and pools
            for panel in range(PANELS):
                started = time.perf_counter()
                response = await client.post("/query", json=bodies[panel])
                elapsed = (time.perf_counter() - started) * 1000
                frames = response.json()
                assert response.status_code == 200 and len(frames) == SERIES, response.text
                assert len(frames[0]["datapoints"]) == len(fields)

                started = time.perf_counter()
                async with floor_store.client.pipeline(transaction=False) as pipe:
                    for key in panel_keys[panel]:
                        pipe.hmget(key, fields)
                    await pipe.execute()
                floor = (time.perf_counter() - started) * 1000
                if load >= 2:
                    query_ms.append(elapsed)
                    floor_ms.append(floor)
    await floor_store.close()
    await app.state.datasource.store.close()
    return query_ms, floor_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=50, help="dashboard loads to time")
    args = parser.parse_args()
    now = float(int(time.time()))
    with EmbeddedRedis() as server, Store.from_url(server.url) as store:
        batch = {
            encode("http.requests", {"panel": p, "i": i}): {
                s: 1 + (s // 60 + i) % 7 for s in range(int(now) - HOUR, int(now), 20)
            }
            for p in range(PANELS)
            for i in range(SERIES)
        }
        store.apply(batch)
        query_ms, floor_ms = asyncio.run(run(server.url, args.loads, now))
    q50, q99 = statistics.median(query_ms), percentile(query_ms, 0.99)
    f50, f99 = statistics.median(floor_ms), percentile(floor_ms, 0.99)
    print(f"{args.loads} dashboard loads x {PANELS} panels x {SERIES} series, 1 h at 60 s")
    print(f"  /query in-process    p50 {q50:7.2f} ms   p99 {q99:7.2f} ms")
    print(f"  raw pipelined HMGET  p50 {f50:7.2f} ms   p99 {f99:7.2f} ms   (the floor)")
    ratio = f"p50 {q50 / f50:7.2f}x     p99 {q99 / f99:7.2f}x"
    print(f"  ratio                {ratio}   (target p99 <= 3x)")


if __name__ == "__main__":
    main()
