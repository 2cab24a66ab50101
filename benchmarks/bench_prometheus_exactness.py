"""Exact counts beside Prometheus's estimates: the same PromQL asked of both, next to the truth.

    python benchmarks/bench_prometheus_exactness.py [--minutes 5 | --quick]
                                                    [--scrape-interval 1] [--json]

One gunicorn worker serves a small Flask app that counts each request twice: with slicecount's
middleware (into a private redis-server) and with a prometheus_client Counter
``http_requests{method,route,status}`` incremented in the same request, exposed at /metrics.
Debian's Prometheus 2.x (``/usr/bin/prometheus``) scrapes /metrics every ``--scrape-interval``
seconds; slicecount's datasource serves the same Redis. A client sends a fixed schedule: a
warm-up (the rest of the current minute, not evaluated), then ``--minutes`` whole wall-clock
minutes in which each route gets a known number of requests, spread evenly, changing from
minute to minute, none within GUARD s of a minute boundary. The truth is counted from the
time the server handled each request (its X-Handled-At header). Afterwards both servers get
the same ``POST /api/v1/query`` with ``sum by (route) (increase(http_requests_total[1m]))`` at
the end of each whole minute. Prometheus extrapolates between its scrapes, so a few % off is
expected; slicecount sums its slices and should be exact. Nothing is asserted: figures are
printed (and a server that does not start exits non-zero).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from flask import Flask, Response, request
from prometheus_client import CollectorRegistry, Counter, make_wsgi_app
from werkzeug.middleware.dispatcher import DispatcherMiddleware

import slicecount
from children import Child  # beside this file (python puts it on sys.path)
from figures import Figure, emit, json_flag
from slicecount import Store, parse_series
from slicecount.embedded import EmbeddedRedis, free_port, listen
from slicecount.middleware.flask import SliceCount

HERE = Path(__file__).resolve().parent
QUERY = "sum by (route) (increase(http_requests_total[1m]))"
"""Both sides: slicecount names ``http.requests`` ``http_requests_total`` in PromQL, and the
prometheus_client Counter ``http_requests`` is exported as ``http_requests_total``."""
ROUTES = {  # route template (the label both count) -> (method, path the client sends)
    "/": ("GET", "/"),
    "/users/<int:user_id>": ("GET", "/users/7"),
    "/orders": ("POST", "/orders"),
}
PER_MINUTE = {  # requests per whole minute, minute i takes item i % 5: the rate keeps changing
    "/": (300, 120, 600, 60, 240),
    "/users/<int:user_id>": (600, 900, 150, 450, 30),
    "/orders": (30, 0, 90, 7, 180),
}
WARMUP_EVERY = 1.0
"""Seconds between two warm-up requests of a route: every series exists before minute one."""
GUARD = 0.25
"""No request is scheduled this close to a minute boundary, so which minute a request falls
in cannot depend on which clock (client, handler, slicecount's count at the response's end)
is asked."""


# -- the app (gunicorn imports this module and calls create_app()) ---------------------------


def create_app() -> Flask:
    """Flask app counted by slicecount (the default Recorder, from SLICECOUNT_*) and by a
    prometheus_client Counter in its own registry, scraped at /metrics."""
    app = Flask("exactness")
    registry = CollectorRegistry()
    requests_total = Counter(
        "http_requests", "Requests handled", ["method", "route", "status"], registry=registry
    )
    SliceCount(app)

    @app.get("/")
    def index() -> str:
        return "index"

    @app.get("/users/<int:user_id>")
    def user(user_id: int) -> str:
        return f"user {user_id}"

    @app.post("/orders")
    def order() -> tuple[str, int]:
        return "created", 201

    @app.after_request
    def count(response: Response) -> Response:
        # Where a Prometheus user counts: same request, same route template as slicecount's.
        route = request.url_rule.rule if request.url_rule is not None else "<unmatched>"
        requests_total.labels(request.method, route, str(response.status_code)).inc()
        response.headers["X-Handled-At"] = repr(time.time())  # the truth's clock
        return response

    # /metrics outside both counters: scrapes are not traffic.
    routed = DispatcherMiddleware(app.wsgi_app, {"/metrics": make_wsgi_app(registry)})
    app.wsgi_app = routed  # type: ignore[method-assign]
    return app


# -- servers ---------------------------------------------------------------------------------


def prometheus_config(app_port: int, interval: int) -> str:
    return (
        f"global:\n  scrape_interval: {interval}s\n  scrape_timeout: {interval}s\n"
        f"scrape_configs:\n  - job_name: app\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{app_port}']\n"
    )


# -- traffic and truth -----------------------------------------------------------------------


def schedule(start: float, first_minute: int, minutes: int) -> list[tuple[float, str]]:
    """(send time, route) of every request in time order: the warm-up from ``start``, then
    PER_MINUTE's counts spread evenly over each whole minute, away from its edges."""
    sends: list[tuple[float, str]] = []
    for route, counts in PER_MINUTE.items():
        at = start
        while at < first_minute - GUARD:
            sends.append((at, route))
            at += WARMUP_EVERY
        for i in range(minutes):
            n, begin = counts[i % len(counts)], first_minute + 60 * i + GUARD
            sends += [(begin + (60 - 2 * GUARD) * (k + 0.5) / n, route) for k in range(n)]
    return sorted(sends)


def send(port: int, sends: list[tuple[float, str]]) -> tuple[list[tuple[float, str]], float]:
    """Sends each request at its time on one keep-alive connection; returns (server time,
    route) of every request answered, and the longest delay behind the schedule (s)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    handled: list[tuple[float, str]] = []
    late = 0.0
    for at, route in sends:
        time.sleep(max(0.0, at - time.time()))
        late = max(late, time.time() - at)
        method, path = ROUTES[route]
        for attempt in (1, 2):
            try:
                connection.request(method, path)
                response = connection.getresponse()
                response.read()
                break
            except ConnectionError:  # gunicorn closed the idle connection: nothing was served
                connection.close()  # (http.client reconnects on the next request)
                if attempt == 2:
                    raise
        handled.append((float(response.getheader("X-Handled-At", "nan")), route))
    connection.close()
    return handled, late


def truth(handled: list[tuple[float, str]], end: int) -> dict[str, float]:
    """Requests per route handled in the minute [end - 60, end)."""
    counts = dict.fromkeys(ROUTES, 0.0)
    for at, route in handled:
        if end - 60 <= at < end:
            counts[route] += 1
    return counts


# -- the queries -----------------------------------------------------------------------------


def instant_query(base: str, at: int) -> dict[str, float] | str:
    """{route: value} of ``POST /api/v1/query`` (Prometheus's HTTP API), or why there is none."""
    form = urllib.parse.urlencode({"query": QUERY, "time": str(at)}).encode()
    try:
        with urllib.request.urlopen(f"{base}/api/v1/query", form, timeout=30) as response:
            answer = json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return "it has no /api/v1/query yet (404)"
        return f"HTTP {exc.code}: {exc.read()[:300].decode(errors='replace')}"
    except OSError as exc:
        return f"unreachable: {exc}"
    data = answer.get("data", {}) if isinstance(answer, dict) else {}
    if answer.get("status") != "success" or data.get("resultType") != "vector":
        return f"unexpected answer: {json.dumps(answer)[:300]}"
    return {s["metric"].get("route", ""): float(s["value"][1]) for s in data["result"]}


def recorded(redis_url: str, first_minute: int, end: int) -> dict[tuple[int, str], int]:
    """Requests per (minute, route) in slicecount's Redis, read directly at 60 s slices: the
    recording half checked without the query API."""
    counts: dict[tuple[int, str], int] = {}
    with Store.from_url(redis_url) as store:
        ids = store.series("http.requests", 60)
        for series, values in store.read(ids, 60, first_minute, end - 60).items():
            route = str(parse_series(series)[1]["route"])
            for i, value in enumerate(values):
                key = (first_minute + 60 * i, route)
                counts[key] = counts.get(key, 0) + (value or 0)
    return counts


# -- the report ------------------------------------------------------------------------------

TOTAL = "all routes"


@dataclass
class Tally:
    """One system's |error %| per (time, route) and per time (all routes), where the truth is
    not 0; how many (time, route) answers were exact; why it did not answer, if it did not."""

    per_route: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    exact: int = 0
    failure: str | None = None


def hhmm(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%H:%M:%S")


def cell(value: float | None, true: float) -> str:
    """value, error and error % (n/a when the truth is 0), or blanks."""
    if value is None:
        return f"{'-':>10} {'':>8} {'':>8}"
    error = value - true
    percent = f"{100 * error / true:+7.2f}%" if true else f"{'n/a':>8}"
    return f"{value:10.2f} {error:+8.2f} {percent}"


def compare(
    at: int, true: dict[str, float], systems: dict[str, str], tallies: dict[str, Tally]
) -> None:
    """Ask every system at ``at``; print each route and the total, truth beside the answers."""
    answers = {name: instant_query(url, at) for name, url in systems.items()}
    for name, answer in answers.items():
        if isinstance(answer, str) and tallies[name].failure is None:
            tallies[name].failure = answer
            print(f"\n{name}: {answer}; its column stays empty")
    print(f"\ntime={at} ({hhmm(at)} UTC: requests handled {hhmm(at - 60)}-{hhmm(at)})")
    header = "".join(f"  {name:>10} {'error':>8} {'error %':>8}" for name in systems)
    print(f"  {'route':<22}{'truth':>7}{header}")
    for row in [*ROUTES, TOTAL]:
        want = sum(true.values()) if row == TOTAL else true[row]
        line = f"  {row:<22}{want:7.0f}"
        for name, answer in answers.items():
            if isinstance(answer, str):
                line += "  " + cell(None, want)
                continue
            # A route missing from the answer has no series there: it counted nothing.
            got = sum(answer.values()) if row == TOTAL else answer.get(row, 0.0)
            line += "  " + cell(got, want)
            tally = tallies[name]
            if row != TOTAL:
                tally.exact += got == want
            if want:
                (tally.total if row == TOTAL else tally.per_route).append(
                    abs(100 * (got - want) / want)
                )
        print(line)


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


# -- main ------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=5, help="whole minutes of traffic")
    parser.add_argument("--quick", action="store_true", help="2 whole minutes (~3 min run)")
    parser.add_argument(
        "--scrape-interval", type=int, default=1, help="Prometheus scrape interval (s)"
    )
    parser.add_argument("--prometheus", default=shutil.which("prometheus") or "/usr/bin/prometheus")
    json_flag(parser)
    args = parser.parse_args()
    minutes = 2 if args.quick else args.minutes
    if not os.access(args.prometheus, os.X_OK):
        print(f"skipped: no Prometheus binary at {args.prometheus} (apt install prometheus)")
        return
    began = time.monotonic()
    version = subprocess.run(
        [args.prometheus, "--version"], capture_output=True, text=True, check=False
    )
    print((version.stdout + version.stderr).strip().partition("\n")[0] or args.prometheus)

    # The children import the slicecount this process imported, and this file (gunicorn).
    tree = str(Path(slicecount.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tree, str(HERE)]),
           "PYTHONUNBUFFERED": "1"}  # fmt: skip
    py = sys.executable
    # The app and the datasource serve on sockets bound here: a reply on their ports is
    # theirs. Prometheus binds its own port (it takes no socket): a free one, checked.
    app_sock, ds_sock, prom_port = listen(), listen(), free_port()
    app_port, ds_port = app_sock.getsockname()[1], ds_sock.getsockname()[1]
    with contextlib.ExitStack() as stack:
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-prom-")))
        redis = stack.enter_context(EmbeddedRedis())
        env["SLICECOUNT_REDIS_URL"] = redis.url
        env["SLICECOUNT_FLUSH_INTERVAL"] = "0.25"  # counts reach Redis well before the queries

        app = Child("app", [
            py, "-m", "gunicorn", "-w", "1", "-k", "gthread", "--threads", "4",
            "-b", f"fd://{app_sock.fileno()}", "--keep-alive", "5",
            "-c", "python:slicecount.examples.gunicorn_conf",  # the worker flushes at exit
            f"{Path(__file__).stem}:create_app()",
        ], logs, env, app_sock)  # fmt: skip
        stack.callback(app.stop)
        app.wait_ready(f"http://127.0.0.1:{app_port}/metrics")

        (logs / "prometheus.yml").write_text(prometheus_config(app_port, args.scrape_interval))
        prometheus = Child("prometheus", [
            args.prometheus, f"--config.file={logs / 'prometheus.yml'}",
            f"--storage.tsdb.path={logs / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn",
        ], logs, env)  # fmt: skip
        stack.callback(prometheus.stop)
        prom_url = f"http://127.0.0.1:{prom_port}"
        prometheus.wait_ready(f"{prom_url}/-/ready")

        datasource = Child("datasource", [  # `slicecount datasource`, on the socket
            py, "-m", "uvicorn", "--factory", "slicecount.datasource.app:from_env",
            "--fd", str(ds_sock.fileno()), "--log-level", "warning",
        ], logs, env, ds_sock)  # fmt: skip
        stack.callback(datasource.stop)
        ds_url = f"http://127.0.0.1:{ds_port}"
        datasource.wait_ready(f"{ds_url}/")

        # Warm-up: at least a few scrapes of every series before the first whole minute.
        start = time.time() + 0.5
        first_minute = int((start + max(5, 3 * args.scrape_interval)) // 60 + 1) * 60
        end = first_minute + 60 * minutes
        print(f"app :{app_port} (gunicorn, 1 worker)  prometheus :{prom_port} (scrape every "
              f"{args.scrape_interval} s)  slicecount datasource :{ds_port}")  # fmt: skip
        print(f"traffic {hhmm(start)} to {hhmm(end)} UTC: warm-up {first_minute - start:.0f} s "
              f"(1 req/s per route, not evaluated), then {minutes} whole minutes:")  # fmt: skip
        print(f"  {'minute':<10}" + "".join(f"{route:>22}" for route in ROUTES))
        for i in range(minutes):
            counts = "".join(f"{PER_MINUTE[r][i % 5]:>22}" for r in ROUTES)
            print(f"  {hhmm(first_minute + 60 * i):<10}{counts}")
        handled, late = send(app_port, schedule(start, first_minute, minutes))
        near = sum(1 for at, _ in handled if abs(at - round(at / 60) * 60) < 0.05)
        print(f"{len(handled)} requests answered, at most {late * 1000:.0f} ms behind schedule; "
              f"{near} handled within 50 ms of a minute boundary")  # fmt: skip
        # The last counts reach Redis within a flush and Prometheus within a scrape or two.
        time.sleep(max(0.0, end + 2 * args.scrape_interval + 1 - time.time()))

        stored = recorded(redis.url, first_minute, end)
        minute_ends = range(first_minute + 60, end + 1, 60)
        agree = sum(
            stored.get((at - 60, route), 0) == count
            for at in minute_ends
            for route, count in truth(handled, at).items()
        )
        values = len(minute_ends) * len(ROUTES)
        print(f"slicecount's Redis read directly (60 s slices, no query API): {agree}/{values} "
              "(minute, route) counts equal the truth")  # fmt: skip

        systems = {"prometheus": prom_url, "slicecount": ds_url}
        tallies = {name: Tally() for name in systems}
        print(f"\nquery (both, POST /api/v1/query): {QUERY}")
        for at in minute_ends:
            compare(at, truth(handled, at), systems, tallies)

    print(f"\nmean |error| over {values} (time, route) values (% where the truth is not 0):")
    figures = []
    for name, tally in tallies.items():
        per_route, total = mean(tally.per_route), mean(tally.total)
        if per_route is None or total is None:
            print(f"  {name:<11} no figures: {tally.failure}")
        else:
            print(f"  {name:<11} per route {per_route:6.2f} %   all routes {total:6.2f} %   "
                  f"exact {tally.exact}/{values}")  # fmt: skip
        figures.append(Figure(f"{name}.error", f"{name} mean |error| per route", per_route,
                              "%", "lower"))  # fmt: skip
    print(f"run time {time.monotonic() - began:.0f} s")
    if args.json:
        emit("prometheus_exactness", figures)


if __name__ == "__main__":
    main()
