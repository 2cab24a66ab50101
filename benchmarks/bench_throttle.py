"""Per-request cost of a rate-limited route, in-process: slicecount's throttle beside
flask-limiter (Flask) and slowapi (Starlette), all counting in one private redis-server.

    python benchmarks/bench_throttle.py [--requests 2000] [--rounds 15] [--json]

One run, one redis-server, one route ``/r`` limited to 1 000 000/minute (no request is ever
refused: the run checks that every answer is 200). Each variant is its own app, called
directly through its real WSGI / ASGI entry point with a prepared environ / scope (the least
harness cost: on the bare apps here the Flask test client added 250-450 us a request and
httpx's ASGITransport ~750 us, as much as or more than what is measured). The variants
alternate within each round (the starting one rotates), so all see the same machine weather;
the overhead of a variant is the median over the rounds of (its time - the bare app's time in
the same round), in microseconds per request; "vs peer" divides it by the peer's overhead
(flask-limiter / slowapi, same strategy).

Flask: bare; slicecount's counting alone (``SliceCount(app)``, no limit: what the limited
variant pays besides the throttle); ``SliceCount(app, throttle=Throttle({"/r": ...}))``;
``@slicecount.limit`` on the view (fixed window, sliding window, local quota of 100);
flask-limiter's ``@limiter.limit`` (fixed-window, sliding-window-counter, moving-window).
Starlette: the same with ``SliceCountMiddleware``, ``@slicecount.limit`` on an async
endpoint, and slowapi's ``@limiter.limit`` on it. slowapi checks with the blocking redis-py
client inside the async endpoint (it blocks the event loop for the round trip); slicecount's
async checks use redis.asyncio, which costs more per round trip in one process (on the 2-core
machine this was written on, a bare EVALSHA: 207 us wall / 176 us CPU against 120 / 90 with
the blocking client), so slowapi comes out cheaper in this sequential measurement.

Redis round trips per request come from the server's ``INFO`` deltas around each variant's
timed loop: ``total_reads_processed`` (one read event per command or pipeline a client sends)
and ``commandstats`` for which commands (commands a Lua script calls are counted there too,
beside the one EVALSHA that ran it). slicecount's request counting buffers in memory; its
flush (one pipeline a round) is left out of both the time and the round trips (that is what
bench_middleware.py measures).

Targets (issue 14): slicecount's overhead at most the peer's (vs peer <= 1.0x), and the local
quota's far below it (~0.01 round trips a request).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import redis
from flask import Flask
from flask_limiter import Limiter as FlaskLimiter
from flask_limiter.util import get_remote_address
from slowapi import Limiter as SlowLimiter
from slowapi import _rate_limit_exceeded_handler
from slowapi.errors import RateLimitExceeded
from slowapi.util import get_remote_address as slow_remote_address
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from werkzeug.test import EnvironBuilder

import slicecount
from figures import Figure, emit, json_flag  # beside this file (python puts it on sys.path)
from slicecount import Limiter, Recorder, Settings, Store, Throttle
from slicecount.embedded import EmbeddedRedis
from slicecount.middleware.flask import SliceCount
from slicecount.middleware.starlette import SliceCountMiddleware
from wsgi_requests import time_wsgi

LIMIT = "1000000/minute"
ROUTE = "/r"
DEADLINE = 0.5
LOCAL_QUOTA = 100
STRATEGIES = {"fixed": "fixed-window", "sliding": "sliding-window-counter"}
"""slicecount's strategy -> the limits library's (flask-limiter, slowapi)."""

WSGIApp = Callable[[dict[str, Any], Any], Iterable[bytes]]
ASGIApp = Callable[..., Awaitable[None]]


@dataclass
class Variant:
    """One app to time; ``peer``: the variant its overhead is divided by."""

    key: str
    label: str
    app: Any
    peer: str | None = None
    times: list[float] = field(default_factory=list)  # us per request, one per round
    requests: int = 0
    reads: int = 0
    commands: Counter[str] = field(default_factory=Counter)


class Limiters:
    """Every slicecount Limiter the run makes (closed at its end)."""

    def __init__(self, settings: Settings, recorder: Recorder) -> None:
        self.settings, self.recorder = settings, recorder
        self.made: list[Limiter] = []

    def throttle(self, limits: dict[str, str] | None = None, **options: Any) -> Throttle:
        limiter = Limiter(self.settings, deadline=DEADLINE, recorder=self.recorder, **options)
        self.made.append(limiter)
        return Throttle(limits, limiter=limiter, recorder=self.recorder)


# -- Flask ---------------------------------------------------------------------------------


def flask_app(decorate: Callable[[Any], Any] | None = None) -> Flask:
    app = Flask("bench")

    def r() -> str:
        return "ok"

    app.get(ROUTE)(decorate(r) if decorate is not None else r)
    return app


def flask_variants(made: Limiters, recorder: Recorder, url: str) -> list[Variant]:
    counting = flask_app()
    SliceCount(counting, recorder=recorder)
    ours = flask_app()
    SliceCount(ours, recorder=recorder, throttle=made.throttle({ROUTE: LIMIT}))
    variants = [
        Variant("bare", "bare app", flask_app()),
        Variant("counting", "slicecount counting only (no limit)", counting),
        Variant("slicecount", "slicecount SliceCount + Throttle", ours, "flask_limiter_fixed"),
    ]
    for strategy, options in (
        ("fixed", {}),
        ("sliding", {"strategy": "sliding"}),
        ("local", {"local_quota": LOCAL_QUOTA}),
    ):
        throttle = made.throttle(**options)
        app = flask_app(slicecount.limit(LIMIT, throttle=throttle))
        peer = "flask_limiter_sliding" if strategy == "sliding" else "flask_limiter_fixed"
        what = f"local quota {LOCAL_QUOTA}" if strategy == "local" else strategy
        variants.append(Variant(f"decorator_{strategy}", f"@slicecount.limit {what}", app, peer))
    for name, strategy in (
        ("fixed", "fixed-window"),
        ("sliding", "sliding-window-counter"),
        ("moving", "moving-window"),
    ):
        limiter = FlaskLimiter(
            get_remote_address, storage_uri=url, strategy=strategy, key_prefix=name
        )  # (a prefix each: a moving window's key is a list, a fixed window's a string)
        app = flask_app(limiter.limit(LIMIT))
        limiter.init_app(app)
        variants.append(Variant(f"flask_limiter_{name}", f"flask-limiter {strategy}", app))
    return variants


def time_wsgi_checked(app: WSGIApp, requests: int) -> float:
    environ = EnvironBuilder(path=ROUTE).get_environ()
    environ["REMOTE_ADDR"] = "127.0.0.1"  # what a server sets (the throttles' key)
    refused: list[str] = []

    def start_response(status: str, headers: Any, exc_info: Any = None) -> Any:
        if not status.startswith("200"):
            refused.append(status)

    spent = time_wsgi(app, environ, requests, start_response)
    if refused:
        raise SystemExit(f"{app!r} answered {refused[0]} (and {len(refused) - 1} more)")
    return spent


async def wsgi_timed(app: WSGIApp, requests: int) -> float:
    return time_wsgi_checked(app, requests)


# -- Starlette -----------------------------------------------------------------------------


async def r(request: Request) -> Response:
    return PlainTextResponse("ok")


def starlette_app(endpoint: Callable[[Request], Awaitable[Response]] = r) -> Starlette:
    return Starlette(routes=[Route(ROUTE, endpoint)])


def starlette_variants(made: Limiters, recorder: Recorder, url: str) -> list[Variant]:
    counting = starlette_app()
    counting.add_middleware(SliceCountMiddleware, recorder=recorder)
    ours = starlette_app()
    ours.add_middleware(
        SliceCountMiddleware, recorder=recorder, throttle=made.throttle({ROUTE: LIMIT})
    )
    variants = [
        Variant("bare", "bare app", starlette_app()),
        Variant("counting", "slicecount counting only (no limit)", counting),
        Variant("slicecount", "slicecount SliceCountMiddleware + Throttle", ours, "slowapi_fixed"),
    ]
    for strategy, options in (
        ("fixed", {}),
        ("sliding", {"strategy": "sliding"}),
        ("local", {"local_quota": LOCAL_QUOTA}),
    ):
        throttle = made.throttle(**options)
        app = starlette_app(slicecount.limit(LIMIT, throttle=throttle)(r))
        peer = "slowapi_sliding" if strategy == "sliding" else "slowapi_fixed"
        what = f"local quota {LOCAL_QUOTA}" if strategy == "local" else strategy
        variants.append(Variant(f"decorator_{strategy}", f"@slicecount.limit {what}", app, peer))
    for name, strategy in (
        ("fixed", "fixed-window"),
        ("sliding", "sliding-window-counter"),
        ("moving", "moving-window"),
    ):
        limiter = SlowLimiter(
            key_func=slow_remote_address, storage_uri=url, strategy=strategy, key_prefix=name
        )
        app = starlette_app(limiter.limit(LIMIT)(r))
        app.state.limiter = limiter
        app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)  # type: ignore[arg-type]
        variants.append(Variant(f"slowapi_{name}", f"slowapi {strategy}", app))
    return variants


async def time_asgi(app: ASGIApp, requests: int) -> float:
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": ROUTE, "raw_path": ROUTE.encode(), "root_path": "",
        "query_string": b"", "headers": [(b"host", b"bench")], "server": ("bench", 80),
        "client": ("127.0.0.1", 5000),
    }  # fmt: skip
    refused: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start" and message["status"] != 200:
            refused.append(message["status"])

    started = time.perf_counter()
    for _ in range(requests):
        await app(dict(scope), receive, send)
    spent = time.perf_counter() - started
    if refused:
        raise SystemExit(f"{app!r} answered {refused[0]} (and {len(refused) - 1} more)")
    return spent / requests * 1e6


# -- Redis round trips ---------------------------------------------------------------------


class ServerStats:
    """What the server did between two snapshots (one INFO each), minus the snapshots' own."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.idle_reads, self.idle_commands = 0, Counter[str]()
        first, second = self.snapshot(), self.snapshot()
        self.idle_reads, self.idle_commands = self.delta(first, second)

    def snapshot(self) -> dict[str, Any]:
        info: dict[str, Any] = self.client.info("all")
        return info

    def delta(self, before: dict[str, Any], after: dict[str, Any]) -> tuple[int, Counter[str]]:
        reads = after["total_reads_processed"] - before["total_reads_processed"]
        commands: Counter[str] = Counter()
        for key, value in after.items():
            if key.startswith("cmdstat_"):
                calls = value["calls"] - before.get(key, {}).get("calls", 0)
                if calls:
                    commands[key.removeprefix("cmdstat_").upper()] = calls
        return reads, commands

    def measured(self, before: dict[str, Any], after: dict[str, Any]) -> tuple[int, Counter[str]]:
        reads, commands = self.delta(before, after)
        commands.subtract(self.idle_commands)
        return reads - self.idle_reads, +commands

    def close(self) -> None:
        self.client.close()


# -- the run -------------------------------------------------------------------------------


async def rounds(
    variants: list[Variant],
    count: int,
    warmup: int,
    stats: ServerStats,
    timed: Callable[[Any, int], Awaitable[float]],
    flush: Callable[[], object],
) -> None:
    """``count`` rounds over every variant (the first one rotating); a warm-up first (it
    connects, loads the scripts). The snapshots and the flush are outside the timed loops."""
    for variant in variants:
        await timed(variant.app, warmup)
    flush()
    for i in range(count):
        for variant in variants[i % len(variants) :] + variants[: i % len(variants)]:
            before = stats.snapshot()
            variant.times.append(await timed(variant.app, variant.requests))
            reads, commands = stats.measured(before, stats.snapshot())
            variant.reads += reads
            variant.commands.update(commands)
            flush()


def report(framework: str, variants: list[Variant]) -> list[Figure]:
    by_key = {variant.key: variant for variant in variants}
    bare = by_key["bare"].times
    rounds_ = len(bare)
    over = {
        v.key: statistics.median(t - b for t, b in zip(v.times, bare, strict=True))
        for v in variants
    }
    print(
        f"\n{framework}: us per request, median of {rounds_} rounds of "
        f"{by_key['bare'].requests:,} (overhead: median of the per-round differences to bare)"
    )
    print(f"  {'':<44} {'p50':>7} {'best':>7} {'overhead':>9} {'vs peer':>8}  Redis per request")
    key = framework.lower()
    figures = [Figure(f"{key}.bare", f"{framework} bare app", statistics.median(bare), "us/req",
                      "lower")]  # fmt: skip
    for v in variants:
        total = v.requests * rounds_
        trips = v.reads / total
        calls = " ".join(f"{n / total:.2f} {name}" for name, n in v.commands.most_common())
        ratio = None
        if v.peer is not None and over[v.peer] > 0:
            ratio = over[v.key] / over[v.peer]
        shown_over = "" if v.key == "bare" else f"{over[v.key]:9.1f}"
        shown_ratio = f"{ratio:7.2f}x" if ratio is not None else ""
        print(
            f"  {v.label:<44} {statistics.median(v.times):7.1f} {min(v.times):7.1f} "
            f"{shown_over:>9} {shown_ratio:>8}  {trips:.2f} round trips ({calls or 'none'})"
        )
        if v.key == "bare":
            continue
        figures += [
            Figure(f"{key}.{v.key}.overhead", f"{framework} {v.label} overhead", over[v.key],
                   "us/req", "lower"),
            Figure(f"{key}.{v.key}.round_trips", f"{framework} {v.label} Redis round trips",
                   trips, "per req", "lower"),
        ]  # fmt: skip
        if v.peer is not None:
            figures.append(
                Figure(f"{key}.{v.key}.vs_peer", f"{framework} {v.label} / {by_key[v.peer].label}",
                       ratio, "x", "lower")
            )  # fmt: skip
    throttle_share = over["slicecount"] - over["counting"]
    print(
        f"  the middleware's throttle alone (SliceCount + Throttle - counting only): "
        f"{throttle_share:.1f} us"
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=200)
    json_flag(parser)
    args = parser.parse_args()

    with EmbeddedRedis() as server, Store.from_url(server.url) as store:
        settings = Settings(redis_url=server.url)
        recorder = Recorder(store, flush_interval=3600)
        made = Limiters(settings, recorder)
        stats = ServerStats(server.url)

        wsgi = flask_variants(made, recorder, server.url)
        for variant in wsgi:
            variant.requests = args.requests
        asyncio.run(rounds(wsgi, args.rounds, args.warmup, stats, wsgi_timed, recorder.flush))
        figures = report("Flask", wsgi)

        async def run_asgi() -> list[Variant]:
            variants = starlette_variants(made, recorder, server.url)
            for variant in variants:
                variant.requests = args.requests
            await rounds(variants, args.rounds, args.warmup, stats, time_asgi, recorder.flush)
            for limiter in made.made:  # (redis.asyncio's connections belong to this loop)
                await limiter.aclose()
            return variants

        figures += report("Starlette", asyncio.run(run_asgi()))
        stats.close()
        recorder.close()
    if args.json:
        emit("throttle", figures)


if __name__ == "__main__":
    main()
