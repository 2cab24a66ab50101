"""Exemplars under real servers: a Flask app under gunicorn (3 workers) and a Starlette app under
uvicorn get traced requests (an OpenTelemetry SDK span, or a ``traceparent`` header alone)
among untraced ones, unsampled ones and malformed headers; after a graceful shutdown every
exemplar kept is a trace that was sent, in its request's time, its value in its bucket, and
every route and minute with traced requests has one."""

from __future__ import annotations

import http.client
import itertools
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from slicecount.core.series import parse
from slicecount.embedded import EmbeddedRedis, listen
from slicecount.recording.losses import REJECTED_METRIC
from slicecount.store import Store
from tests.middleware.test_servers import BIN, run_server, stop_gracefully

pytestmark = pytest.mark.slow

SECONDS = 5.0
THREADS = 4
SLEEPS = (0, 30, 150)  # ms: a route each (/sleep/<int:ms>), several buckets between them
KINDS = ("span", "traceparent", "plain", "unsampled", "malformed")


@dataclass(frozen=True)
class Traced:
    trace_id: str
    span_id: str
    route: str
    sent: float
    answered: float


def gunicorn(sock: object) -> list[str]:
    return [
        str(BIN / "gunicorn"), "-w", "3", "-b", f"fd://{sock.fileno()}",  # type: ignore[attr-defined]
        "-c", "examples/gunicorn.conf.py", "tests.exemplar_apps:flask_app",
    ]  # fmt: skip


def uvicorn(sock: object) -> list[str]:
    return [
        sys.executable, "-m", "uvicorn", "tests.exemplar_apps:starlette_app",
        "--fd", str(sock.fileno()), "--no-access-log",  # type: ignore[attr-defined]
    ]  # fmt: skip


SERVERS = {"gunicorn": (gunicorn, "/sleep/<int:ms>"), "uvicorn": (uvicorn, "/sleep/{ms}")}


def send(port: int) -> list[Traced]:
    """Requests of every kind from THREADS threads for SECONDS; the traced ones, as sent."""
    traced: list[Traced] = []
    failures: list[str] = []
    numbers = itertools.count(1)
    lock = threading.Lock()
    deadline = time.monotonic() + SECONDS

    def worker(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        i = k
        while time.monotonic() < deadline:
            kind, ms = KINDS[i % len(KINDS)], SLEEPS[(i // len(KINDS)) % len(SLEEPS)]
            i += 1
            with lock:
                n = next(numbers)
            trace_id, span_id = f"{n:032x}", f"{n:016x}"
            headers = {
                "span": {"x-span": "1"},
                "traceparent": {"traceparent": f"00-{trace_id}-{span_id}-01"},
                "plain": {},
                "unsampled": {"traceparent": f"00-{trace_id}-{span_id}-00"},
                "malformed": {"traceparent": f"00-{trace_id}-{span_id}-1"},
            }[kind]
            sent = time.time()
            conn.request("GET", f"/sleep/{ms}", headers=headers)
            response = conn.getresponse()
            response.read()
            answered = time.time()
            if response.status != 200:
                failures.append(f"{kind}: {response.status}")
            if kind == "span":
                trace_id = response.getheader("x-trace-id", "")
                span_id = response.getheader("x-span-id", "")
            if kind in ("span", "traceparent"):
                with lock:
                    traced.append(Traced(trace_id, span_id, str(ms), sent, answered))
        conn.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == [], failures[:5]
    return traced


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_every_exemplar_is_a_trace_sent_and_every_traced_minute_has_one(
    server: str, tmp_path: Path
) -> None:
    command, route = SERVERS[server]
    with EmbeddedRedis() as redis_server:
        sock = listen()
        port = sock.getsockname()[1]
        process = run_server(command(sock), redis_server.url, sock, tmp_path)
        try:
            traced = send(port)
        finally:
            stop_gracefully(process)
        with Store.from_url(redis_server.url) as store:
            series = store.series("http.request.duration.bucket", 60)
            found = store.exemplars(series, time.time() - 3600, time.time())
            rejected = store.series(REJECTED_METRIC, 60)
    assert len(traced) > 20 and any(t.span_id for t in traced)
    by_ids = {(t.trace_id, t.span_id): t for t in traced}
    kept_by: set[tuple[str, int]] = set()  # (sleep, minute) of every exemplar kept
    bounds = (0.0, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
    for series_id, kept in found.items():
        labels = parse(series_id)[1]
        assert labels["route"] == route  # one route template, whatever the sleep
        le = float(labels["le"])
        lower = max(b for b in bounds if b < le) if le > bounds[1] else -1.0
        for exemplar in kept:
            one = dict(exemplar.labels)
            sent = by_ids.get((one["trace_id"], one["span_id"]))
            assert sent is not None, f"{one} was never sent traced"
            # within its request's time (stamped once the server took the last chunk: a
            # client may read the answer a little before)
            assert sent.sent - 0.001 <= exemplar.time <= sent.answered + 0.1
            assert lower < exemplar.value <= le
            kept_by.add((sent.route, int(exemplar.time // 60)))
    # every (sleep, minute) with traced requests kept one of them: each sleep's durations
    # fall in buckets of their own (a request across a minute's end may count in either)
    wanted = {(t.route, int(t.sent // 60)) for t in traced if t.sent // 60 == t.answered // 60}
    assert wanted <= kept_by
    assert rejected == []  # unsampled and malformed headers are counted nowhere
