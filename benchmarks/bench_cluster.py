"""One flush of 10 000 series on one Redis server and on a 3-master Redis Cluster, in one run.

    python benchmarks/bench_cluster.py [--series 10000] [--rounds 10] [--writers 1,4]
                                       [--layouts book,blocks] [--json]

Three targets run side by side: a standalone redis-server as most deployments run it (one
shard: a flush is one or two transactions); the same with the cluster's key layout and a
replica (64 shards: a flush is 64 transactions, each fed to the replica as on a cluster
master), which separates what the layout costs from what the cluster itself costs; and a
cluster of 3 masters with a replica each (tests/topologies.py). For each, WRITERS processes
(default 1, then 4) each hold a Recorder with their share of SERIES distinct series
(``bench.flush{s="i"}``: 10 000 series-flushes per round in all, whatever the number of
writers) and flush together. Rounds alternate between the targets, so all see the same
machine weather; a warm-up round first creates the keys.

Measured per flush: the wall time from "go" until every writer has Redis' answer (p50, p99),
the CPU each master spent (INFO cpu: used_cpu_user + used_cpu_sys, deltas), INFO
commandstats per master (usec of HINCRBY, ZADD, EXEC: EXEC's includes the commands queued in
it, and usec is wall time inside the command, so a preempted command counts its wait), the
replicas' CPU and the writers' own CPU. From these: Redis CPU per series-flush (one series
written at 7 precisions: 7 HINCRBY and its registry members), and each master's share.

Writer processes, not threads: a Recorder's flush is Python (preparing chunks) then I/O, and
threads of one process would share one core through the GIL. On a 2-core machine 3 masters,
3 replicas and the writers cannot all run at once, so the wall time here cannot show the
cluster's parallel speedup; the CPU split per master is what lets a real deployment (a core
per master) scale, and is what this reports. No target: the issue asks for the figures, and
quotes ~11 µs of Redis CPU per series-flush on one server, which the standalone line checks.

Each layout (``--layouts``, both by default) runs on servers of its own, its rounds alternating
with the other's: the book's (7 HINCRBY a series) and the blocks layout's (one HINCRBY into the
series' open hash, one registry member, and a writer's mark per chunk), whose Redis CPU per
series-flush issue 24 wants no higher than the book's.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import multiprocessing
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import redis

from figures import Figure, emit, json_flag  # beside this file (python puts it on sys.path)
from slicecount import Recorder, Store
from slicecount.config import CLUSTER_SHARDS, Settings
from slicecount.embedded import EmbeddedRedis

# tests.topologies spawns the cluster; it lives with the tests, not in the package
sys.path.append(str(Path(__file__).resolve().parent.parent))
from tests.topologies import ClusterGroup, wait_until

T0 = 1_700_000_000
COMMANDS = ("hincrby", "zadd", "exec", "evalsha", "set")
"""The commandstats shown per master (a flush runs no script: evalsha shows only if one ran)."""


@dataclass(frozen=True)
class Target:
    """Where the writers flush: a URL, its shard count and the servers to watch."""

    name: str
    url: str
    shards: int | None  # None: the URL's default (1 on one server, 64 on a cluster)
    masters: list[int]
    replicas: list[int]
    layout: str = "book"


def writer(target: Target, index: int, writers: int, series: int, conn: Connection) -> None:
    """One writer process: on each round's time, count its share of the series, then flush
    on "go" and answer (flushed, CPU seconds of the flush)."""
    settings = Settings(redis_url=target.url, socket_timeout=60, layout=target.layout)
    if target.shards is not None:
        settings = replace(settings, shards=target.shards)
    store = Store(settings)
    recorder = Recorder(store, flush_interval=3600, max_series_per_metric=series)
    labels = [{"s": i} for i in range(index, series, writers)]
    while (now := conn.recv()) is not None:
        for one in labels:
            recorder.add("bench.flush", 1, one, now=now)
        conn.send("ready")
        conn.recv()
        cpu = time.process_time()
        flushed = recorder.flush()
        conn.send((flushed, time.process_time() - cpu))
    recorder.close()
    store.close()


@dataclass
class Sample:
    """What one server did between two looks: CPU seconds and commandstats (calls, usec)."""

    cpu: float
    stats: dict[str, tuple[int, int]]

    @staticmethod
    def of(port: int) -> Sample:
        with redis.Redis(port=port, decode_responses=True) as client:
            cpu: dict[str, Any] = client.info("cpu")
            raw: dict[str, Any] = client.info("commandstats")
        stats = {
            k.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"])) for k, v in raw.items()
        }
        return Sample(float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]), stats)

    def minus(self, before: Sample) -> Sample:
        stats = {
            name: (
                calls - before.stats.get(name, (0, 0))[0],
                usec - before.stats.get(name, (0, 0))[1],
            )
            for name, (calls, usec) in self.stats.items()
        }
        return Sample(self.cpu - before.cpu, stats)


@dataclass
class Flushes:
    """The rounds of one (topology, number of writers)."""

    walls: list[float] = field(default_factory=list)
    client_cpu: list[float] = field(default_factory=list)
    masters: list[list[Sample]] = field(default_factory=list)  # per round, per master
    replicas_cpu: list[float] = field(default_factory=list)


class Writers:
    """WRITERS processes flushing their shares of the series to one topology together."""

    def __init__(self, target: Target, count: int, series: int) -> None:
        spawn = multiprocessing.get_context("spawn")  # a fresh interpreter: nothing inherited
        self.masters, self.replicas = target.masters, target.replicas
        self.pipes: list[Connection] = []
        self.processes: list[multiprocessing.process.BaseProcess] = []
        for index in range(count):
            mine, theirs = spawn.Pipe()
            process = spawn.Process(target=writer, args=(target, index, count, series, theirs))
            process.start()
            self.pipes.append(mine)
            self.processes.append(process)
        self.flushes = Flushes()

    def round(self, now: int, record: bool = True) -> None:
        for pipe in self.pipes:
            pipe.send(now)
        for pipe in self.pipes:
            assert pipe.recv() == "ready"
        before = [Sample.of(port) for port in self.masters]
        replicas_before = sum(Sample.of(port).cpu for port in self.replicas)
        started = time.perf_counter()
        for pipe in self.pipes:
            pipe.send("go")
        answers = [pipe.recv() for pipe in self.pipes]
        wall = time.perf_counter() - started
        assert all(flushed for flushed, _ in answers), "a flush failed"
        after = [Sample.of(port) for port in self.masters]
        replicas_cpu = sum(Sample.of(port).cpu for port in self.replicas) - replicas_before
        if record:
            self.flushes.walls.append(wall)
            self.flushes.client_cpu.append(sum(cpu for _, cpu in answers))
            self.flushes.masters.append([a.minus(b) for a, b in zip(after, before, strict=True)])
            self.flushes.replicas_cpu.append(replicas_cpu)

    def close(self) -> None:
        for pipe in self.pipes:
            pipe.send(None)
        for process in self.processes:
            process.join(60)


def p99(values: list[float]) -> float:
    """The 99th percentile (with few rounds, close to the slowest)."""
    return (
        statistics.quantiles(values, n=100, method="inclusive")[98]
        if len(values) > 1
        else values[0]
    )


@dataclass(frozen=True)
class Summary:
    wall_p50: float
    wall_p99: float
    cpu_per_master: list[float]  # median CPU seconds per flush, per master
    redis_cpu: float  # median total over the masters, seconds per flush
    replicas_cpu: float
    client_cpu: float


def summarize(flushes: Flushes) -> Summary:
    per_master = [
        statistics.median(rounds[m].cpu for rounds in flushes.masters)
        for m in range(len(flushes.masters[0]))
    ]
    return Summary(
        wall_p50=statistics.median(flushes.walls),
        wall_p99=p99(flushes.walls),
        cpu_per_master=per_master,
        redis_cpu=statistics.median(sum(s.cpu for s in rounds) for rounds in flushes.masters),
        replicas_cpu=statistics.median(flushes.replicas_cpu),
        client_cpu=statistics.median(flushes.client_cpu),
    )


def report(name: str, flushes: Flushes, series: int) -> Summary:
    summary = summarize(flushes)
    print(
        f"  {name:<11} wall p50 {summary.wall_p50 * 1000:7.0f} ms  p99 "
        f"{summary.wall_p99 * 1000:7.0f} ms   Redis CPU {summary.redis_cpu * 1000:6.0f} ms "
        f"({summary.redis_cpu * 1e6 / series:5.1f} µs/series)   replicas "
        f"{summary.replicas_cpu * 1000:4.0f} ms   writers {summary.client_cpu * 1000:5.0f} ms"
    )
    for m, cpu in enumerate(summary.cpu_per_master):
        rounds = [r[m].stats for r in flushes.masters]
        shown = []
        for command in COMMANDS:
            calls = statistics.median(s.get(command, (0, 0))[0] for s in rounds)
            usec = statistics.median(s.get(command, (0, 0))[1] for s in rounds)
            if calls:
                shown.append(f"{command} {calls:,.0f} calls {usec / 1000:5.1f} ms")
        share = cpu / summary.redis_cpu if summary.redis_cpu else 0.0
        print(f"    master {m + 1}: CPU {cpu * 1000:6.1f} ms ({share:4.0%})  " + ", ".join(shown))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--writers", default="1,4", help="comma-separated writer process counts (default 1,4)"
    )
    parser.add_argument(
        "--layouts", default="book,blocks", help="comma-separated layouts (default book,blocks)"
    )
    json_flag(parser)
    args = parser.parse_args()
    counts = [int(n) for n in args.writers.split(",")]
    layouts = args.layouts.split(",")

    with contextlib.ExitStack() as stack:
        targets: dict[str, list[Target]] = {}
        for layout in layouts:
            alone, sharded, primary = (stack.enter_context(EmbeddedRedis()) for _ in range(3))
            replica = stack.enter_context(
                EmbeddedRedis(args=["--replicaof", "127.0.0.1", str(primary.port)])
            )
            cluster = stack.enter_context(ClusterGroup())
            synced = functools.partial(linked, replica.port)
            wait_until(synced, "the replica of the 64-shard server to sync")
            cluster_replicas = [n.port for n in cluster.nodes if n.port not in cluster.seeds]
            targets[layout] = [
                Target("standalone", alone.url, None, [alone.port], [], layout),
                Target("64 shards", sharded.url, CLUSTER_SHARDS, [sharded.port], [], layout),
                Target(
                    "+ replica", primary.url, CLUSTER_SHARDS, [primary.port], [replica.port],
                    layout,
                ),
                Target("cluster", cluster.url, None, cluster.seeds, cluster_replicas, layout),
            ]  # fmt: skip
        groups = {
            (t.layout, t.name, n): Writers(t, n, args.series)
            for n in counts
            for ts in targets.values()
            for t in ts
        }
        try:
            for group in groups.values():
                group.round(T0, record=False)  # warm-up: creates every key
            for r in range(1, args.rounds + 1):
                for group in groups.values():  # alternating: the same weather for all
                    group.round(T0 + r)
        finally:
            for group in groups.values():
                group.close()

    figures: list[Figure] = []
    cpu: dict[tuple[str, str, int], float] = {}
    for layout in layouts:
        increments = 7 if layout == "book" else 1
        print(
            f"\n{layout} layout: flush of {args.series:,} series ({args.rounds} rounds; "
            f"{increments * args.series:,} HINCRBY a round) on: standalone, one server (1 "
            "shard); 64 shards, one server with the cluster's key layout; + replica, the same "
            "feeding a replica; cluster, 3 masters with a replica each"
        )
        for n in counts:
            figures += report_writers(layout, targets[layout], groups, n, args.series, cpu)
    if "book" in layouts and "blocks" in layouts:
        print("\nblocks / book, Redis CPU per series-flush:")
        for n in counts:
            ratios = ", ".join(
                f"{t.name} {cpu['blocks', t.name, n] / cpu['book', t.name, n]:.2f}x"
                for t in targets["book"]
            )
            print(f"  {n} writer{'s' if n > 1 else ''}: {ratios}")
            figures.append(
                lower(f"blocks_vs_book_cpu_{n}w", f"blocks / book Redis CPU per series-flush, "
                      f"standalone, {n} writer{'s' if n > 1 else ''}",
                      cpu["blocks", "standalone", n] / cpu["book", "standalone", n], "x")
            )  # fmt: skip
    if args.json:
        emit("cluster", figures)


def report_writers(
    layout: str,
    targets: list[Target],
    groups: dict[tuple[str, str, int], Writers],
    n: int,
    series: int,
    cpu: dict[tuple[str, str, int], float],
) -> list[Figure]:
    """The lines and figures of one layout and writer count (the book's keys unprefixed)."""
    print(f"\n{n} writer process{'es' if n > 1 else ''} ({series // n:,} series each)")
    got = {t.name: report(t.name, groups[layout, t.name, n].flushes, series) for t in targets}
    for name, summary in got.items():
        cpu[layout, name, n] = summary.redis_cpu
    one, spread = got["standalone"], got["cluster"]
    ratio = spread.wall_p50 / one.wall_p50
    busiest = max(spread.cpu_per_master)
    walls = ", ".join(f"{t} {got[t].wall_p50 / one.wall_p50:.2f}x" for t in list(got)[1:])
    steps = ", ".join(
        f"{after} {got[after].redis_cpu / got[before].redis_cpu:.2f}x"
        for before, after in zip(list(got), list(got)[1:], strict=False)
    )
    print(
        f"  wall time (p50) against standalone: {walls}\n"
        f"  Redis CPU: busiest cluster master {busiest * 1000:.0f} ms = "
        f"{busiest / one.redis_cpu:.0%} of the single server's {one.redis_cpu * 1000:.0f} ms; "
        f"the 3 masters together {spread.redis_cpu / one.redis_cpu:.2f}x it "
        f"(step by step: {steps})"
    )
    label = f"{n} writer{'s' if n > 1 else ''}" + ("" if layout == "book" else f", {layout}")
    key = "" if layout == "book" else f"{layout}_"
    return [
        lower(f"{key}standalone_{n}w", f"standalone flush, {label} (p50)", one.wall_p50, "s"),
        lower(f"{key}cluster_{n}w", f"cluster flush, {label} (p50)", spread.wall_p50, "s"),
        lower(f"{key}cluster_p99_{n}w", f"cluster flush, {label} (p99)", spread.wall_p99, "s"),
        lower(f"{key}cluster_vs_standalone_{n}w", f"cluster / standalone, {label}", ratio, "x"),
        lower(f"{key}standalone_cpu_{n}w", f"standalone Redis CPU per series, {label}",
              one.redis_cpu * 1e6 / series, "µs"),
        lower(f"{key}cluster_cpu_{n}w", f"cluster Redis CPU per series (3 masters), {label}",
              spread.redis_cpu * 1e6 / series, "µs"),
        lower(f"{key}busiest_master_{n}w", f"busiest master / single server CPU, {label}",
              busiest / one.redis_cpu, "x"),
    ]  # fmt: skip


def lower(key: str, label: str, value: float, unit: str) -> Figure:
    """A figure where lower is better (all of this benchmark's)."""
    return Figure(key, label, value, unit, "lower")


def linked(port: int) -> bool:
    with redis.Redis(port=port, decode_responses=True) as client:
        return bool(client.info("replication").get("master_link_status") == "up")


if __name__ == "__main__":
    main()
