"""Light requests stay fast while heavy ones run: GET / probes against 4 /query requests at
the work budget, on a real uvicorn server and a real redis-server.

    python benchmarks/bench_datasource_load.py [--series 500] [--points 1000] [--heavy 4]
                                               [--rounds 3] [--json]

Each heavy request reads ``series`` x ``points`` one-second slices (500 x 1 000 = the default
budget, max_request_points) and answers ~10 MB of JSON. Each round sends the heavy requests
at once from a child process (so reading their answers does not slow the probes) while this
process sends ``GET /`` on a fixed schedule, one every 40 ms whatever the previous one is
doing; a probe's latency runs from its scheduled time to its answer. Targets (issue 11):
probe p99 within 100 ms over at least 50 probes, each heavy request (queue time included)
within 2 s.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from multiprocessing.connection import Connection
from typing import Any

import httpx2 as httpx
import redis

from figures import Figure, emit, json_flag  # beside this file (python puts it on sys.path)
from slicecount import series_id
from slicecount.embedded import EmbeddedRedis, listen

PROBE_EVERY = 0.040
"""Seconds between two probes' scheduled times."""
MIN_PROBES = 50


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat().replace("+00:00", "Z")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def seed(url: str, series: int, points: int, first: int) -> None:
    """``series`` counters with a count in every one-second slice from ``first``, written in
    the book layout (DESIGN.md) at precision 1 only: seeding all seven would take minutes."""
    client = redis.Redis.from_url(url)
    pipe = client.pipeline(transaction=False)
    for i in range(series):
        member = f"1:{series_id('load', {'i': i})}"
        counts = {t: 1 + (t * 7 + i) % 1000 for t in range(first, first + points)}
        pipe.hset(f"count:{member}", mapping=counts)  # type: ignore[arg-type]
        pipe.zadd("known:", {member: 0})
    pipe.execute()
    client.close()


def serve(redis_url: str, sock: socket.socket, retention: int) -> subprocess.Popen[bytes]:
    """The datasource as users run it: uvicorn, settings from the environment; on ``sock``,
    bound here, so the server that answers on its port is this one."""
    env = {
        **os.environ,
        "SLICECOUNT_REDIS_URL": redis_url,
        "SLICECOUNT_RETENTION": f"1={retention}",
    }
    command = [
        sys.executable, "-m", "uvicorn", "--factory", "slicecount.datasource.app:from_env",
        "--fd", str(sock.fileno()), "--log-level", "warning",
    ]  # fmt: skip
    with sock:
        process = subprocess.Popen(command, env=env, pass_fds=(sock.fileno(),))
        port = sock.getsockname()[1]
    deadline = time.monotonic() + 20
    while True:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/")
            if connection.getresponse().status == 200:
                return process
        except OSError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise SystemExit("the datasource did not start")
        time.sleep(0.1)


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) a process has used, from /proc (None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def heavy_request(port: int, body: bytes) -> tuple[float, int, int]:
    """(seconds from send to the last byte, status, bytes) of one /query."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    started = time.perf_counter()
    connection.request("POST", "/query", body, {"content-type": "application/json"})
    response = connection.getresponse()
    content = response.read()
    elapsed = time.perf_counter() - started
    connection.close()
    return elapsed, response.status, len(content)


def heavy_client(port: int, body: bytes, count: int, pipe: Connection) -> None:
    """In a child process: wait for the start time, send ``count`` requests at once."""
    with ThreadPoolExecutor(count) as pool:
        while (start := pipe.recv()) is not None:
            time.sleep(max(0.0, start - time.time()))
            pipe.send(list(pool.map(lambda _: heavy_request(port, body), range(count))))


async def probes(port: int, start: float, done: Any) -> list[float]:
    """GET / every PROBE_EVERY s from ``start`` (wall clock) until ``done`` is set and at
    least MIN_PROBES were sent; the milliseconds from each one's scheduled time to its
    answer."""
    latencies: list[float] = []

    async def probe(client: httpx.AsyncClient, scheduled: float) -> None:
        response = await client.get("/")
        latencies.append((time.perf_counter() - scheduled) * 1000)
        assert response.status_code == 200, response.text

    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits) as client:
        await asyncio.gather(*(client.get("/") for _ in range(4)))  # connections, code paths
        await asyncio.sleep(max(0.0, start - time.time()))
        origin, sent, tasks = time.perf_counter(), 0, []
        while not done.is_set() or sent < MIN_PROBES:
            scheduled = origin + sent * PROBE_EVERY
            await asyncio.sleep(max(0.0, scheduled - time.perf_counter()))
            tasks.append(asyncio.ensure_future(probe(client, scheduled)))
            sent += 1
        await asyncio.gather(*tasks)
    return latencies


async def round_(port: int, pipe: Connection) -> tuple[list[float], list[tuple[float, int, int]]]:
    """One round: the heavy requests (in the child) and the probes (here) from the same
    instant."""
    start = time.time() + 0.3
    done = asyncio.Event()
    pipe.send(start)
    loop = asyncio.get_running_loop()
    waiting = loop.run_in_executor(None, pipe.recv)
    probing = asyncio.ensure_future(probes(port, start, done))
    heavy: list[tuple[float, int, int]] = await waiting
    done.set()
    return await probing, heavy


Rounds = list[list[tuple[float, int, int]]]


def run(args: argparse.Namespace) -> tuple[list[float], Rounds, float | None]:
    now = int(time.time())
    first = now - args.points - 30  # complete slices, inside retention
    body = json.dumps(
        {
            "range": {"from": iso(first), "to": iso(first + args.points - 1)},
            "targets": [{"refId": "A", "target": "load", "payload": {"precision": "1"}}],
        }
    ).encode()
    with EmbeddedRedis() as server:
        seed(server.url, args.series, args.points, first)
        sock = listen()
        port = sock.getsockname()[1]
        datasource = serve(server.url, sock, retention=args.points + 3600)
        parent, child = multiprocessing.Pipe()
        spawn = multiprocessing.get_context("spawn")
        clients = spawn.Process(target=heavy_client, args=(port, body, args.heavy, child))
        clients.start()
        try:
            elapsed, status, size = heavy_request(port, body)  # warm-up: discovery, code paths
            if status != 200:
                raise SystemExit(f"the heavy request answered {status}")
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            connection.request("POST", "/query", body, {"content-type": "application/json"})
            frames = json.loads(connection.getresponse().read())
            connection.close()
            assert len(frames) == args.series, len(frames)
            assert all(len(f["datapoints"]) == args.points for f in frames)
            print(f"one heavy request alone: {elapsed * 1000:.0f} ms, {size / 1e6:.1f} MB")
            latencies: list[float] = []
            rounds = []
            cpu_before = cpu_seconds(datasource.pid)
            for _ in range(args.rounds):
                probe_ms, heavy = asyncio.run(round_(port, parent))
                assert all(status == 200 for _, status, _ in heavy), heavy
                latencies += probe_ms
                rounds.append(heavy)
            cpu_after = cpu_seconds(datasource.pid)
            parent.send(None)
        finally:
            clients.join(30)
            datasource.terminate()
            datasource.wait(10)
    cpu = None
    if cpu_before is not None and cpu_after is not None:
        cpu = (cpu_after - cpu_before) / (args.rounds * args.heavy)  # probes are negligible
    return latencies, rounds, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=500, help="series per heavy request")
    parser.add_argument("--points", type=int, default=1000, help="one-second slices per series")
    parser.add_argument("--heavy", type=int, default=4, help="heavy requests sent at once")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of heavy requests")
    json_flag(parser)
    args = parser.parse_args()
    latencies, rounds, cpu = run(args)
    p50, p99, worst = statistics.median(latencies), percentile(latencies, 0.99), max(latencies)
    times = [elapsed * 1000 for heavy in rounds for elapsed, _, _ in heavy]
    print(
        f"{args.heavy} heavy requests at once, {args.series} series x {args.points} points "
        f"each ({args.series * args.points:,} points), {args.rounds} rounds"
    )
    for number, heavy in enumerate(rounds, 1):
        each = ", ".join(f"{elapsed * 1000:.0f}" for elapsed, _, _ in sorted(heavy))
        print(f"  round {number}: heavy requests answered in {each} ms")
    print(
        f"  GET / while they run ({len(latencies)} probes, one every "
        f"{PROBE_EVERY * 1000:.0f} ms): p50 {p50:.1f} ms  p99 {p99:.1f} ms  max {worst:.1f} ms"
    )
    if cpu is not None:
        print(f"  datasource CPU per heavy request: {cpu * 1000:.0f} ms (one core at most)")
    print("  targets: probe p99 <= 100 ms, every heavy request <= 2000 ms")
    if args.json:
        emit(
            "datasource_load",
            [
                Figure("probe.p50", "GET / p50 under heavy load", p50, "ms", "lower"),
                Figure("probe.p99", "GET / p99 under heavy load", p99, "ms", "lower"),
                Figure("probe.max", "GET / max under heavy load", worst, "ms", "lower"),
                Figure("heavy.max", "slowest heavy /query (queue included)", max(times), "ms",
                       "lower"),
                Figure("heavy.p50", "heavy /query p50 (queue included)",
                       statistics.median(times), "ms", "lower"),
            ],
        )  # fmt: skip


if __name__ == "__main__":
    main()
