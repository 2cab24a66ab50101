"""Exemplars: what the bound costs Redis, and what reading them back costs.

    python benchmarks/bench_exemplars.py [--routes 40] [--buckets 3] [--json]

Traced requests of ``--routes`` routes, each in ``--buckets`` duration buckets, fill the bound
(``max_exemplars``, 100 000 by default: one exemplar per bucket series and minute, ~14 days of
minutes at 40 x 3) through a Recorder, in the middleware's series (``http.request.duration
.bucket{le,method,route}``) and with its labels (a trace id and a span id). Then: Redis's
memory for them (the sorted set's ``MEMORY USAGE``, and ``used_memory`` before and after),
bytes per exemplar; the flush that writes a minute of them; ``Store.exemplars`` reading the
last hour and the whole bound; and the datasource answering Grafana's exemplar query of the
shipped p99 panel over the last hour (``/api/v1/query_exemplars``, best of 5).
"""

from __future__ import annotations

import argparse
import time

import redis
from starlette.testclient import TestClient

from figures import Figure, emit, json_flag  # beside this file (python puts it on sys.path)
from slicecount import Recorder, Settings, Store
from slicecount.datasource.app import create_app
from slicecount.embedded import EmbeddedRedis

P99 = (
    "histogram_quantile(0.99, sum by (le, route) (rate(http_request_duration_seconds_bucket[1m])))"
)

BUCKETS = (0.003, 0.02, 0.2, 0.7, 3.0)
"""A value in each of five buckets of the default ladder (0.005, 0.025, 0.25, 1, 5)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routes", type=int, default=40)
    parser.add_argument("--buckets", type=int, default=3, choices=range(1, len(BUCKETS) + 1))
    parser.add_argument("--exemplars", type=int, default=100_000, help="max_exemplars")
    json_flag(parser)
    args = parser.parse_args()
    series = args.routes * args.buckets
    minutes = -(-args.exemplars // series)  # enough to fill the bound
    now = time.time()
    first = now - minutes * 60
    with (
        EmbeddedRedis() as server,
        Store.from_url(server.url, max_exemplars=args.exemplars) as store,
    ):
        client = redis.Redis.from_url(server.url)
        clock = [first]
        recorder = Recorder(store, flush_interval=3600, clock=lambda: clock[0])
        store.incr("warm")  # (the server's own allocations before the baseline)
        before = int(client.info("memory")["used_memory"])
        flushes: list[float] = []
        n = 0
        for minute in range(minutes):
            clock[0] = at = first + minute * 60 + 30
            for route in range(args.routes):
                for value in BUCKETS[: args.buckets]:
                    n += 1
                    exemplar = {"trace_id": f"{n:032x}", "span_id": f"{n:016x}"}
                    labels = {"method": "GET", "route": f"/api/v1/resource{route}/{{id}}"}
                    recorder.observe("http.request.duration", value, labels,
                                     exemplar=exemplar, now=at)  # fmt: skip
            started = time.perf_counter()
            assert recorder.flush()
            flushes.append(time.perf_counter() - started)
        recorder.close()
        key = store.keys.exemplars()
        kept = int(client.zcard(key))
        usage = int(client.memory_usage(key, samples=0) or 0)
        after = int(client.info("memory")["used_memory"])
        ids = store.series("http.request.duration.bucket", 60)
        timings = {}
        for name, since in (("hour", now - 3600), ("all", first)):
            started = time.perf_counter()
            found = store.exemplars(ids, since, now)
            timings[name] = (time.perf_counter() - started, sum(len(v) for v in found.values()))
        settings = Settings(redis_url=server.url, max_exemplars=args.exemplars)
        with TestClient(create_app(settings)) as client_app:
            form = {"query": P99, "start": str(now - 3600), "end": str(now)}
            answers = []
            for _ in range(5):
                started = time.perf_counter()
                response = client_app.post("/api/v1/query_exemplars", data=form)
                answers.append(time.perf_counter() - started)
                assert response.status_code == 200
            served = (min(answers), len(response.content))
    flushes.sort()
    per_set, per_memory = usage / kept, (after - before) / kept
    print(f"{kept:,} exemplars kept of {n:,} written ({series} bucket series x {minutes} minutes)")
    print(f"  sorted set (MEMORY USAGE):   {usage / 1e6:6.1f} MB, {per_set:5.0f} bytes an exemplar")
    print(f"  used_memory, before -> after: {(after - before) / 1e6:6.1f} MB, "
          f"{per_memory:5.0f} bytes an exemplar")  # fmt: skip
    print(
        f"  a flush of a minute ({series} exemplars with their counts): median "
        f"{flushes[len(flushes) // 2] * 1000:.1f} ms, slowest {flushes[-1] * 1000:.1f} ms"
    )
    for name, (seconds, count) in timings.items():
        print(f"  Store.exemplars, {name:>4}: {count:6,} exemplars in {seconds * 1000:7.1f} ms")
    print(f"  /api/v1/query_exemplars, the p99 panel's last hour: {served[0] * 1000:7.1f} ms "
          f"({served[1] / 1e6:.1f} MB of JSON)")  # fmt: skip
    if args.json:
        emit("exemplars", [
            Figure("bytes_per_exemplar", "Redis bytes an exemplar (sorted set)", per_set,
                   "bytes", "lower"),
            Figure("memory_per_exemplar", "used_memory an exemplar", per_memory, "bytes",
                   "lower"),
            Figure("read_hour_ms", "exemplars of the last hour read", timings["hour"][0] * 1000,
                   "ms", "lower"),
            Figure("read_all_ms", "the whole bound read", timings["all"][0] * 1000, "ms",
                   "lower"),
            Figure("served_hour_ms", "the p99 panel's exemplars, last hour, over HTTP",
                   served[0] * 1000, "ms", "lower"),
        ])  # fmt: skip


if __name__ == "__main__":
    main()
