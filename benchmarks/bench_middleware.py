"""Per-request overhead of the middleware, in-process (the app called directly, no sockets).

    python benchmarks/bench_middleware.py [--requests 3000] [--rounds 25] [--json]

For Flask and for Starlette, one run measures the bare app, the app with slicecount, with the
usual Prometheus exporter (prometheus_flask_exporter / starlette_exporter) and with a naive
book-style middleware that calls ``Store.incr`` on every request. Overhead = variant - bare,
in microseconds per request; the ratios are what to compare (the machine is shared and noisy).
Targets (issue 3): slicecount's overhead <= 1/4 of either exporter's, and >= 50x less than the
naive middleware's, with every request landing in Redis.

Then what a traced request costs (issue 33), around a bare ASGI app and a bare WSGI app (no
framework: its cost would hide a microsecond): slicecount with exemplars off (today's path),
an untraced request, one with a sampled ``traceparent`` and one inside an OpenTelemetry SDK
span; each round runs every variant back to back. As above, the best round of each is the
least disturbed: extras are best - best (beside them, the median of each round's difference,
which a noisy machine inflates). Target: untraced costs nothing, traced at most 1 us more.
``compare.py --before main`` runs the same on main's code (no exemplars: its "untraced" and
"traced" are today's cost of such requests).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask
from prometheus_client import CollectorRegistry
from prometheus_flask_exporter import PrometheusMetrics
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette_exporter import PrometheusMiddleware
from werkzeug.test import EnvironBuilder

from figures import Figure, emit, json_flag  # beside this file (python puts it on sys.path)
from slicecount import AsyncStore, Recorder, Store, parse_series
from slicecount.embedded import EmbeddedRedis
from slicecount.middleware.flask import SliceCount
from slicecount.middleware.starlette import SliceCountMiddleware
from wsgi_requests import time_wsgi

WSGIApp = Callable[[dict[str, Any], Any], Iterable[bytes]]
ASGIApp = Callable[..., Any]


# -- Flask ---------------------------------------------------------------------------------


def flask_app() -> Flask:
    app = Flask("bench")

    @app.get("/users/<int:user_id>")
    def user(user_id: int) -> str:
        return "user"

    return app


class NaiveWSGI:
    """The book's update_counter on every request: one MULTI/EXEC round trip each."""

    def __init__(self, app: WSGIApp, store: Store) -> None:
        self.app, self.store = app, store

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        body = self.app(environ, start_response)
        self.store.incr("naive.requests", 1, {"method": environ["REQUEST_METHOD"]})
        return body


USERS_ENVIRON = EnvironBuilder(path="/users/7").get_environ()
"""The request every WSGI variant serves."""


def flask_variants(store: Store, recorder: Recorder) -> dict[str, WSGIApp]:
    bare = flask_app()
    ours = flask_app()
    SliceCount(ours, recorder=recorder)
    exporter = flask_app()
    PrometheusMetrics(exporter, registry=CollectorRegistry())
    naive = flask_app()
    naive.wsgi_app = NaiveWSGI(naive.wsgi_app, store)  # type: ignore[method-assign]
    return {"bare": bare, "slicecount": ours, "exporter": exporter, "naive": naive}


# -- Starlette -----------------------------------------------------------------------------


async def user(request: Request) -> Response:
    return PlainTextResponse("user")


def starlette_app() -> Starlette:
    return Starlette(routes=[Route("/users/{user_id:int}", user)])


class NaiveASGI:
    def __init__(self, app: ASGIApp, store: AsyncStore) -> None:
        self.app, self.store = app, store

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)
        if scope["type"] == "http":
            await self.store.incr("naive.requests", 1, {"method": scope["method"]})


async def time_asgi(
    app: ASGIApp, requests: int, after: Callable[[], object] | None = None
) -> float:
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": "/users/7", "raw_path": b"/users/7", "root_path": "",
        "query_string": b"", "headers": [(b"host", b"bench")], "server": ("bench", 80),
        "client": ("127.0.0.1", 5000),
    }  # fmt: skip

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        return None

    started = time.perf_counter()
    for _ in range(requests):
        await app(dict(scope), receive, send)
    if after is not None:
        after()
    return (time.perf_counter() - started) / requests * 1e6


def starlette_variants(astore: AsyncStore, recorder: Recorder) -> dict[str, ASGIApp]:
    ours = starlette_app()
    ours.add_middleware(SliceCountMiddleware, recorder=recorder)
    exporter = starlette_app()
    exporter.add_middleware(PrometheusMiddleware, app_name="bench")
    return {
        "bare": starlette_app(),
        "slicecount": ours,
        "exporter": exporter,
        "naive": NaiveASGI(starlette_app(), astore),
    }


# -- report --------------------------------------------------------------------------------


def report(framework: str, exporter: str, timings: dict[str, list[float]]) -> list[Figure]:
    # The machines are shared VMs with bursty neighbours: the fastest round of each variant is
    # the least disturbed one (timeit's advice), so overheads are min(variant) - min(bare).
    # Medians are printed beside them to show the spread.
    rounds = len(timings["bare"])
    best = {name: min(values) for name, values in timings.items()}
    med = {name: statistics.median(values) for name, values in timings.items()}
    over = {name: best[name] - best["bare"] for name in best}
    print(f"\n{framework}: microseconds per request, best of {rounds} rounds (median)")
    for name in ("bare", "slicecount", "exporter", "naive"):
        label = exporter if name == "exporter" else name
        extra = "" if name == "bare" else f"  overhead {over[name]:7.1f} us"
        print(f"  {label:<28} {best[name]:8.1f} us ({med[name]:8.1f}){extra}")
    key = framework.lower()
    figures = [
        Figure(f"{key}.bare", f"{framework} bare app", best["bare"], "us/req", "lower"),
        Figure(f"{key}.overhead", f"{framework} slicecount overhead", over["slicecount"],
               "us/req", "lower"),
        Figure(f"{key}.exporter_overhead", f"{framework} {exporter} overhead",
               over["exporter"], "us/req", "lower"),
    ]  # fmt: skip
    ours = over["slicecount"]
    ratio = None
    if ours <= 0.05:
        print("  slicecount overhead is below this run's noise floor; ratios not computed")
    else:
        ratio = over["exporter"] / ours
        print(f"  {exporter} overhead / slicecount overhead: {ratio:6.1f}x (target >= 4x)")
        print(
            f"  naive book-style overhead / slicecount overhead: {over['naive'] / ours:6.1f}x "
            "(target >= 50x)"
        )
    figures.append(
        Figure(f"{key}.exporter_ratio", f"{framework} exporter / slicecount overhead", ratio,
               "x", "higher")
    )  # fmt: skip
    return figures


# -- traced requests (issue 33) ------------------------------------------------------------

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
HEADERS = [(b"host", b"bench"), (b"user-agent", b"bench/1"), (b"accept", b"*/*"),
           (b"accept-encoding", b"gzip, deflate")]  # fmt: skip
"""What a browser or an HTTP client sends at least (the trace header is looked for among them)."""
TRACED = ("off", "untraced", "traceparent", "otel")


async def raw_asgi(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def raw_wsgi(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [])
    return [b"ok"]


def fixed_route(*_: Any) -> str:
    return "/users/{id}"


def tracer() -> Any:
    """An OpenTelemetry SDK tracer (spans sampled, none exported), or None without the SDK."""
    try:
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        return None
    return TracerProvider().get_tracer("bench")


def traced_variants(recorder: Recorder) -> dict[str, tuple[Any, Any] | None]:
    """(ASGI app, WSGI app) per variant; "off" is None on a tree without exemplars."""
    from slicecount.middleware.asgi import SliceCountMiddleware as ASGI
    from slicecount.middleware.wsgi import SliceCountMiddleware as WSGI

    def both(**options: Any) -> tuple[Any, Any]:
        common = {"recorder": recorder, "route_resolver": fixed_route, **options}
        return ASGI(raw_asgi, **common), WSGI(raw_wsgi, **common)

    try:
        off: tuple[Any, Any] | None = both(exemplars=False)
    except TypeError:  # main's tree: no such option, every request costs today's
        off = None
    return {"off": off, "untraced": both(), "traceparent": both(), "otel": both()}


async def time_traced_asgi(app: Any, requests: int, variant: str, span: Any) -> float:
    traced = variant == "traceparent"
    headers = [*HEADERS, (b"traceparent", TRACEPARENT.encode())] if traced else HEADERS
    scope = {"type": "http", "method": "GET", "path": "/users/7", "root_path": "",
             "headers": headers}  # fmt: skip

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        return None

    started = time.perf_counter()
    if span is not None:  # inside a span, as under OpenTelemetry's ASGI middleware
        with span():
            for _ in range(requests):
                await app(dict(scope), receive, send)
    else:
        for _ in range(requests):
            await app(dict(scope), receive, send)
    return (time.perf_counter() - started) / requests * 1e6


def time_traced_wsgi(app: Any, requests: int, variant: str, span: Any) -> float:
    environ = EnvironBuilder(path="/users/7").get_environ()
    if variant == "traceparent":
        environ["HTTP_TRACEPARENT"] = TRACEPARENT
    if span is None:
        return time_wsgi(app, environ, requests)
    with span():  # one span around the batch: each request reads it as its current one
        return time_wsgi(app, environ, requests)


def measure_traced(recorder: Recorder, requests: int, rounds: int) -> list[Figure]:
    otel = tracer()
    variants = traced_variants(recorder)
    figures: list[Figure] = []
    for kind in ("ASGI", "WSGI"):
        timings: dict[str, list[float]] = {name: [] for name, v in variants.items() if v}
        bare: list[float] = []
        for _ in range(rounds):
            for name in ("bare", *timings):
                span = None
                if name == "otel" and otel is not None:
                    span = lambda: otel.start_as_current_span("request")  # noqa: E731
                if kind == "ASGI":
                    app = raw_asgi if name == "bare" else variants[name][0]  # type: ignore[index]
                    took = asyncio.run(time_traced_asgi(app, requests, name, span))
                else:
                    app = raw_wsgi if name == "bare" else variants[name][1]  # type: ignore[index]
                    took = time_traced_wsgi(app, requests, name, span)
                (bare if name == "bare" else timings[name]).append(took)
            recorder.flush()  # the exemplars' writes outside the timed rounds, as the counts'
        base = "off" if "off" in timings else "untraced"
        best = {name: min(values) for name, values in timings.items()}
        print(f"\n{kind} around a bare app: microseconds per request, best of {rounds} rounds; "
              f"extras best - best (median of each round's difference)")  # fmt: skip
        print(f"  {'bare app':<34} {min(bare):6.2f} us")
        for name, values in timings.items():
            over = best[name] - min(bare)
            extras = []
            for other in dict.fromkeys((base, "untraced")):
                if other != name:
                    paired = statistics.median(
                        a - b for a, b in zip(values, timings[other], strict=True)
                    )
                    extras.append(f"vs {other} {best[name] - best[other]:+5.2f} ({paired:+5.2f})")
            label = {"off": "slicecount, exemplars off (today)", "untraced": "slicecount, untraced",
                     "traceparent": "slicecount, traced (traceparent)",
                     "otel": "slicecount, traced (OTel span)"}[name]  # fmt: skip
            print(f"  {label:<34} {best[name]:6.2f} us  overhead {over:5.2f}  " + "  ".join(extras))
            key = kind.lower()
            figures.append(Figure(f"{key}.{name}.overhead", f"{kind} {label} overhead", over,
                                  "us/req", "lower"))  # fmt: skip
            if name != base:
                figures.append(Figure(f"{key}.{name}.extra", f"{kind} {label} - {base}",
                                      best[name] - best[base], "us/req", "lower"))  # fmt: skip
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3_000)
    parser.add_argument("--naive-requests", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--traced-requests", type=int, default=1_000)
    parser.add_argument("--traced-rounds", type=int, default=100)
    json_flag(parser)
    args = parser.parse_args()

    with EmbeddedRedis() as server, Store.from_url(server.url) as store:
        recorder = Recorder(store, flush_interval=1.0)
        astore = AsyncStore.from_url(server.url)
        sent = 0

        wsgi = flask_variants(store, recorder)
        timings: dict[str, list[float]] = {name: [] for name in wsgi}
        for _ in range(args.rounds):
            for name, app in wsgi.items():
                count = args.naive_requests if name == "naive" else args.requests
                # slicecount's own flush (the Redis write) is inside the timed region
                after = recorder.flush if name == "slicecount" else None
                timings[name].append(time_wsgi(app, USERS_ENVIRON, count, after=after))
                sent += count if name == "slicecount" else 0
        figures = report("Flask", "prometheus_flask_exporter", timings)

        async def run_asgi() -> dict[str, list[float]]:
            apps = starlette_variants(astore, recorder)
            out: dict[str, list[float]] = {name: [] for name in apps}
            for _ in range(args.rounds):
                for name, app in apps.items():
                    count = args.naive_requests if name == "naive" else args.requests
                    after = recorder.flush if name == "slicecount" else None
                    out[name].append(await time_asgi(app, count, after))
            await astore.close()
            return out

        timings = asyncio.run(run_asgi())
        sent += args.requests * args.rounds
        figures += report("Starlette", "starlette_exporter", timings)
        # under keys of their own: the requests counted above are checked against Redis below
        with Store.from_url(server.url, prefix="traced:") as traced_store:
            traced = Recorder(traced_store, flush_interval=3600)
            figures += measure_traced(traced, args.traced_requests, args.traced_rounds)
            traced.close()

        recorder.close()
        landed = sum(
            n
            for sid in store.series("http.requests", 86400)
            for n in (v for _, v in store.get("http.requests", 86400, parse_series(sid)[1]))
        )
        print(f"\nrequests through slicecount: {sent:,}; counted in Redis: {landed:,}")
        if landed != sent:
            raise SystemExit("some requests did not land in Redis")
    if args.json:
        emit("middleware", figures)


if __name__ == "__main__":
    main()
