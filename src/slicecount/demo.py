"""``slicecount demo``: the whole stack on this machine from one command.

A private redis-server, the example Flask app under gunicorn and the example Starlette app
under uvicorn (both instrumented), the cleaner sidecar, the datasource, and a bounded traffic
generator; a live summary every few seconds; everything stopped cleanly at the end.
"""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path

from slicecount.embedded import EmbeddedRedis, free_port
from slicecount.errors import StartupError
from slicecount.examples.traffic import Traffic, flask_request, starlette_request
from slicecount.series import parse
from slicecount.store import Store

START_TIMEOUT = 30.0
"""Seconds each service may take to answer its first request."""
STOP_TIMEOUT = 15.0
"""Seconds each service may take to stop (and flush) after SIGTERM before it is killed."""
NEEDS = ("flask", "sqlalchemy", "gunicorn", "starlette", "uvicorn", "re2")
"""Modules the demo's services import beyond slicecount's own (``slicecount[demo]``)."""


def check_needs() -> None:
    """A StartupError naming the missing modules, before any process is started."""
    missing = [name for name in NEEDS if find_spec(name) is None]
    if missing:
        raise StartupError(
            f"slicecount demo needs {', '.join(missing)}: pip install 'slicecount[demo]'"
        )


class Service:
    """One child process of the demo, its log in the demo's directory."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], logs: Path) -> None:
        self.name = name
        self.log = logs / f"{name}.log"
        with self.log.open("wb") as output:
            # A session of its own: the terminal's Ctrl-C reaches the demo, which then stops
            # each service gracefully (so the apps flush their counts) in a chosen order.
            self.process = subprocess.Popen(
                command, env=env, stdout=output, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip

    def wait_http(self, port: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/")
                conn.getresponse().read()
                conn.close()
                return
            except OSError:
                time.sleep(0.1)
        tail = self.log.read_text(errors="replace")[-2000:]
        raise StartupError(f"{self.name} did not start on port {port}:\n{tail}")

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


class Demo:
    """Starts, watches and stops the stack."""

    def __init__(self, port: int = 8080, rate: float = 40.0, seed: int | None = None) -> None:
        check_needs()  # before any process or directory exists
        self.port = port
        self.rate = rate
        self.seed = seed
        self.logs = Path(tempfile.mkdtemp(prefix="slicecount-demo-"))
        self.redis = EmbeddedRedis()
        self.services: list[Service] = []
        self.flask_port = free_port()
        self.starlette_port = free_port()
        self.traffic: Traffic | None = None
        self.store: Store | None = None

    def start(self, echo: Callable[[str], None]) -> None:
        self.redis.start()
        env = {
            **os.environ,
            "SLICECOUNT_REDIS_URL": self.redis.url,
            "SLICECOUNT_FLUSH_INTERVAL": "1",
            "PYTHONUNBUFFERED": "1",
        }
        py = sys.executable
        specs = [
            ("flask", self.flask_port, [
                py, "-m", "gunicorn", "-w", "2", "-k", "gthread", "--threads", "4",
                "-b", f"127.0.0.1:{self.flask_port}",
                "-c", "python:slicecount.examples.gunicorn_conf",
                "slicecount.examples.flask_app:app"]),
            ("starlette", self.starlette_port, [
                py, "-m", "uvicorn", "slicecount.examples.starlette_app:app", "--host",
                "127.0.0.1", "--port", str(self.starlette_port), "--no-access-log"]),
            ("datasource", self.port, [
                py, "-m", "slicecount.cli", "datasource", "--host", "127.0.0.1",
                "--port", str(self.port)]),
            ("cleaner", None, [py, "-m", "slicecount.cli", "cleaner", "--interval", "10"]),
        ]  # fmt: skip
        for name, port, command in specs:
            service = Service(name, command, env, self.logs)
            self.services.append(service)
            if port is not None:
                service.wait_http(port)
        self.store = Store.from_url(self.redis.url)
        self.store.annotate("demo started", ["deploy"], title="demo started")
        flask = f"http://127.0.0.1:{self.flask_port}"
        starlette = f"http://127.0.0.1:{self.starlette_port}"
        echo(f"redis      {self.redis.url}")
        echo(f"flask      {flask}  (gunicorn, 2 workers)")
        echo(f"starlette  {starlette}  (uvicorn)")
        echo(f"datasource http://127.0.0.1:{self.port}/  <- Grafana: simpod-json-datasource URL")
        echo(f"logs       {self.logs}")
        pids = [s.process.pid for s in self.services] + [self.redis.pid or 0]
        echo(f"pids       {' '.join(str(p) for p in pids)}")
        self.traffic = Traffic(
            [(flask, flask_request), (starlette, starlette_request)], self.rate, seed=self.seed
        )

    def run(self, seconds: float, echo: Callable[[str], None], every: float = 3.0) -> None:
        """Traffic for ``seconds``, a summary line every ``every`` seconds."""
        assert self.traffic is not None
        thread = self.traffic.start(seconds)
        while thread.is_alive():
            thread.join(every)
            echo(self.summary())

    def summary(self, window: int = 15) -> str:
        """Requests by status over the last ``window`` seconds, from Redis at 1 s precision."""
        assert self.store is not None and self.traffic is not None
        now = time.time()
        statuses: dict[str, int] = {}
        ids = self.store.series("http.requests", 1)
        for series_id, values in self.store.read(ids, 1, now - window, now).items():
            status = parse(series_id)[1].get("status", "?")
            statuses[status] = statuses.get(status, 0) + sum(v or 0 for v in values)
        query_ids = self.store.series("db.queries", 1)
        read = self.store.read(query_ids, 1, now - window, now)
        queries = sum(sum(v or 0 for v in values) for values in read.values())
        total = sum(statuses.values())
        by_status = " ".join(f"{s}:{n}" for s, n in sorted(statuses.items()))
        sent, failed = self.traffic.sent, self.traffic.failed
        return (
            f"last {window}s: {total / window:5.1f} req/s  [{by_status}]  "
            f"db {queries / window:4.1f} q/s  (sent {sent}, failed {failed})"
        )

    def stop(self) -> None:
        """Traffic first, then the apps (they flush), the datasource, the cleaner, Redis."""
        if self.traffic is not None:
            self.traffic.stop()
        for service in self.services:
            service.stop()
        if self.store is not None:
            self.store.close()
        self.redis.close()
