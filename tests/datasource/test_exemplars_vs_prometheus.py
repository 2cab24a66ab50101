"""Exemplars beside a real Prometheus: Debian's ``prometheus`` with exemplar storage scrapes
(OpenMetrics, every second) a prometheus_client histogram that observes the same traced
requests, with their traces as exemplars, as slicecount's middleware does. For the same
query and range both answer the same shape and label names; every exemplar slicecount
returns is a trace really sent, its value in its bucket and its time within its request's;
every bucket and minute with traced requests has one.

Prometheus adds its target's ``job`` and ``instance`` to what it scrapes; the scrape drops
them (``labeldrop``), so that both name the same series."""

from __future__ import annotations

import asyncio
import http.client
import json
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Histogram, make_asgi_app
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from slicecount.config import Settings
from slicecount.core.exemplars import traceparent_labels
from slicecount.core.histogram import DEFAULT_DURATION_BUCKETS
from slicecount.core.series import parse
from slicecount.datasource.app import create_app
from slicecount.embedded import EmbeddedRedis, free_port
from slicecount.middleware.starlette import SliceCountMiddleware
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from tests.serving import serving

PROMETHEUS = shutil.which("prometheus")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        PROMETHEUS is None, reason="prometheus is not installed (apt-get install prometheus)"
    ),
]

SECONDS = 8.0
LATE = 0.1
"""How late an exemplar's time may be after the client read its answer: the middleware
stamps a request when the server took its last chunk, and the client (a thread of this
process, the GIL shared) may read it first."""
SLEEPS = (10, 60, 300)
"""Sleeps (ms) of the requests: durations in several buckets."""
QUERY = "histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket[5m])))"


@dataclass(frozen=True)
class Sent:
    trace_id: str
    span_id: str
    sent: float
    answered: float


class Watching(Recorder):
    """A Recorder that also notes each traced observation it is handed, as (bucket, the
    time it counts it at): which buckets and minutes had traced requests, as slicecount's
    middleware measured them."""

    def __init__(self, store: Store) -> None:
        super().__init__(store, flush_interval=1.0)
        self.seen: list[tuple[str, float]] = []

    def add_ids(self, entries: Any, now: float | None = None, exemplar: Any = None) -> None:
        when = self._clock() if now is None else now
        if exemplar is not None:
            self.seen.append((parse(exemplar[0])[1]["le"], when))
        super().add_ids(entries, when, exemplar)


class ObservedByPrometheusClient:
    """What a prometheus_client user writes: the duration of each request observed in a
    histogram, with its trace (a sampled ``traceparent``) as the exemplar."""

    def __init__(self, app: Any, histogram: Histogram) -> None:
        self.app, self.histogram = app, histogram

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] == "/metrics":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        await self.app(scope, receive, send)
        seconds = time.perf_counter() - started
        header = dict(scope["headers"]).get(b"traceparent")
        labels = traceparent_labels(header) if header is not None else None
        route = scope["route"].path_format if scope.get("route") is not None else "<unmatched>"
        self.histogram.labels("GET", route).observe(seconds, dict(labels) if labels else None)


async def sleep(request: Request) -> PlainTextResponse:
    await asyncio.sleep(request.path_params["ms"] / 1000)
    return PlainTextResponse("slept")


def the_app(recorder: Recorder) -> Any:
    registry = CollectorRegistry()
    histogram = Histogram(
        "http_request_duration_seconds", "Request durations", ["method", "route"],
        buckets=DEFAULT_DURATION_BUCKETS, registry=registry,
    )  # fmt: skip
    app = Starlette(
        routes=[Route("/sleep/{ms:int}", sleep), Mount("/metrics", make_asgi_app(registry))]
    )
    app.add_middleware(ObservedByPrometheusClient, histogram=histogram)
    app.add_middleware(SliceCountMiddleware, recorder=recorder, exclude_paths=["/metrics*"])
    return app


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """Prometheus with exemplar storage on a free port; its config file, written later."""
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\nscrape_configs: []\n")
    log = (tmp_path / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [PROMETHEUS or "prometheus", f"--config.file={config}",
         f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
         "--enable-feature=exemplar-storage", "--web.enable-lifecycle", "--log.level=warn"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait(lambda: get_status(f"{url}/-/ready") == 200, "Prometheus to start")
        yield url, config
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def get_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except OSError:
        return 0


def wait(done: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def scrape(url: str, config: Path, app_port: int) -> None:
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: app\n    metrics_path: /metrics/\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{app_port}']\n"
        "    metric_relabel_configs:\n      - action: labeldrop\n        regex: job|instance\n"
    )
    request = urllib.request.Request(f"{url}/-/reload", method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def send(port: int) -> list[Sent]:
    """Traced and untraced requests from 3 threads for SECONDS; the traced ones."""
    traced: list[Sent] = []
    lock = threading.Lock()
    deadline = time.monotonic() + SECONDS
    sleeps = SLEEPS

    def worker(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        i = 0
        while time.monotonic() < deadline:
            ms = sleeps[(i + k) % len(sleeps)]
            n = k * 1_000_000 + i + 1
            trace_id, span_id = f"{n:032x}", f"{n:016x}"
            headers = {"traceparent": f"00-{trace_id}-{span_id}-01"} if i % 3 else {}
            sent = time.time()
            conn.request("GET", f"/sleep/{ms}", headers=headers)
            response = conn.getresponse()
            response.read()
            assert response.status == 200
            if headers:
                with lock:
                    traced.append(Sent(trace_id, span_id, sent, time.time()))
            i += 1
        conn.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return traced


def prometheus_exemplars(url: str, start: float, end: float) -> Any:
    form = urllib.parse.urlencode({"query": QUERY, "start": start, "end": end}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query_exemplars", form, timeout=10) as response:
        return json.load(response)


def test_both_answer_the_same_shape_and_slicecounts_are_the_traces_sent(
    prometheus: tuple[str, Path],
) -> None:
    url, config = prometheus
    with EmbeddedRedis() as redis_server:
        settings = Settings(redis_url=redis_server.url)
        with Store(settings) as store:
            recorder = Watching(store)
            with serving(the_app(recorder)) as port:
                scrape(url, config, port)
                wait(lambda: prometheus_up(url), "the first scrape")
                start = time.time()
                traced = send(port)
                end = time.time() + 1
                last = max(t.answered for t in traced)
                # until Prometheus has scraped the last exemplar (a scrape a second)
                wait(
                    lambda: newest(prometheus_exemplars(url, start, end)) >= last - 1.1,
                    "Prometheus to scrape the last requests",
                )
            recorder.close()
        theirs = prometheus_exemplars(url, start, end)
        with TestClient(create_app(settings)) as client:
            form = {"query": QUERY, "start": str(start), "end": str(end)}
            ours = client.post("/api/v1/query_exemplars", data=form).json()

    print(  # what each side kept (pytest -s shows it)
        f"traced requests {len(traced)}: Prometheus {len(theirs['data'])} series, "
        f"{sum(len(i['exemplars']) for i in theirs['data'])} exemplars; slicecount "
        f"{len(ours['data'])} series, {sum(len(i['exemplars']) for i in ours['data'])} exemplars"
    )
    # the same shape, field for field, and the same label names
    for body in (theirs, ours):
        assert body["status"] == "success" and set(body) == {"status", "data"}
        for item in body["data"]:
            assert set(item) == {"seriesLabels", "exemplars"}
            for exemplar in item["exemplars"]:
                assert set(exemplar) == {"labels", "value", "timestamp"}
                assert isinstance(exemplar["value"], str)
                assert isinstance(exemplar["timestamp"], int | float)
    names = [{frozenset(i["seriesLabels"]) for i in body["data"]} for body in (theirs, ours)]
    assert names[0] == names[1] == {frozenset({"__name__", "le", "method", "route"})}
    labels = [
        {frozenset(e["labels"]) for i in body["data"] for e in i["exemplars"]}
        for body in (theirs, ours)
    ]
    assert labels[0] == labels[1] == {frozenset({"trace_id", "span_id"})}
    # several buckets on both sides (which ones may differ by a request measured on either
    # side of a bound: each side times it with its own clock)
    assert len(theirs["data"]) >= 3 and len(ours["data"]) >= 3

    # every exemplar of slicecount's is a trace sent, in its bucket and its request's time
    by_ids = {(t.trace_id, t.span_id): t for t in traced}
    bounds = (0.0, *DEFAULT_DURATION_BUCKETS)
    kept: set[tuple[str, int]] = set()
    for item in ours["data"]:
        le = item["seriesLabels"]["le"]
        upper = float(le)
        lower = max(b for b in bounds if b < upper)
        for exemplar in item["exemplars"]:
            request = by_ids[(exemplar["labels"]["trace_id"], exemplar["labels"]["span_id"])]
            assert lower < float(exemplar["value"]) <= upper
            # within its request's time, and so its second
            assert request.sent - 0.001 <= exemplar["timestamp"] <= request.answered + LATE
            kept.add((le, int(exemplar["timestamp"] // 60)))
    # and every bucket and minute that had traced requests has one
    assert {(le, int(when // 60)) for le, when in recorder.seen} <= kept


def prometheus_up(url: str) -> bool:
    query = urllib.parse.urlencode({"query": "up"})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=10) as response:
        result = json.load(response)["data"]["result"]
    return bool(result) and result[0]["value"][1] == "1"


def newest(body: Any) -> float:
    return max(
        (e["timestamp"] for i in body.get("data") or [] for e in i["exemplars"]), default=0.0
    )
