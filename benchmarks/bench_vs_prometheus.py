"""slicecount beside a real Prometheus on the same seeded traffic: dashboard refreshes, bytes,
accuracy against the truth (the baseline of issue 24).

    python benchmarks/bench_vs_prometheus.py [--routes 40 80] [--repeats 20] [--quick] [--json]
    python benchmarks/bench_vs_prometheus.py --live [--watch 60]

``--live`` measures the store as a deployed app leaves it: the history is written and sealed
as below, then (from when it starts: the minutes the history took to write are a gap without
requests on both servers) the app goes on serving the same seeded traffic at real time
(``live_app.py``: each second's requests counted through a Recorder flushing every second, its
totals exposed on ``/metrics``), a real ``slicecount cleaner`` daemon passes at its default
interval, and Prometheus scrapes the app every 15 s on top of its backfilled blocks (so its
samples are the same); after a warm-up, every refresh ends at the clock's second, as
Grafana's. Then ``--watch`` seconds of 10 viewers refreshing the 5-minute dashboard every 5 s,
staggered, on each server in turn. By default 40 and 80 routes on 2 hours of history, and
10 routes on 7 days (refreshed over the last 7 days too; its history is written an hour at a
time, each second counted in the finest slice that the history's end still keeps of it, as
``history_chunks`` says, and backfilled a promtool block at a time, promtool running while
slicecount's history is written; the report's "took" line times each phase).

For each app size, two hours of seeded traffic ending now (``seeded_traffic.py``: N routes,
their methods, statuses and latencies) are written into slicecount as its middleware counts
them (``Store.apply`` a simulated minute at a time, a cleaner pass after each, so the store
holds what a cleaned production store holds) in a private redis-server; the same requests,
exposed as a client library exposes them (``http_requests_total``, the
``http_request_duration_seconds`` histogram with the same ``le`` bounds) and scraped every
15 s, are backfilled into Debian's Prometheus with ``promtool tsdb create-blocks-from
openmetrics``. Then ``/usr/bin/prometheus`` serves those blocks and slicecount's datasource
(uvicorn, its clock starting at the traffic's end) serves the Redis. The targets of the shipped
dashboard ``grafana/dashboards/http-overview-prometheus.json`` go to both as Grafana sends them
(``grafana_refresh.py``: form POSTs, 6 at a time, steps from 900 points a panel: 15 s for the
last 5 minutes and the last hour, 2 m for the last 24 hours; ``$__rate_interval`` 1m0s, 1m0s,
2m15s), each refresh R times alternating the servers; p50 and p99 of a refresh, the ratio
slicecount / Prometheus, and panels refused (4xx). Bytes: what Redis's keys take (MEMORY USAGE
summed over the keys, plus the key tables' slots, ``key_tables``), per series, and used_memory
over the empty server's (which also counts the Lua VM, the script cache and client buffers:
~0.66 MB that a FLUSHALL leaves); Prometheus's blocks on disk (chunks, index, meta) per sample.
Accuracy: ``increase(http_requests_total[1m])`` summed and by route over the last hour at a 15 s
step, against the requests in [t - 60, t); and ``count(http_requests_total)`` at the end against
the series that had requests. Nothing is asserted; a server that does not start exits non-zero.
The machine is shared and noisy.

The baseline of issue 24 (layers2 cfcbf5f: the one engine on the book's layout, default
limits; 4 min on a 2-core machine at a load average of about 4; p50 / p99 over 20 refreshes):

    routes                                   40                        80
    series (requests; all)        558; 1 245 sc / 1 860 prom  1 107; 2 506 sc / 3 739 prom
    requests, Prometheus samples      287 615, 873 632            576 685, 1 747 291
                                 slicecount   Prometheus     slicecount    Prometheus
    last 5 minutes (step 15 s)    227 / 281     69 / 85       481 / 602    146 / 217 ms
        ratio p50 / p99                3.3 / 3.3x                   3.3 / 2.8x
    last 1 hour (step 15 s)       618 / 798    491 / 685     1282 / 1507  1098 / 1242 ms
        ratio p50 / p99                1.3 / 1.2x                   1.2 / 1.2x
    last 24 hours (step 2 m)      946 / 1095   320 / 356     1992 / 2721  1331 / 1721 ms
        ratio p50 / p99                3.0 / 3.1x                   1.5 / 1.6x
    panels refused (of 8)           0             0          3 (24 h)       0
    bytes of the 2 h              4.59 MB       1.46 MB       8.44 MB      2.85 MB
        per hash field / sample   33.9 B        1.67 B        32.2 B       1.63 B
    1 h graph sum, mean |error|    1.1 %         1.0 %         0.9 %        0.7 %
        exact of 241 points         62            1             62           0
    1 h graph by route, |error|   10.4 %         8.1 %        11.3 %        8.7 %
        exact (point, route)     2 995/9 640    394/9 640    5 961/19 280  801/19 280
    count(http_requests_total)    277/558       558/558      517/1 107    1 107/1 107

The 80-route "last 24 hours" refresh: the three quantile panels refused (422,
max_computed_points). Redis's MEMORY USAGE summed over the keys says 3.81 and 7.54 MB (listpacks
counted by their used bytes, not their allocations). Took: writing slicecount 19-26 s (a
cleaner pass per simulated minute), promtool 3-4 s, the refreshes 57 and 128 s. A run at a load
average of 8-11 measured every latency 2-3x higher, with ratios of 3.4x, 1.2x and 3.3x (p50)
for 40 routes: read the ratios, not the milliseconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import redis

import slicecount
from children import Child  # beside this file (python puts it on sys.path)
from figures import Figure, emit, json_flag
from grafana_refresh import Client, dashboard_targets, refresh_requests
from seeded_traffic import SCRAPE_INTERVAL, Traffic, generate, openmetrics, scrape_times
from slicecount import Store
from slicecount.cleaner import Cleaner
from slicecount.config import Settings
from slicecount.core.frames import FRAME_SLICES
from slicecount.core.slices import oldest_kept
from slicecount.embedded import EmbeddedRedis, free_port, listen
from slicecount.operations.compacting import EDGE_MARGIN

HERE = Path(__file__).resolve().parent
DASHBOARD = HERE.parent / "grafana" / "dashboards" / "http-overview-prometheus.json"
REFRESHES = (("last 5 minutes", 300), ("last 1 hour", 3600), ("last 24 hours", 86400))
WEEK = ("last 7 days", 7 * 86400)
"""Refreshed too when the history holds a week."""
LIVE_SPAN = 3 * 3600
"""Seconds of traffic the live app has to serve (it is stopped once the timing ends)."""
LIVE_WARMUP = 90
"""Seconds the live store runs (the app flushing, the cleaner passing, Prometheus scraping)
before the timing starts."""
VIEWERS = 10
VIEWER_EVERY = 5.0
"""Seconds between two refreshes of one viewer of the 5-minute dashboard."""
SERVERS = ("slicecount", "prometheus")
HISTORY = 7200
SEED = 24
Counts = dict[str, dict[int, int]]
"""series id -> epoch second -> count: what ``Store.apply`` writes."""
SCRAPE_OFFSET = 7
"""Seconds past each 15 s boundary at which the simulated Prometheus scrapes."""
PROMTOOL_BLOCK = 7200
"""Seconds of promtool's backfilled blocks (its default 2 h), aligned on the epoch."""
SLOWLOG_US = 500
"""Redis calls of the refreshes slower than this are logged: the longest is reported (the
target: none over 5 ms)."""
NOW_VARIABLE = "BENCH_VS_PROMETHEUS_NOW"
"""The epoch second the datasource's clock reads when it starts (the traffic's end), or
LIVE_CLOCK."""
LIVE_CLOCK = "live"
"""``NOW_VARIABLE`` of a live run: the datasource reads the real clock, as Grafana's."""
SUM_INCREASE = "sum(increase(http_requests_total[1m]))"
ROUTE_INCREASE = 'sum by (route) (increase(http_requests_total{route=~".*",method=~".*"}[1m]))'


def datasource_app() -> Any:
    """``uvicorn --factory bench_vs_prometheus:datasource_app``: the datasource from the
    ``SLICECOUNT_*`` environment (default limits unless set there), its clock running from the
    traffic's end, so Grafana's "now" is that end and the discovery cache expires as it does."""
    from slicecount.config import Settings
    from slicecount.config.request_limits import Limits
    from slicecount.datasource.app import create_app
    from slicecount.datasource.serving import SWITCH_INTERVAL

    sys.setswitchinterval(SWITCH_INTERVAL)  # as ``slicecount datasource`` runs it
    now = os.environ[NOW_VARIABLE]  # "live": the real clock (a shift taken here would lag
    shift = 0.0 if now == LIVE_CLOCK else time.time() - float(now)  # by the startup's time)
    return create_app(
        Settings.from_env(), limits=Limits.from_env(os.environ), clock=lambda: time.time() - shift
    )


# -- writing both -------------------------------------------------------------------------


@dataclass
class Sizes:
    """What each side holds after the traffic was written."""

    redis_used: int = 0  # used_memory over the empty server's
    redis_keys: int = 0  # MEMORY USAGE summed over the keys, and the key tables' own bytes
    fields: int = 0  # hash fields of count: keys (slices stored)
    keys: int = 0
    prometheus_bytes: int = 0  # the blocks' files
    samples: int = 0
    prometheus_series: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    longest_read_us: int = 0  # the longest Redis call of the refreshes (SLOWLOG)
    reads_over_5ms: int = 0


def history_chunks(traffic: Traffic, settings: Settings) -> list[tuple[int, Counts]]:
    """What ``write_slicecount`` applies before each cleaner pass, with the pass's time: a
    simulated minute at a time, an hour for a history over a day.

    In an hour, each second is counted at one second of its slice of the finest precision
    whose frame holding it the last pass keeps (with the default ladder: 60 s before the 5 s
    slices' 48 h, 5 s before the 1 s slices' last 10 to 22 minutes, else the second itself).
    That slice and the coarser ones get the same sums; the finer frames a sum reaches on the
    way are past retention when the history ends, and the last pass drops them. So the blocks
    are the ones every second written leaves, byte for byte (the generation apart), and so are
    the open hashes' fields (not always their encoding: an hour of seconds makes a busy hash a
    hashtable either way, and its allocation differs between two runs of the same writes). A
    7-day history's passes move 3.2 million fields, not 13.1: 5 minutes on a 2-core machine
    with promtool running beside, not 7-9 alone. On a ladder whose slices do not nest, every
    second."""
    if traffic.seconds <= 86400:
        return traffic.minutes(60)
    chunks = traffic.minutes(3600)
    ladder = sorted(settings.precisions)
    if any(q % p for p in ladder for q in ladder if q > p):
        return chunks
    kept: dict[int, int] = {}  # precision -> the start of its oldest frame the last pass keeps
    for p in ladder:  # (a pass keeps EDGE_MARGIN s before retention's edge)
        oldest = oldest_kept(p, settings.retention_for(p), traffic.end) - EDGE_MARGIN
        kept[p] = oldest - oldest % (p * FRAME_SLICES)

    def slice_of(t: int) -> int:  # the precision t is counted at
        return next((p for p in ladder if t >= kept[p]), ladder[0])

    summed: list[tuple[int, Counts]] = []
    for end, counts in chunks:
        first = max(traffic.start, end - 3600)
        if slice_of(first) == ladder[0]:  # and so every later second
            summed.append((end, counts))
            continue
        fixed = slice_of(first) if slice_of(first) == slice_of(end - 1) else 0  # no cut inside
        chunk: Counts = {}
        for series, seconds in counts.items():
            out = chunk[series] = {}
            for t, n in seconds.items():
                at = t - t % (fixed or slice_of(t))
                if at < first:
                    at = first
                out[at] = out.get(at, 0) + n
        summed.append((end, chunk))
    return summed


def write_slicecount(url: str, traffic: Traffic, sizes: Sizes, layout: str) -> None:
    """``history_chunks`` one after the other, a cleaner pass at each one's end, as a
    flushing writer and the sidecar cleaner leave Redis; then the bytes it holds."""
    client = redis.Redis.from_url(url)
    empty = int(client.info("memory")["used_memory"])
    simulated = [float(traffic.start)]
    with Store.from_url(url, layout=layout) as store:
        cleaner = Cleaner(store, clock=lambda: simulated[0])
        for minute_end, counts in history_chunks(traffic, store.settings):
            refused = store.apply(counts)
            if refused:
                raise SystemExit(f"slicecount refused {refused} increments of the traffic")
            simulated[0] = float(minute_end)
            cleaner.run_once()
    # A pass's lease lives two intervals of real time; simulated passes outran them. In
    # production one or two exist at a time: not the history's bytes.
    leases = list(client.scan_iter(match="cleaner:lease:*", count=1000))
    if leases:
        client.delete(*leases)
    sizes.redis_used = int(client.info("memory")["used_memory"]) - empty
    for key in client.scan_iter(count=1000):
        sizes.keys += 1
        sizes.redis_keys += int(client.memory_usage(key, samples=0) or 0)
        if key.startswith(b"count:"):
            sizes.fields += int(client.hlen(key))
        elif key.startswith(b"open:"):
            sizes.fields += int(client.hlen(key))
    sizes.redis_keys += key_tables(client.memory_stats().get("db.0", {}), sizes.keys)
    client.close()


KEY_ENTRY = 24 + 16
"""What Redis (7.0) spends on a key in its key table: its dictEntry and its robj."""


def key_tables(db: dict[str, int], keys: int) -> int:
    """The bytes of a database's key tables that no key's MEMORY USAGE counts: the main
    table's slots and the expiry table. MEMORY STATS' ``overhead.hashtable.main`` is each
    key's dictEntry and robj plus the slots (``getMemoryOverheadData``), and MEMORY USAGE
    already counts a key's dictEntry and robj (``memoryCommand``, ``objectComputeSize``):
    added whole, as up to run 4, they were counted twice, 40 bytes a key."""
    main = int(db.get("overhead.hashtable.main", 0))
    slots = main - KEY_ENTRY * keys
    if slots < 0 or slots % 8:  # another Redis's accounting: count it whole, never less
        slots = main
    return slots + int(db.get("overhead.hashtable.expires", 0))


def write_openmetrics(traffic: Traffic, folder: Path, sizes: Sizes) -> list[Path]:
    """The OpenMetrics text of every scrape, a file per promtool block (``create_blocks``)."""
    texts = folder / "scrapes"
    texts.mkdir()
    files: dict[int, TextIO] = {}
    headers: list[str] = []  # the metadata lines so far: a file opened later starts with them
    try:
        for line in openmetrics(traffic, scrape_times(traffic, SCRAPE_OFFSET)):
            if line.startswith("#"):
                headers.append(line)
                for output in files.values():
                    output.write(line)
                continue
            sizes.samples += 1
            block = int(line[line.rindex(" ") + 1 :]) // PROMTOOL_BLOCK
            opened = files.get(block)
            if opened is None:
                opened = files[block] = (texts / f"{block}.om").open("w")
                opened.writelines(headers)
            opened.write(line)
    finally:
        for output in files.values():
            output.close()
    return [texts / f"{block}.om" for block in sorted(files)]


def create_blocks(promtool: str, texts: list[Path], data: Path, sizes: Sizes) -> Path:
    """The blocks of ``texts`` in ``data``, a promtool run per file; returns ``data``.

    promtool cuts the samples into blocks of ``PROMTOOL_BLOCK`` s aligned on the epoch and
    parses its whole input once per block: one file of 7 days took it 18 minutes (84 blocks
    times 1.9 GB). A file per block holds the same samples in the same order under the same
    family headers, so the runs make the same blocks (chunks and index byte for byte), each
    input parsed once."""
    for text in texts:
        made = subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", str(text), str(data)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if made.returncode != 0:
            raise SystemExit(
                f"promtool could not backfill {text.name}:\n"
                f"{made.stdout[-2000:]}{made.stderr[-2000:]}"
            )
        text.unlink()
    sizes.prometheus_bytes = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
    return data


def write_both(
    promtool: str, traffic: Traffic, folder: Path, redis_url: str, sizes: Sizes, layout: str
) -> Path:
    """The OpenMetrics text, then slicecount's history written while promtool (a process of
    its own, waited for by a thread) makes Prometheus's blocks of it; returns their folder."""
    texts = timed(sizes, "OpenMetrics text", lambda: write_openmetrics(traffic, folder, sizes))
    with ThreadPoolExecutor(1) as pool:
        blocks = pool.submit(
            timed, sizes, "promtool (beside the write)",
            lambda: create_blocks(promtool, texts, folder / "tsdb", sizes),
        )  # fmt: skip
        timed(
            sizes, "slicecount write", lambda: write_slicecount(redis_url, traffic, sizes, layout)
        )
        data: Path = blocks.result()
    return data


def start_prometheus(
    binary: str, data: Path, logs: Path, stack: contextlib.ExitStack, scrape: str = ""
) -> str:
    """Prometheus on ``data``'s blocks at a free port, checked to be this one (its flags name
    ``data``); ``scrape``: an app's address it scrapes every 15 s, its series kept without
    ``job`` and ``instance`` so that they go on from the backfilled ones. Returns its URL."""
    port = free_port()
    config = logs / "prometheus.yml"
    jobs = (
        "[]"
        if not scrape
        else (
            f"\n  - job_name: app\n    static_configs: [{{targets: ['{scrape}']}}]\n"
            "    metric_relabel_configs: [{action: labeldrop, regex: 'job|instance'}]"
        )
    )
    config.write_text(f"global:\n  scrape_interval: 15s\nscrape_configs: {jobs}\n")
    child = Child("prometheus", [
        binary, f"--config.file={config}", f"--storage.tsdb.path={data}",
        "--storage.tsdb.retention.time=3650d", f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ], logs, dict(os.environ))  # fmt: skip
    stack.callback(child.stop)
    url = f"http://127.0.0.1:{port}"
    child.wait_ready(f"{url}/-/ready")
    with urllib.request.urlopen(f"{url}/api/v1/status/flags", timeout=10) as response:
        flags = json.load(response).get("data", {})
    if flags.get("storage.tsdb.path") != str(data):
        raise SystemExit(f"the server on port {port} is not the Prometheus started here: {flags}")
    return url


def start_datasource(
    redis_url: str, now: float | None, logs: Path, stack: contextlib.ExitStack, layout: str,
    workers: int = 1,
) -> str:  # fmt: skip
    """slicecount's datasource under uvicorn on a socket bound here, in ``workers``
    processes, its clock starting at ``now`` (None: the real clock); returns its URL."""
    sock = listen()
    port = sock.getsockname()[1]
    tree = str(Path(slicecount.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tree, str(HERE)]),
           "SLICECOUNT_REDIS_URL": redis_url, "SLICECOUNT_LAYOUT": layout,
           NOW_VARIABLE: LIVE_CLOCK if now is None else str(now)}  # fmt: skip
    child = Child("datasource", [
        sys.executable, "-m", "uvicorn", "--factory", f"{Path(__file__).stem}:datasource_app",
        "--fd", str(sock.fileno()), "--log-level", "warning", "--workers", str(workers),
    ], logs, env, sock)  # fmt: skip
    stack.callback(child.stop)
    url = f"http://127.0.0.1:{port}"
    child.wait_ready(f"{url}/")
    return url


# -- measuring --------------------------------------------------------------------------------


@dataclass
class Refresh:
    """One refresh kind on one server: seconds of each repeat, panels refused (and why)."""

    seconds: list[float] = field(default_factory=list)
    refused: set[str] = field(default_factory=set)
    why: str = ""
    series: int = 0  # series in the warm-up refresh's answers (both should do the same work)
    step: str = ""
    by_panel: dict[str, int] = field(default_factory=dict)  # those series, panel by panel


def answered_series(body: bytes) -> int:
    try:
        result = json.loads(body)["data"]["result"]
    except (ValueError, KeyError, TypeError):
        return 0
    return len(result) if isinstance(result, list) else 0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def time_refreshes(
    clients: dict[str, Client], now: int | None, repeats: int, kinds: tuple[tuple[str, int], ...]
) -> dict[tuple[str, str], Refresh]:
    """Every refresh kind, ``repeats`` times after one warm-up, alternating which server goes
    first; ``now`` None: live, each refresh ending at the clock's second as Grafana's does."""
    targets = dashboard_targets(DASHBOARD)
    results: dict[tuple[str, str], Refresh] = {}
    for name, span in kinds:
        requests = refresh_requests(targets, now or int(time.time()), span, SCRAPE_INTERVAL)
        for r in range(repeats + 1):
            order = SERVERS if r % 2 == 0 else SERVERS[::-1]
            for server in order:
                if now is None:
                    requests = refresh_requests(targets, int(time.time()), span, SCRAPE_INTERVAL)
                seconds, answers = clients[server].refresh(requests)
                result = results.setdefault((name, server), Refresh())
                if r == 0:
                    result.by_panel = {
                        f"{q.panel} {q.ref}": answered_series(a.body)
                        for q, a in zip(requests, answers, strict=True)
                    }
                    result.series = sum(result.by_panel.values())
                    ranged = next(q.form for q in requests if q.path == "query_range")
                    result.step = f"step {ranged['step']} s"
                    continue
                result.seconds.append(seconds)
                for request, answer in zip(requests, answers, strict=True):
                    if answer.status != 200:
                        result.refused.add(f"{request.panel} {request.ref}")
                        result.why = result.why or f"{answer.status} {answer.body[:160]!r}"
    return results


def watched_refreshes(
    redis_url: str, clients: dict[str, Client], now: int | None, repeats: int, history: int,
    sizes: Sizes,
) -> dict[tuple[str, str], Refresh]:  # fmt: skip
    """``time_refreshes`` of every kind the history holds, Redis's SLOWLOG watching the reads:
    their longest call in ``sizes``."""
    watched = redis.Redis.from_url(redis_url)
    try:
        watched.config_set("slowlog-log-slower-than", SLOWLOG_US)
        watched.config_set("slowlog-max-len", 100_000)
        watched.slowlog_reset()
        kinds = REFRESHES + ((WEEK,) if history >= WEEK[1] else ())
        refreshes: dict[tuple[str, str], Refresh] = timed(
            sizes, "refreshes", lambda: time_refreshes(clients, now, repeats, kinds)
        )
        took = [int(entry["duration"]) for entry in watched.slowlog_get(100_000)]
    finally:
        watched.close()
    sizes.longest_read_us = max(took, default=0)
    sizes.reads_over_5ms = sum(1 for us in took if us > 5000)
    return refreshes


@dataclass
class Accuracy:
    total_error: float | None  # mean |error| % of the sum over routes, where the truth is > 0
    total_exact: int
    route_error: float | None
    route_exact: int
    points: int  # grid points
    route_points: int  # (point, route) pairs
    series_now: int | None  # count(http_requests_total) at the end
    failure: str = ""


def answer_points(client: Client, form: dict[str, str]) -> dict[tuple[str, int], float] | str:
    """{(route or "", time): value} of a range query, or why there is none."""
    answer = client.ask("query_range", form)
    if answer.status != 200:
        return f"HTTP {answer.status} {answer.body[:160]!r}"
    points: dict[tuple[str, int], float] = {}
    for series in json.loads(answer.body)["data"]["result"]:
        for at, value in series["values"]:
            points[(series["metric"].get("route", ""), int(float(at)))] = float(value)
    return points


def relative(errors: list[float]) -> float | None:
    return 100 * statistics.fmean(errors) if errors else None


def accuracy(client: Client, traffic: Traffic, now: int) -> Accuracy:
    """The last hour's ``increase(...[1m])`` at a 15 s step against the requests in [t-60, t)."""
    start, step = now - 3600, SCRAPE_INTERVAL
    grid = range(start, now + 1, step)
    span = {"start": str(start), "end": str(now), "step": str(step)}
    total = answer_points(client, {"query": SUM_INCREASE, **span})
    by_route = answer_points(client, {"query": ROUTE_INCREASE, **span})
    count = client.ask("query", {"query": "count(http_requests_total)", "time": str(now)})
    series_now = None
    if count.status == 200:
        result = json.loads(count.body)["data"]["result"]
        series_now = int(float(result[0]["value"][1])) if result else 0
    if isinstance(total, str) or isinstance(by_route, str):
        failure = total if isinstance(total, str) else str(by_route)
        return Accuracy(None, 0, None, 0, len(grid), 0, series_now, failure)
    tallies: list[tuple[list[float], list[int]]] = []
    for points, routes in ((total, [None]), (by_route, list(traffic.per_route))):
        errors, exact = [], [0]
        for route in routes:
            for at in grid:
                true = traffic.requests_in(route, at - 60, at)
                got = points.get((route or "", at), 0.0)
                exact[0] += abs(got - true) < 1e-6
                if true:
                    errors.append(abs(got - true) / true)
        tallies.append((errors, exact))
    (total_errors, total_exact), (route_errors, route_exact) = tallies
    return Accuracy(
        relative(total_errors), total_exact[0], relative(route_errors), route_exact[0],
        len(grid), len(grid) * len(traffic.per_route), series_now,
    )  # fmt: skip


# -- one app size, and the report --------------------------------------------------------------


@dataclass
class Run:
    traffic: Traffic
    sizes: Sizes
    refreshes: dict[tuple[str, str], Refresh]
    accuracy: dict[str, Accuracy]
    viewers: dict[str, list[float]] = field(default_factory=dict)
    live: bool = False


def timed(sizes: Sizes, what: str, job: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    result = job()
    sizes.seconds[what] = time.perf_counter() - started
    return result


def run_size(
    routes: int, history: int, repeats: int, binaries: tuple[str, str], layout: str
) -> Run:
    prometheus, promtool = binaries
    now = int(time.time()) // 60 * 60
    sizes = Sizes()
    traffic = timed(sizes, "traffic", lambda: generate(routes, now, history, SEED))
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-vs-prom-")))
        server = stack.enter_context(EmbeddedRedis())
        data = write_both(promtool, traffic, folder, server.url, sizes, layout)
        urls = {
            "prometheus": start_prometheus(prometheus, data, folder, stack),
            "slicecount": start_datasource(server.url, now, folder, stack, layout),
        }
        clients = {name: Client(url) for name, url in urls.items()}
        for client in clients.values():
            stack.callback(client.close)
        loaded = clients["prometheus"].json("query", {"query": "count({__name__=~'http_.+'})",
                                                      "time": str(now)})  # fmt: skip
        result = loaded["data"]["result"]
        sizes.prometheus_series = int(float(result[0]["value"][1])) if result else 0
        if not sizes.prometheus_series:
            raise SystemExit("Prometheus did not load the backfilled blocks (no http_ series)")
        checked = {name: accuracy(client, traffic, now) for name, client in clients.items()}
        refreshes = watched_refreshes(server.url, clients, now, repeats, history, sizes)
    return Run(traffic, sizes, refreshes, checked)


def watch(client: Client, viewers: int, every: float, seconds: float) -> list[float]:
    """``viewers`` viewers of the 5-minute dashboard on one server, each refreshing every
    ``every`` s for ``seconds`` s, their starts spread over the first ``every`` s: the
    seconds of every refresh (a viewer's next waits for its last to end)."""
    targets = dashboard_targets(DASHBOARD)
    took: list[float] = []
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def viewer(n: int) -> None:
        own = Client(client.base)
        try:
            time.sleep(n * every / viewers)
            while time.monotonic() < end:
                started = time.monotonic()
                requests = refresh_requests(targets, int(time.time()), 300, SCRAPE_INTERVAL)
                duration, answers = own.refresh(requests)
                if any(a.status != 200 for a in answers):
                    raise SystemExit(f"a viewer's refresh was refused: {answers[0].body[:200]!r}")
                with lock:
                    took.append(duration)
                time.sleep(max(0.0, every - (time.monotonic() - started)))
        finally:
            own.close()

    threads = [threading.Thread(target=viewer, args=(n,)) for n in range(viewers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return took


def run_live(
    routes: int, history: int, repeats: int, binaries: tuple[str, str], layout: str,
    watching: float, warmup: float = LIVE_WARMUP, workers: int = 1,
) -> Run:  # fmt: skip
    """The store as a deployed app and its sidecar leave it: ``history`` s sealed by the
    cleaner, then the app counting each second and flushing every second (``live_app.py``),
    the cleaner daemon passing at its default interval and Prometheus scraping the app,
    during the whole timing."""
    prometheus, promtool = binaries
    sizes = Sizes()
    traffic = timed(sizes, "traffic", lambda: generate(routes, 0, history + LIVE_SPAN, SEED))
    first = int(time.time())
    traffic = traffic.shifted(first + LIVE_SPAN)
    past = traffic.until(first)
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-vs-prom-")))
        server = stack.enter_context(EmbeddedRedis())
        data = write_both(promtool, past, folder, server.url, sizes, layout)
        # the app goes on from now, not from the history's end: writing the history took
        # minutes, which it would otherwise count at once when it starts (a burst no live app
        # sends, left in the open hashes until the cleaner's next pass). Between the two, no
        # request: both servers hold the same gap.
        began = time.perf_counter()
        start = int(time.time()) + 1
        live = {t + start - first: entries for t, entries in traffic.by_second(first).items()}
        plan = folder / "live.pickle"
        plan.write_bytes(pickle.dumps({
            "redis_url": server.url, "layout": layout, "first": start,
            "totals": past.totals(), "live": live,
        }))  # fmt: skip
        sock = listen()
        exporter = f"127.0.0.1:{sock.getsockname()[1]}"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
        app = Child("live_app", [sys.executable, str(HERE / "live_app.py"), str(plan),
                                 str(sock.fileno())], folder, env, sock)  # fmt: skip
        stack.callback(app.stop)
        app.wait_ready(f"http://{exporter}/metrics")
        cleaner = Child("cleaner", [str(Path(sys.executable).parent / "slicecount"), "cleaner",
                                    "--redis-url", server.url, "--layout", layout],
                        folder, dict(os.environ))  # fmt: skip
        stack.callback(cleaner.stop)
        urls = {
            "prometheus": start_prometheus(prometheus, data, folder, stack, exporter),
            "slicecount": start_datasource(server.url, None, folder, stack, layout, workers),
        }
        clients = {name: Client(url) for name, url in urls.items()}
        for client in clients.values():
            stack.callback(client.close)
        sizes.seconds["live plan and children"] = time.perf_counter() - began
        began = time.perf_counter()
        time.sleep(max(0.0, start + warmup - time.time()))
        scraped = first_scrape(clients["prometheus"], time.time() + 2 * SCRAPE_INTERVAL)
        sizes.seconds["warm-up"] = time.perf_counter() - began
        if not scraped or scraped[0]["value"][1] != "1":
            raise SystemExit(f"Prometheus does not scrape the live app: {scraped}")
        loaded = clients["prometheus"].json("query", {"query": "count(http_requests_total)"})
        result = loaded["data"]["result"]
        sizes.prometheus_series = int(float(result[0]["value"][1])) if result else 0
        if not sizes.prometheus_series:
            raise SystemExit("Prometheus holds no http_requests_total series")
        refreshes = watched_refreshes(server.url, clients, None, repeats, history, sizes)
        viewers: dict[str, list[float]] = {}
        for name in SERVERS if watching else ():
            started = time.perf_counter()
            viewers[name] = watch(clients[name], VIEWERS, VIEWER_EVERY, watching)
            sizes.seconds[f"{VIEWERS} viewers of {name}"] = time.perf_counter() - started
    return Run(past, sizes, refreshes, {}, viewers, live=True)


def first_scrape(prometheus: Client, deadline: float) -> list[Any]:
    """``up`` once Prometheus has scraped the live app (its first scrape falls anywhere in the
    first interval), or as it stands at ``deadline``."""
    while True:
        scraped: list[Any] = prometheus.json("query", {"query": "up"})["data"]["result"]
        if scraped or time.time() >= deadline:
            return scraped
        time.sleep(0.2)


def ms(values: list[float]) -> tuple[float, float]:
    return 1000 * statistics.median(values), 1000 * percentile(values, 0.99)


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} %"


def report(run: Run, figures: list[Figure]) -> None:
    t, s, key = run.traffic, run.sizes, f"r{run.traffic.routes}"
    targets = len(dashboard_targets(DASHBOARD))
    print(f"\n== {t.routes} routes: {t.events:,} requests over {t.seconds // 3600} h, "
          f"{t.request_series()} request series; slicecount {len(t.counts)} series, "
          f"Prometheus {s.prometheus_series} series, {s.samples:,} samples")  # fmt: skip
    print("   took " + ", ".join(f"{k} {v:.1f} s" for k, v in s.seconds.items()))
    print(f"   {'':<34}{'slicecount':>24}{'Prometheus':>24}{'ratio':>14}")
    if run.live:
        print("   live: the app counting each second, the cleaner daemon and Prometheus's "
              "scrapes running while timed")  # fmt: skip
    kinds = list(dict.fromkeys(name for name, _ in run.refreshes))
    for name in kinds:
        sc, prom = run.refreshes[(name, "slicecount")], run.refreshes[(name, "prometheus")]
        (s50, s99), (p50, p99) = ms(sc.seconds), ms(prom.seconds)
        print(
            f"   {name + ', p50 / p99':<34}{f'{s50:.0f} / {s99:.0f} ms':>24}"
            f"{f'{p50:.0f} / {p99:.0f} ms':>24}{f'{s50 / p50:.1f} / {s99 / p99:.1f}x':>14}"
        )
        print(f"   {'   series answered (' + sc.step + ')':<34}{sc.series:>24}{prom.series:>24}")
        for panel, n in sc.by_panel.items():
            if n != prom.by_panel.get(panel):
                print(f"      {panel}: {n} against {prom.by_panel.get(panel)}")
        print(f"   {'   panels refused (4xx)':<34}{f'{len(sc.refused)} of {targets}':>24}"
              f"{f'{len(prom.refused)} of {targets}':>24}")  # fmt: skip
        for server, result in (("slicecount", sc), ("prometheus", prom)):
            if result.refused:
                print(f"      {server} refused {sorted(result.refused)}: {result.why}")
        slug = name.replace("last ", "").replace(" ", "")
        for server, (p50_, p99_) in (("slicecount", (s50, s99)), ("prometheus", (p50, p99))):
            figures += [
                Figure(f"{key}.{slug}.{server}.p50", f"{t.routes} routes, {name}, {server} p50",
                       p50_, "ms", "lower"),
                Figure(f"{key}.{slug}.{server}.p99", f"{t.routes} routes, {name}, {server} p99",
                       p99_, "ms", "lower"),
            ]  # fmt: skip
        figures += [
            Figure(f"{key}.{slug}.ratio.p99", f"{t.routes} routes, {name}, p99 slicecount / "
                   "Prometheus", s99 / p99, "x", "lower"),
            Figure(f"{key}.{slug}.slicecount.refused", f"{t.routes} routes, {name}, slicecount "
                   "panels refused", len(sc.refused), "panels", "lower"),
        ]  # fmt: skip
    print(f"   {'longest Redis call of the reads':<34}{f'{s.longest_read_us / 1000:.1f} ms':>24}"
          f"{'':>24}   ({s.reads_over_5ms} over 5 ms)")  # fmt: skip
    longest = f"{t.routes} routes, slicecount's longest Redis call of the refreshes"
    figures.append(Figure(f"{key}.longest_read", longest, s.longest_read_us / 1000, "ms", "lower"))
    per_series = s.redis_keys / len(t.counts) if t.counts else 0.0
    per_sample = s.prometheus_bytes / s.samples if s.samples else 0.0
    sc_bytes = f"{s.redis_keys / 1e6:.2f} MB ({per_series:.0f} B/series)"
    prom_bytes = f"{s.prometheus_bytes / 1e6:.2f} MB ({per_sample:.2f} B/sample)"
    print(f"   {'bytes of the history':<34}{sc_bytes:>24}{prom_bytes:>24}"
          f"{f'{s.redis_keys / s.prometheus_bytes:.2f}x':>14}")  # fmt: skip
    print(
        f"      slicecount: the keys' MEMORY USAGE and the key tables' slots; {s.keys:,} keys, "
        f"{s.fields:,} hash fields; used_memory over the empty server's "
        f"{s.redis_used / 1e6:.2f} MB (also the Lua VM, the script cache, client buffers). "
        "Prometheus: chunks, index and meta of its blocks"
    )
    figures += [
        Figure(f"{key}.bytes.slicecount", f"{t.routes} routes, Redis keys' bytes", s.redis_keys,
               "B", "lower"),
        Figure(f"{key}.bytes.slicecount_used", f"{t.routes} routes, Redis used_memory over "
               "the empty server's", s.redis_used, "B", "lower"),
        Figure(f"{key}.bytes.prometheus", f"{t.routes} routes, Prometheus blocks",
               s.prometheus_bytes, "B", "lower"),
    ]  # fmt: skip
    if run.viewers:
        (s50, s99), (p50, p99) = ms(run.viewers["slicecount"]), ms(run.viewers["prometheus"])
        label = f"{VIEWERS} viewers, 5 min, p50 / p99"
        print(
            f"   {label:<34}{f'{s50:.0f} / {s99:.0f} ms':>24}"
            f"{f'{p50:.0f} / {p99:.0f} ms':>24}{f'{s50 / p50:.1f} / {s99 / p99:.1f}x':>14}"
        )
        counted = {k: len(v) for k, v in run.viewers.items()}
        print(f"   {'   refreshes':<34}{counted['slicecount']:>24}{counted['prometheus']:>24}")
        figures.append(Figure(f"{key}.viewers.ratio.p99", f"{t.routes} routes, {VIEWERS} "
                              "viewers of the 5-minute dashboard, p99 slicecount / Prometheus",
                              s99 / p99, "x", "lower"))  # fmt: skip
    if not run.accuracy:
        return
    sc_acc, prom_acc = run.accuracy["slicecount"], run.accuracy["prometheus"]
    rows: tuple[tuple[str, Callable[[Accuracy], str]], ...] = (
        ("1 h graph, sum: mean |error|", lambda a: percent(a.total_error)),
        ("   exact points", lambda a: f"{a.total_exact} of {a.points}"),
        ("1 h graph, by route: mean |error|", lambda a: percent(a.route_error)),
        ("   exact (point, route)", lambda a: f"{a.route_exact} of {a.route_points}"),
        ("count(http_requests_total) now", lambda a: f"{a.series_now} of {t.request_series()}"),
    )
    for label, shown in rows:
        print(f"   {label:<34}{shown(sc_acc):>24}{shown(prom_acc):>24}")
    figures.append(Figure(f"{key}.series_true", f"{t.routes} routes, request series with "
                          "requests", t.request_series(), "series", "higher"))  # fmt: skip
    for server, acc in run.accuracy.items():
        if acc.failure:
            print(f"      {server} did not answer the accuracy query: {acc.failure}")
        figures += [
            Figure(f"{key}.exact.{server}", f"{t.routes} routes, 1 h graph, sum, {server} "
                   "exact points", acc.total_exact, "points", "higher"),
            Figure(f"{key}.error.{server}", f"{t.routes} routes, 1 h graph by route, {server} "
                   "mean |error|", acc.route_error, "%", "lower"),
            Figure(f"{key}.series_now.{server}", f"{t.routes} routes, {server} "
                   "count(http_requests_total)", acc.series_now, "series", "higher"),
        ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routes", type=int, nargs="+", help="app sizes (default 40 80)")
    parser.add_argument("--repeats", type=int, help="timed refreshes of each kind (default 20)")
    parser.add_argument("--history", type=int, help=f"seconds of traffic (default {HISTORY})")
    parser.add_argument("--quick", action="store_true", help="10 routes, 1 h, 3 repeats")
    parser.add_argument(
        "--live",
        action="store_true",
        help="a live store: the app flushing every second, the cleaner daemon "
        "and Prometheus's scrapes running while timed (default: 40 and 80 "
        "routes on 2 h, then 10 routes on 7 days)",
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=LIVE_WARMUP,
        help="live: seconds the live store runs before the timing starts",
    )
    parser.add_argument("--watch", type=float, default=60.0,
                        help=f"live: seconds {VIEWERS} viewers refresh the 5-minute dashboard "
                        f"every {VIEWER_EVERY:g} s, on each server (0: none)")  # fmt: skip
    parser.add_argument("--datasource-workers", type=int, default=1,
                        help="live: the datasource's processes (slicecount datasource "
                        "--workers; Prometheus uses every core)")  # fmt: skip
    parser.add_argument("--layout", choices=("book", "blocks"), default="blocks",
                        help="slicecount's Redis layout (default blocks)")  # fmt: skip
    parser.add_argument("--prometheus", default=shutil.which("prometheus") or "/usr/bin/prometheus")
    parser.add_argument("--promtool", default=shutil.which("promtool") or "/usr/bin/promtool")
    json_flag(parser)
    args = parser.parse_args()
    routes = args.routes or ([10] if args.quick else [40, 80])
    repeats = args.repeats or (3 if args.quick else 20)
    history = args.history or (3600 if args.quick else HISTORY)
    for binary in (args.prometheus, args.promtool):
        if not os.access(binary, os.X_OK):
            raise SystemExit(f"no executable {binary} (apt-get install prometheus)")
    version = subprocess.run([args.prometheus, "--version"], capture_output=True, text=True)
    print((version.stdout + version.stderr).strip().partition("\n")[0])
    print(f"slicecount's layout: {args.layout}; datasource workers: {args.datasource_workers}")
    print(f"dashboard {DASHBOARD.name}; {repeats} timed refreshes of each kind per server, "
          "alternating; 6 requests at a time")  # fmt: skip
    figures: list[Figure] = []
    binaries = (args.prometheus, args.promtool)
    if args.live:
        sizes = (
            [(size, history) for size in routes]
            if args.routes or args.quick
            else [(40, HISTORY), (80, HISTORY), (10, WEEK[1])]
        )
        for size, span in sizes:
            run = run_live(size, span, repeats, binaries, args.layout, args.watch, args.warmup,
                           args.datasource_workers)  # fmt: skip
            report(run, figures)
    for size in [] if args.live else routes:
        report(run_size(size, history, repeats, binaries, args.layout), figures)
    if args.json:
        emit("vs_prometheus", figures)


if __name__ == "__main__":
    main()
