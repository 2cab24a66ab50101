"""Recorder.add_unique() rate and flush cost beside naive PFADD per event, and Redis memory
per series-slice, in one run.

    python benchmarks/bench_unique.py [--adds 1000000] [--series 1000] [--values 1000]
        [--rounds 3] [--json]

Targets (issue 15): add_unique() >= 500 000/s on one thread. The naive way sends each event to
Redis as it happens: one round trip of one PFADD per unique precision (5 by default). Its flush
twin sends the same 1 000 x 1 000 values as one PFADD per value per precision, pipelined 10 000
commands a round trip (the best case for it). Rounds alternate which goes first; figures are
medians; the machine is shared, so compare ratios. Memory: MEMORY USAGE of one slice's keys at
precision 60, by distinct values, for a plain series (its HyperLogLog) and an exact one (its SET
beside its HyperLogLog).

On this machine (2 shared cores, redis-server 6.2.14, 3 rounds): add_unique() 634 000/s
unlabelled, 489 000/s with one label; naive 3 700 events/s (170x / 131x slower). The flush of
1 000 x 1 000 values: 8.7 s wall, 2.3 s client CPU, 5.9 s Redis CPU, 93 MB sent; naive: 70 s,
59 s, 9.2 s, 401 MB (0.12x its wall time). One 60 s slice's HLL: 136 B (1-10 values), 584 B
(100), 2 120 B (1 000), 12 392 B from ~2 000 (dense); an exact SET: 6.5 kB at 100, 56 kB at
the cap of 1 000, beside its HLL.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import redis

from figures import Figure, emit, json_flag  # beside this file (python puts it on sys.path)
from slicecount import Recorder, Settings, Store
from slicecount.embedded import EmbeddedRedis

PRECISIONS = Settings().precisions  # the default ladder
UNIQUE = tuple(p for p in PRECISIONS if p >= 60)  # the default unique precisions
PIPELINE = 10_000
POOL = [f"10.0.{i >> 8 & 255}.{i & 255}" for i in range(10_000)]  # client addresses
LABELS = {"route": "/users/{id}"}


def add_rate(recorder: Recorder, adds: int, labelled: bool) -> float:
    add_unique, pool, labels = recorder.add_unique, POOL, LABELS
    size = len(pool)
    started = time.perf_counter()
    if labelled:
        for i in range(adds):
            add_unique("http.unique_clients", pool[i % size], labels)
    else:
        for i in range(adds):
            add_unique("bench.users", pool[i % size])
    elapsed = time.perf_counter() - started
    recorder.flush()
    return adds / elapsed


def naive_rate(client: redis.Redis, events: int) -> float:
    """What the book's style would do: every event to Redis at once, all precisions in one
    round trip (a pipeline, no transaction: PFADD is idempotent)."""
    now = int(time.time())
    keys = [f"naive:{p}:bench.users:{now - now % p}" for p in UNIQUE]
    started = time.perf_counter()
    for i in range(events):
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.pfadd(key, POOL[i % len(POOL)])
        pipe.execute()
    return events / (time.perf_counter() - started)


def server(client: redis.Redis) -> dict[str, float]:
    info: dict[str, Any] = client.info("all")
    return {
        "redis_cpu": float(info["used_cpu_sys"]) + float(info["used_cpu_user"]),
        "bytes": float(info["total_net_input_bytes"]),
    }


def timed(client: redis.Redis, action: Any) -> dict[str, float]:
    """Wall and client CPU of ``action()``, and what Redis spent and received meanwhile."""
    before = server(client)
    cpu, wall = time.process_time(), time.perf_counter()
    action()
    figures = {"wall": time.perf_counter() - wall, "client_cpu": time.process_time() - cpu}
    after = server(client)
    figures.update({k: after[k] - before[k] for k in before})
    return figures


def recorder_flush(store: Store, series: int, values: int, now: int) -> dict[str, float]:
    recorder = Recorder(
        store, flush_interval=3600, max_pending=series * values + 1, max_series_per_metric=series
    )
    for s in range(series):
        labels = {"i": str(s)}
        for v in range(values):
            recorder.add_unique("bench.flush", f"10.{s >> 8 & 255}.{s & 255}.{v}", labels, now=now)
    figures = timed(store_client(store), lambda: _flushed(recorder))
    recorder.close()
    return figures


def _flushed(recorder: Recorder) -> None:
    assert recorder.flush(), "flush failed"


def naive_flush(client: redis.Redis, series: int, values: int, now: int) -> dict[str, float]:
    def send() -> None:
        pipe = client.pipeline(transaction=False)
        queued = 0
        for s in range(series):
            for p in UNIQUE:
                key = f"naive:{p}:bench.flush{{i={s}}}:{now - now % p}"
                for v in range(values):
                    pipe.pfadd(key, f"10.{s >> 8 & 255}.{s & 255}.{v}")
                queued += values
                if queued >= PIPELINE:
                    pipe.execute()
                    queued = 0
        pipe.execute()

    return timed(client, send)


_clients: dict[int, redis.Redis] = {}


def store_client(store: Store) -> redis.Redis:
    """A plain client on the store's server, for INFO (one per store)."""
    client = _clients.get(id(store))
    if client is None:
        client = _clients[id(store)] = redis.Redis.from_url(store.settings.redis_url)
    return client


def memory(url: str, cardinalities: list[int], now: int) -> list[tuple[int, int, int, int]]:
    """(distinct values, HLL bytes, exact SET bytes, exact HLL bytes) of one slice at 60 s."""
    settings = Settings(redis_url=url, unique_precisions=(60,))
    client = redis.Redis.from_url(url, decode_responses=True)
    rows = []
    with Store(settings) as store:
        for n in cardinalities:
            values = [f"user-{i}" for i in range(n)]
            found = {}
            for exact in (False, True):
                client.flushall()
                store.add_unique("bench.memory", values, exact=exact, now=now)
                for key in client.scan_iter(count=1000):
                    kind = str(client.type(key))
                    if kind in ("string", "set"):
                        found[(exact, kind)] = int(client.memory_usage(key, samples=0) or 0)
            rows.append((n, found[(False, "string")], found.get((True, "set"), 0),
                         found[(True, "string")]))  # fmt: skip
    client.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adds", type=int, default=1_000_000)
    parser.add_argument("--naive-events", type=int, default=20_000)
    parser.add_argument("--series", type=int, default=1_000)
    parser.add_argument("--values", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memory", default="1,10,100,1000,2000,5000,100000")
    json_flag(parser)
    args = parser.parse_args()
    now = int(time.time())

    with EmbeddedRedis() as srv, Store.from_url(srv.url) as store:
        client = redis.Redis.from_url(srv.url, socket_timeout=600)
        recorder = Recorder(store, flush_interval=3600)
        plain, labelled, naive, flushes, naive_flushes = [], [], [], [], []
        for r in range(args.rounds):
            plain.append(add_rate(recorder, args.adds, labelled=False))
            labelled.append(add_rate(recorder, args.adds, labelled=True))
            naive.append(naive_rate(client, args.naive_events))
            both: list[Callable[[], None]] = [
                lambda: flushes.append(recorder_flush(store, args.series, args.values, now)),
                lambda: naive_flushes.append(naive_flush(client, args.series, args.values, now)),
            ]
            for step in both if r % 2 == 0 else both[::-1]:
                client.flushall()
                step()
        recorder.close()
        rows = memory(srv.url, [int(n) for n in args.memory.split(",")], now)
        client.close()
        for extra in _clients.values():
            extra.close()

    add_plain, add_labelled, per_event = map(statistics.median, (plain, labelled, naive))
    flush = {k: statistics.median(f[k] for f in flushes) for k in flushes[0]}
    base = {k: statistics.median(f[k] for f in naive_flushes) for k in naive_flushes[0]}
    total = args.series * args.values
    print(f"Recorder.add_unique() unlabelled {add_plain:>12,.0f} adds/s  (target >= 500,000)")
    print(f"Recorder.add_unique() 1 label    {add_labelled:>12,.0f} adds/s")
    print(f"naive PFADD per event            {per_event:>12,.0f} events/s, "
          f"{len(UNIQUE)} PFADDs in one round trip each")  # fmt: skip
    print(f"  add_unique() is {add_plain / per_event:,.0f}x (unlabelled) / "
          f"{add_labelled / per_event:,.0f}x (labelled) the naive per-event rate")  # fmt: skip
    print(f"\nflush of {args.series:,} series x {args.values:,} values x {len(UNIQUE)} precisions")
    print(f"{'':26}{'wall':>9}{'client CPU':>12}{'Redis CPU':>11}{'sent':>11}")
    for label, f in (("Recorder.flush()", flush), ("naive PFADD per value", base)):
        print(f"{label:26}{f['wall']:>7.2f} s{f['client_cpu']:>10.2f} s"
              f"{f['redis_cpu']:>9.2f} s{f['bytes'] / 1e6:>8.1f} MB")  # fmt: skip
    print(f"  the flush takes {flush['wall'] / base['wall']:.2f}x the naive wall time, "
          f"{flush['client_cpu'] / base['client_cpu']:.2f}x its client CPU, "
          f"{flush['redis_cpu'] / base['redis_cpu']:.2f}x its Redis CPU; unpipelined, the naive "
          f"way would take {total / per_event:,.0f} s")  # fmt: skip
    print("\nRedis memory of one slice at precision 60 (MEMORY USAGE, bytes)")
    print(f"{'distinct':>10}{'HLL':>9}{'exact: SET':>12}{'+ its HLL':>11}")
    for n, hll, exact_set, exact_hll in rows:
        print(f"{n:>10,}{hll:>9,}{exact_set:>12,}{exact_hll:>11,}")
    if args.json:
        at_1000 = next((r for r in rows if r[0] == 1000), rows[-1])
        emit("unique", [
            Figure("add_unique", "Recorder.add_unique() unlabelled", add_plain, "adds/s", "higher"),
            Figure("add_unique_labelled", "Recorder.add_unique() 1 label", add_labelled,
                   "adds/s", "higher"),
            Figure("naive_event", "naive PFADD per event", per_event, "events/s", "higher"),
            Figure("flush", f"flush of {total:,} values", flush["wall"], "s", "lower"),
            Figure("naive_flush", f"naive PFADDs of {total:,} values", base["wall"], "s", "lower"),
            Figure("memory_hll", f"HLL of {at_1000[0]:,} values", at_1000[1], "bytes", "lower"),
        ])  # fmt: skip


if __name__ == "__main__":
    main()
