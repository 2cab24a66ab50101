"""The blocks layout's compaction beside the book's layout on the same seeded traffic: Redis
time of the cleaner per second of traffic, its slowest call, and the bytes the history takes.

    python benchmarks/bench_compaction.py [--routes 40] [--minutes 120] [--json]

Two hours of seeded traffic of a 40-route app (``seeded_traffic.py``, as bench_vs_prometheus
writes it) go into two private redis-servers a simulated minute at a time, with a cleaner pass
at each minute's end, as a flushing writer and the sidecar cleaner leave Redis:

- the book's layout (its default settings: 7 precisions, 120 slices each), written with
  ``Store.apply`` and trimmed by the cleaner;
- the blocks layout (the ladder 1 s for 10 min, 5 s for 2 days, 60 s for 31 days, 1 h for 400
  days, 1 day for 5 years), written as its write path writes (``HINCRBY open:<series>
  <second> n`` and ``ZADD known: NX 0 0:<series>``, one MULTI a minute) and compacted by the
  cleaner: every field older than the sealed point (now - 10 s) moves into its series' block.

For each: the Redis time of the passes (the CPU of the server's main thread, where every
command runs, from INFO cpu just before and just after each pass; no writer runs meanwhile),
per second of traffic and per pass, and INFO commandstats' time per command; the slowest
single call (SLOWLOG, every call over 0.5 ms logged) against the 5 ms target; the client's
CPU time in the passes; and, after the two hours, ``used_memory`` and the sum of ``MEMORY
USAGE`` of the keys, per series too.
The cleaner's own figures (series it records each pass) and the passes' leases are deleted
before the bytes are taken: they are not the history of the traffic.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import redis

from figures import Figure, emit, json_flag
from seeded_traffic import generate
from slicecount import Settings, Store
from slicecount.cleaner import Cleaner
from slicecount.core import blocks
from slicecount.core.keys import KeySpace
from slicecount.embedded import EmbeddedRedis

SEED = 24
BLOCKS_LADDER = (1, 5, 60, 3600, 86400)
BLOCKS_RETENTION = {1: 600, 5: 34560, 60: 44640, 3600: 9600, 86400: 1830}
SLOWLOG_US = 500


@dataclass
class Run:
    """What one layout's run measured."""

    layout: str
    passes: int = 0
    redis_us: int = 0  # CPU of the server's main thread in the passes
    calls: Counter[str] = field(default_factory=Counter)
    usec: Counter[str] = field(default_factory=Counter)  # server time per command
    over_2ms: int = 0  # calls SLOWLOG saw hold Redis longer than 2 ms
    over_5ms: int = 0
    slowest_us: int = 0  # SLOWLOG: the longest single call
    slowest_command: str = ""
    held_ms: float = 0.0  # the scripts' own longest hold (PassStats.longest_hold_ms)
    cpu_s: float = 0.0  # the cleaner's client CPU in the passes
    used_memory: int = 0
    key_bytes: int = 0
    keys: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)  # key kind -> MEMORY USAGE bytes
    block_parts: Counter[str] = field(default_factory=Counter)  # header, or a precision's frames
    series: int = 0


def main_thread_cpu(client: redis.Redis) -> float:
    """Seconds of CPU the server's main thread (where every command runs) has used."""
    cpu: dict[str, Any] = client.info("cpu")
    return float(cpu["used_cpu_sys_main_thread"]) + float(cpu["used_cpu_user_main_thread"])


def commandstats(client: redis.Redis) -> dict[str, tuple[int, int]]:
    """command -> (calls, usec) since the server started."""
    stats: dict[str, Any] = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
            for name, v in stats.items()}  # fmt: skip


def blocks_settings(url: str, shards: int = 1) -> Settings:
    """The blocks layout (``Settings.layout``; set on the instance where the setting is not
    there yet: the cleaner reads it with getattr)."""
    base = Settings(
        redis_url=url, precisions=BLOCKS_LADDER, retention=BLOCKS_RETENTION, shards=shards
    )
    try:
        return base.with_changes(layout="blocks")
    except TypeError:
        object.__setattr__(base, "layout", "blocks")
        return base


def book_settings(url: str, shards: int = 1) -> Settings:
    """The book's layout, named: it stopped being the default (a tree from before the setting
    has only the book's)."""
    try:
        return Settings(redis_url=url, shards=shards, layout="book")
    except TypeError:
        return Settings(redis_url=url, shards=shards)


def write_open(client: redis.Redis, keys: KeySpace, counts: dict[str, dict[int, int]]) -> None:
    """One minute of counts as the blocks layout's write path writes them."""
    pipe = client.pipeline(transaction=True)
    for series, seconds in counts.items():
        pipe.zadd(keys.known_for(series), {keys.series_member(series): 0}, nx=True)
        for second, n in seconds.items():
            if n:
                pipe.hincrby(keys.open(series), second, n)
    pipe.execute()


def run(layout: str, routes: int, minutes: int, shards: int = 1) -> Run:
    traffic = generate(routes, 1_700_006_400 + 7200, 7200, SEED)  # a fixed end: same bytes
    measured = Run(layout)
    with EmbeddedRedis() as server:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        client.config_set("slowlog-log-slower-than", SLOWLOG_US)
        client.config_set("slowlog-max-len", 100_000)
        empty = int(client.info("memory")["used_memory"])
        settings = (
            blocks_settings(server.url, shards)
            if layout == "blocks"
            else book_settings(server.url, shards)
        )
        keys = KeySpace(settings.prefix, settings.shards)
        simulated = [float(traffic.start)]
        with Store(settings) as store:
            cleaner = Cleaner(store, clock=lambda: simulated[0])
            for minute_end, counts in traffic.minutes()[:minutes]:
                if layout == "blocks":
                    write_open(client, keys, counts)
                else:
                    store.apply(counts)
                simulated[0] = float(minute_end)
                client.slowlog_reset()
                before = commandstats(client)
                server_cpu = main_thread_cpu(client)
                cpu = time.process_time()
                stats = cleaner.run_once()
                measured.cpu_s += time.process_time() - cpu
                measured.redis_us += round((main_thread_cpu(client) - server_cpu) * 1e6)
                after = commandstats(client)
                assert stats is not None
                measured.passes += 1
                measured.held_ms = max(measured.held_ms, stats.longest_hold_ms)
                for name, (calls, usec) in after.items():
                    was = before.get(name, (0, 0))
                    measured.calls[name] += calls - was[0]
                    measured.usec[name] += usec - was[1]
                for entry in client.slowlog_get(100_000):
                    command = entry["command"]
                    if isinstance(command, bytes):
                        command = command.decode("utf-8", "replace")
                    if "SLOWLOG" in command:
                        continue
                    measured.over_2ms += entry["duration"] > 2000
                    measured.over_5ms += entry["duration"] > 5000
                    if entry["duration"] > measured.slowest_us:
                        measured.slowest_us = entry["duration"]
                        measured.slowest_command = command[:60]
        # not the history: a pass's lease (simulated passes outran their real-time expiry)
        # and the cleaner's own figures
        extra = [k for k in client.scan_iter(count=1000)
                 if k.startswith("cleaner:") or "slicecount.cleaner." in k]  # fmt: skip
        for member_key in client.scan_iter(match="known:*"):
            members = [str(m) for m in client.zrange(member_key, 0, -1)]
            dropped = [m for m in members if "slicecount.cleaner." in m]
            if dropped:
                client.zrem(member_key, *dropped)
        if extra:
            client.delete(*extra)
        measured.used_memory = int(client.info("memory")["used_memory"]) - empty
        raw = redis.Redis.from_url(server.url)
        for key in client.scan_iter(count=1000):
            size = int(client.memory_usage(key, samples=0) or 0)
            measured.keys += 1
            measured.key_bytes += size
            measured.by_kind[key.partition(":")[0]] += size
            if key.startswith("block:"):
                value = raw.get(key)
                measure_block(value if isinstance(value, bytes) else b"", measured.block_parts)
        measured.series = len(traffic.counts)
        client.close()
        raw.close()
    return measured


def measure_block(data: bytes, parts: Counter[str]) -> None:
    """Add a block's bytes to ``parts``: its header and each precision's frames."""
    header = blocks.parse_header(data)
    parts["header"] += header.size
    for section in header.sections:
        parts[f"{section.precision} s frames"] += sum(section.lengths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--routes", type=int, default=40)
    parser.add_argument("--minutes", type=int, default=120, help="of the 2 h (fewer: quicker)")
    parser.add_argument(
        "--shards", type=int, default=1, help="registry shards (more: smaller registries)"
    )
    json_flag(parser)
    args = parser.parse_args()
    book = run("book", args.routes, args.minutes, args.shards)
    blocks = run("blocks", args.routes, args.minutes, args.shards)
    traffic_seconds = 60 * min(args.minutes, 120)
    print(f"{args.routes} routes, {blocks.series} series, {traffic_seconds} s of traffic, "
          f"a pass a simulated minute, {args.shards} shard(s)")  # fmt: skip
    print(f"{'':44}{'book':>14}{'blocks':>14}")
    rows = [
        ("cleaner Redis time per s of traffic (us)",
         book.redis_us / traffic_seconds, blocks.redis_us / traffic_seconds),
        ("cleaner Redis time per pass (ms)",
         book.redis_us / book.passes / 1000, blocks.redis_us / blocks.passes / 1000),
        ("slowest Redis call (ms, SLOWLOG)", book.slowest_us / 1000, blocks.slowest_us / 1000),
        ("longest script hold (ms, own TIME)", book.held_ms, blocks.held_ms),
        ("calls over 2 ms (SLOWLOG)", book.over_2ms, blocks.over_2ms),
        ("calls over 5 ms (SLOWLOG)", book.over_5ms, blocks.over_5ms),
        ("calls in the passes",
         sum(book.calls.values()), sum(blocks.calls.values())),
        ("cleaner client CPU per pass (ms)",
         book.cpu_s / book.passes * 1000, blocks.cpu_s / blocks.passes * 1000),
        ("used_memory after (bytes)", book.used_memory, blocks.used_memory),
        ("MEMORY USAGE, every key (bytes)", book.key_bytes, blocks.key_bytes),
        ("MEMORY USAGE per series (bytes)",
         book.key_bytes / book.series, blocks.key_bytes / blocks.series),
        ("keys", book.keys, blocks.keys),
    ]  # fmt: skip
    for label, a, b in rows:
        print(f"{label:44}{a:>14,.1f}{b:>14,.1f}")
    print(f"slowest call: book {book.slowest_command!r}, blocks {blocks.slowest_command!r}")
    for one in (book, blocks):
        kinds = ", ".join(f"{k} {v:,}" for k, v in one.by_kind.most_common())
        usec = ", ".join(
            f"{k} {v / 1000:,.0f} ms ({one.calls[k]:,})" for k, v in one.usec.most_common(7)
        )
        print(f"{one.layout}: bytes by key kind: {kinds}")
        if one.block_parts:
            parts = ", ".join(f"{k} {v:,}" for k, v in one.block_parts.most_common())
            print(f"{one.layout}: the blocks' values: {parts}")
        print(f"{one.layout}: server time by command (calls; a script's own commands are in it "
              f"and counted again under their names): {usec}")  # fmt: skip
    if args.json:
        emit("compaction", [
            Figure("redis_us_per_traffic_s", "blocks cleaner Redis time per s of traffic",
                   blocks.redis_us / traffic_seconds, "us", "lower"),
            Figure("slowest_call_ms", "blocks cleaner slowest Redis call",
                   blocks.slowest_us / 1000, "ms", "lower"),
            Figure("bytes_per_series", "blocks MEMORY USAGE per series",
                   blocks.key_bytes / blocks.series, "B", "lower"),
            Figure("book_bytes_per_series", "book MEMORY USAGE per series",
                   book.key_bytes / book.series, "B", "lower"),
        ])  # fmt: skip


if __name__ == "__main__":
    main()
