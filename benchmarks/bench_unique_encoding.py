"""How a flush should send unique values: three encodings against one private redis-server.

    python benchmarks/bench_unique_encoding.py [--series 1000] [--values 1000] [--rounds 3]
        [--sweep 1,10,100,1000,10000] [--sweep-total 100000] [--skip-naive]

A flush holds, per series, the distinct values of one slice, written at the 5 default unique
precisions (60 s .. 1 day). Encodings:
  naive   one PFADD per value per precision (pipelined, 10 000 commands a round trip);
  pfadd   one PFADD per (series, slice, precision) with all its values (what write_uniques does);
  sketch  the values hashed once in Python (slicecount.core.hll), then per series one SET of the
          sketch into a scratch key, one PFMERGE per precision, one DEL.
Every encoding also sends one EXPIREAT per key. Each round runs every encoding once, in turn,
on an emptied server; figures are medians over rounds, and the ratios compare one run's.
Measured: client CPU (process time), Redis CPU (INFO used_cpu_sys + used_cpu_user), time in
commands (INFO commandstats usec), wall time, bytes sent (INFO total_net_input_bytes), memory
of the keys written (used_memory), and the distinct counts of a few keys, equal across all.

On this machine (2 shared cores, redis-server 6.2.14, 3 rounds), per value x 5 precisions:
1 000 series x 1 000 values, new slices: naive 53.6 us client / 9.0 us Redis / 300 B sent,
pfadd 2.5 us / 6.1 us / 81 B, sketch 3.1 us / 9.9 us / 2.6 B (1.25x pfadd's client CPU, 1.62x
its Redis CPU, 1.34x its wall time, 0.03x its bytes); slices already holding 10 earlier flushes:
sketch 1.50x client, 1.09x Redis, 1.47x wall. The sweep (sketch / pfadd): below ~2 000 values a
series-slice (a sparse sketch; PFMERGE into a sparse key re-inserts every register) the sketch
costs 1.1-1.6x the client CPU and 1.3-10x the Redis CPU; at 3 000 and 10 000 (dense) it costs
0.03-0.41x the Redis CPU and 1.0-1.3x the client CPU. Bytes: 0.55x at 10 values, 0.02-0.12x
from 100. With the hash in C (mmhash2) the sketch's client CPU is 0.43-0.55x pfadd's.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from importlib.util import find_spec
from typing import Any

import redis

from slicecount.core.hll import SEED, Sketch
from slicecount.embedded import EmbeddedRedis

PRECISIONS = (60, 300, 3600, 18000, 86400)
NOW = int(time.time()) // 86400 * 86400  # every precision's slice starts here
EXPIRE_AT = NOW + 10 * 86400  # in the future: an EXPIREAT in the past deletes the key
PIPELINE = 10_000  # commands a round trip
Values = dict[str, list[str]]  # series id -> its slice's distinct values


def hll_key(precision: int, series: str) -> str:
    return f"u:{precision}:{series}:{NOW - NOW % precision}"


def naive(client: redis.Redis, data: Values) -> None:
    pipe = client.pipeline(transaction=False)
    queued = 0
    for series, values in data.items():
        for precision in PRECISIONS:
            key = hll_key(precision, series)
            for value in values:
                pipe.pfadd(key, value)
            pipe.expireat(key, EXPIRE_AT)
            queued += len(values) + 1
            if queued >= PIPELINE:
                pipe.execute()
                queued = 0
    pipe.execute()


def pfadd(client: redis.Redis, data: Values) -> None:
    pipe = client.pipeline(transaction=False)
    queued = 0
    for series, values in data.items():
        for precision in PRECISIONS:
            key = hll_key(precision, series)
            pipe.pfadd(key, *values)
            pipe.expireat(key, EXPIRE_AT)
        queued += len(values)
        if queued >= 20_000:  # write_uniques's BATCH_VALUES
            pipe.execute()
            queued = 0
    pipe.execute()


def send_sketches(client: redis.Redis, sketches: dict[str, bytes], data: Values) -> None:
    pipe = client.pipeline(transaction=False)
    queued = 0
    for series, values in data.items():
        scratch = f"scratch:{series}"  # on a cluster: keys.scratch(shard, token), same slot
        pipe.set(scratch, sketches[series])
        for precision in PRECISIONS:
            key = hll_key(precision, series)
            pipe.pfmerge(key, scratch)
            pipe.expireat(key, EXPIRE_AT)
        pipe.delete(scratch)
        queued += len(values)
        if queued >= 20_000:
            pipe.execute()
            queued = 0
    pipe.execute()


def sketch_c(client: redis.Redis, data: Values) -> None:
    """The sketch with the hash in C (PyPI's mmhash2, if installed): what a C hash would save."""
    import mmhash2  # type: ignore[import-not-found]  # optional, measured only

    hash64a = mmhash2.murmurhash64a
    sketches = {}
    for series, values in data.items():
        built = Sketch()
        built.add_hashes([hash64a(v, SEED) for v in values])
        sketches[series] = built.encode()
    send_sketches(client, sketches, data)


def sketch(client: redis.Redis, data: Values) -> None:
    send_sketches(client, {s: Sketch(values).encode() for s, values in data.items()}, data)


ENCODINGS: dict[str, Callable[[redis.Redis, Values], None]] = {
    "naive": naive,
    "pfadd": pfadd,
    "sketch": sketch,
    "sketch-c": sketch_c,
}


def make_values(series: int, per_slice: int) -> Values:
    """IPv4-like values (12-15 bytes), distinct within a series, shared across series."""
    return {
        f"s{s}": [f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}" for i in range(s, s + per_slice)]
        for s in range(series)
    }


def server_figures(client: redis.Redis) -> dict[str, float]:
    info: dict[str, Any] = client.info("all")
    return {
        "cpu": float(info["used_cpu_sys"]) + float(info["used_cpu_user"]),
        "usec": sum(float(v["usec"]) for k, v in info.items() if k.startswith("cmdstat_")),
        "bytes": float(info["total_net_input_bytes"]),
        "memory": float(info["used_memory"]),
    }


def measure(
    client: redis.Redis, encoding: str, data: Values, warm: bytes | None
) -> dict[str, float]:
    client.flushall()
    if warm is not None:  # the slices already hold earlier flushes' values
        pipe = client.pipeline(transaction=False)
        for series in data:
            for precision in PRECISIONS:
                pipe.set(hll_key(precision, series), warm)
        pipe.execute()
    client.config_resetstat()
    before = server_figures(client)
    cpu, wall = time.process_time(), time.perf_counter()
    ENCODINGS[encoding](client, data)
    figures = {"client": time.process_time() - cpu, "wall": time.perf_counter() - wall}
    after = server_figures(client)
    figures.update({k: after[k] - before[k] for k in before})
    figures["usec"] /= 1e6
    probe = list(data)[:: max(1, len(data) // 5)]
    figures["counts"] = hash(tuple(client.pfcount(hll_key(60, s)) for s in probe))
    return figures


def run(
    client: redis.Redis,
    data: Values,
    rounds: int,
    encodings: Sequence[str],
    warm: bytes | None = None,
) -> dict[str, dict[str, float]]:
    results: dict[str, list[dict[str, float]]] = {e: [] for e in encodings}
    for r in range(rounds):
        order = encodings if r % 2 == 0 else encodings[::-1]  # alternate who goes first
        for encoding in order:
            results[encoding].append(measure(client, encoding, data, warm))
    counts = {m["counts"] for rs in results.values() for m in rs}
    assert len(counts) == 1, "the encodings disagree on the distinct counts"
    return {
        e: {k: statistics.median(m[k] for m in rs) for k in rs[0] if k != "counts"}
        for e, rs in results.items()
    }


def report(title: str, values: int, medians: dict[str, dict[str, float]]) -> None:
    print(f"\n{title} ({values:,} values x {len(PRECISIONS)} precisions; medians)")
    print(
        f"{'':8}{'client CPU':>12}{'Redis CPU':>11}{'in cmds':>10}{'wall':>9}"
        f"{'sent':>11}{'memory':>10}   per value: client / Redis / bytes"
    )
    for encoding, m in medians.items():
        print(
            f"{encoding:8}{m['client']:>10.3f} s{m['cpu']:>9.3f} s{m['usec']:>8.3f} s"
            f"{m['wall']:>7.3f} s{m['bytes'] / 1e6:>8.2f} MB{m['memory'] / 1e6:>7.2f} MB"
            f"   {m['client'] / values * 1e6:6.2f} us / {m['cpu'] / values * 1e6:5.2f} us"
            f" / {m['bytes'] / values:6.1f} B"
        )
    base = medians["pfadd"]
    for encoding, m in medians.items():
        if encoding != "pfadd":
            print(
                f"  {encoding} / pfadd: client {m['client'] / base['client']:.2f}x, Redis CPU "
                f"{m['cpu'] / base['cpu']:.2f}x, wall {m['wall'] / base['wall']:.2f}x, "
                f"bytes {m['bytes'] / base['bytes']:.2f}x, "
                f"memory {m['memory'] / base['memory']:.2f}x"
            )


def compact(per_slice: int, mode: str, values: int, medians: dict[str, dict[str, float]]) -> None:
    """One sweep line: per value, pfadd's client CPU / Redis CPU / bytes, then sketch's ratios."""
    b, k = medians["pfadd"], medians["sketch"]
    print(
        f"{per_slice:>7,} {mode:6} pfadd {b['client'] / values * 1e6:5.2f} us "
        f"{b['cpu'] / values * 1e6:5.2f} us {b['bytes'] / values:5.1f} B | sketch/pfadd: client "
        f"{k['client'] / b['client']:4.2f}x Redis {k['cpu'] / b['cpu']:4.2f}x "
        f"wall {k['wall'] / b['wall']:4.2f}x bytes {k['bytes'] / b['bytes']:4.2f}x"
    )


def warm_blob(values: int) -> bytes:
    """A slice that already holds ``values`` other distinct values (earlier flushes)."""
    return Sketch(f"earlier-{i}" for i in range(values)).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=1_000)
    parser.add_argument("--values", type=int, default=1_000, help="distinct values per slice")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sweep", default="1,10,100,300,1000,3000,10000", help="values/slice")
    parser.add_argument("--sweep-total", type=int, default=100_000)
    parser.add_argument("--earlier", type=int, default=10, help="flushes already in a warm slice")
    parser.add_argument("--skip-naive", action="store_true")
    args = parser.parse_args()
    encodings = ["pfadd", "sketch"] if args.skip_naive else ["naive", "pfadd", "sketch"]
    if find_spec("mmhash2"):
        encodings.append("sketch-c")

    with EmbeddedRedis() as server:
        client = redis.Redis.from_url(server.url, socket_timeout=600)
        print("redis-server", client.info("server")["redis_version"])
        data = make_values(args.series, args.values)
        values = args.series * args.values
        title = f"{args.series:,} series x {args.values:,} values"
        report(f"{title}, new slices", values, run(client, data, args.rounds, encodings))
        warm = warm_blob(args.earlier * args.values)
        report(
            f"{title}, slices holding {args.earlier} earlier flushes",
            values,
            run(client, data, args.rounds, encodings, warm),
        )
        print(f"\nsweep: {args.sweep_total:,} values a flush, x {len(PRECISIONS)} precisions")
        for per_slice in (int(n) for n in args.sweep.split(",") if n):
            series = max(1, args.sweep_total // per_slice)
            data = make_values(series, per_slice)
            for mode, blob in (("new", None), ("warm", warm_blob(args.earlier * per_slice))):
                medians = run(client, data, args.rounds, ["pfadd", "sketch"], blob)
                compact(per_slice, mode, series * per_slice, medians)
        client.close()


if __name__ == "__main__":
    main()
