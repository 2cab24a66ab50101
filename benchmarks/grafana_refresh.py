"""A dashboard's Prometheus targets sent as Grafana sends them on a refresh.

Grafana (10/11, the Prometheus datasource) computes each panel's interval from the time range
and the panel's maxDataPoints (its width in pixels), rounds it to a "nice" interval
(``roundInterval`` in Grafana's kbn), and keeps it at least the datasource's scrape interval
(``timeInterval``, 15 s here). That interval is the range query's ``step`` and ``$__interval``;
``$__rate_interval`` is max(``$__interval`` + scrape interval, 4 x scrape interval), written as
a Go duration (``1m0s``); ``$__range`` is the range in seconds (``86400s``). A range query's
start and end are aligned down to the step. Variables set to "All" take the variable's
``allValue`` (``.*`` in the shipped dashboards). Targets go out as form POSTs to
``/api/v1/query_range`` (``/api/v1/query`` at the range's end for an instant target), at most
MAX_CONCURRENT at a time (Grafana's per-datasource concurrency); the refresh ends with the
last answer.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

MAX_DATA_POINTS = 900
"""A half-width panel on a 1 920-pixel screen: about 900 pixels, so 900 points at most."""
MAX_CONCURRENT = 6
"""Requests Grafana has in flight to one datasource."""
NICE_INTERVALS = (  # (below this many s, round to this many s): Grafana's roundInterval, >= 1 s
    (1.5, 1), (3.5, 2), (7.5, 5), (12.5, 10), (17.5, 15), (25, 20), (45, 30), (90, 60),
    (210, 120), (450, 300), (750, 600), (1050, 900), (1500, 1200), (2700, 1800),
    (5400, 3600), (9000, 7200), (16200, 10800), (32400, 21600), (86400, 43200),
)  # fmt: skip


@dataclass(frozen=True)
class Request:
    panel: str
    ref: str
    path: str  # "query_range" or "query"
    form: dict[str, str]


@dataclass(frozen=True)
class Answer:
    status: int  # HTTP status; 0: no answer (a connection error)
    body: bytes
    seconds: float


def grafana_interval(range_seconds: int, scrape: int) -> int:
    """The step Grafana sends for a panel of MAX_DATA_POINTS over ``range_seconds``."""
    raw = range_seconds / MAX_DATA_POINTS
    nice = next((to for below, to in NICE_INTERVALS if raw < below), 86400)
    return max(nice, scrape)


def go_duration(seconds: int) -> str:
    """As Go's time.Duration prints it (how Grafana writes ``$__rate_interval``)."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def short_duration(seconds: int) -> str:
    """How Grafana writes ``$__interval``: ``15s``, ``2m``, ``1h``."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def dashboard_targets(path: Path) -> list[tuple[str, str, str, bool]]:
    """(panel title, refId, expr with "All" variables interpolated, instant?) of every
    Prometheus target of the dashboard."""
    dashboard = json.loads(path.read_text())
    values: dict[str, str] = {}
    for variable in dashboard.get("templating", {}).get("list", []):
        if not variable.get("includeAll") or "allValue" not in variable:
            raise SystemExit(f"{path}: variable ${variable.get('name')} has no custom allValue")
        values[variable["name"]] = variable["allValue"]
    targets = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for name in sorted(values, key=len, reverse=True):
                expr = expr.replace(f"${{{name}}}", values[name]).replace(f"${name}", values[name])
            instant = bool(target.get("instant")) and not target.get("range")
            targets.append((panel["title"], target["refId"], expr, instant))
    return targets


def refresh_requests(
    targets: list[tuple[str, str, str, bool]], end: int, range_seconds: int, scrape: int
) -> list[Request]:
    """The requests of one refresh of "last ``range_seconds``" ending at ``end``."""
    step = grafana_interval(range_seconds, scrape)
    rate_interval = go_duration(max(step + scrape, 4 * scrape))
    requests = []
    for panel, ref, expr, instant in targets:
        query = (
            expr.replace("$__rate_interval", rate_interval)
            .replace("$__interval", short_duration(step))
            .replace("$__range", f"{range_seconds}s")
        )
        if instant:
            form = {"query": query, "time": str(end)}
        else:
            start = (end - range_seconds) // step * step
            form = {"query": query, "start": str(start), "end": str(end // step * step),
                    "step": str(step)}  # fmt: skip
        requests.append(Request(panel, ref, "query" if instant else "query_range", form))
    return requests


class Client:
    """Keep-alive connections to one server, one per worker thread, as a browser keeps them."""

    def __init__(self, base: str) -> None:
        self.base = base
        parts = urlsplit(base)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.local = threading.local()
        self.pool = ThreadPoolExecutor(MAX_CONCURRENT, thread_name_prefix=f"client-{self.port}")

    def ask(self, path: str, form: dict[str, str]) -> Answer:
        """One form POST to ``/api/v1/<path>``; the time until its last byte."""
        body = urlencode(form).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        started = time.perf_counter()
        for attempt in (1, 2):
            connection = getattr(self.local, "connection", None)
            if connection is None:
                connection = http.client.HTTPConnection(self.host, self.port, timeout=120)
                self.local.connection = connection
            try:
                connection.request("POST", f"/api/v1/{path}", body, headers)
                response = connection.getresponse()
                data = response.read()
                return Answer(response.status, data, time.perf_counter() - started)
            except (OSError, http.client.HTTPException) as exc:
                connection.close()  # the server closed an idle connection: try once more
                self.local.connection = None
                if attempt == 2:
                    return Answer(0, str(exc).encode(), time.perf_counter() - started)
        raise AssertionError("unreachable")

    def refresh(self, requests: list[Request]) -> tuple[float, list[Answer]]:
        """Every request, MAX_CONCURRENT at a time; seconds until the last answer."""
        started = time.perf_counter()
        answers = list(self.pool.map(lambda r: self.ask(r.path, r.form), requests))
        return time.perf_counter() - started, answers

    def json(self, path: str, form: dict[str, str]) -> Any:
        """The decoded answer of one request; SystemExit naming it when it is not a success."""
        answer = self.ask(path, form)
        try:
            decoded = json.loads(answer.body)
        except ValueError:
            decoded = None
        if answer.status != 200 or not isinstance(decoded, dict):
            raise SystemExit(
                f"{self.port} {path} {form}: HTTP {answer.status} {answer.body[:300]!r}"
            )
        return decoded

    def close(self) -> None:
        self.pool.shutdown()
