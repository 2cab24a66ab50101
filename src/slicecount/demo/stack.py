"""``slicecount demo``: the whole stack on this machine from one command.

A private redis-server, the example Flask app under gunicorn and the example Starlette app
under uvicorn (both instrumented), the cleaner sidecar, the datasource, and a bounded traffic
generator; a live summary every few seconds; everything stopped cleanly at the end.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

from slicecount.config import Settings
from slicecount.core.series import parse
from slicecount.demo import state as demo_state
from slicecount.demo.services import STOP_TIMEOUT, Service
from slicecount.embedded import EmbeddedRedis, listen
from slicecount.errors import SlicecountError, StartupError
from slicecount.examples.traffic import Traffic, flask_request, starlette_request
from slicecount.store import Store

NEEDS = ("flask", "sqlalchemy", "gunicorn", "starlette", "uvicorn", "re2")
"""Modules the demo's services import beyond slicecount's own (``slicecount[demo]``)."""
APPS = ("flask", "starlette")
"""The services that count: stopped first, while Redis still takes their last counts."""


def check_needs() -> None:
    """A StartupError naming the missing modules, before any process is started."""
    missing = [name for name in NEEDS if find_spec(name) is None]
    if missing:
        raise StartupError(
            f"slicecount demo needs {', '.join(missing)}: pip install 'slicecount[demo]'"
        )


@dataclass
class Stopped:
    """How the demo stopped: the requests the apps answered, those Redis counted, and every
    count that may be lost (empty: all written)."""

    answered: int = 0
    failed: int = 0
    """Requests that failed at the client (a timeout, a reset): the app may have counted them."""
    counted: int | None = None
    lost: list[str] = field(default_factory=list)

    def report(self) -> str:
        """What the terminal says: "counts flushed" only when every count is accounted for."""
        if self.lost:
            return "\n  ".join(["stopped, but counts may be lost:", *self.lost])
        if self.counted is None:  # the demo stopped before any traffic
            return "stopped: every service exited, redis stopped"
        failed = f", {self.failed} failed at the client" if self.failed else ""
        return (
            f"stopped: every service exited, counts flushed ({self.answered} requests "
            f"answered, {self.counted} counted in redis{failed}), redis stopped"
        )


class Demo:
    """Starts, watches and stops the stack."""

    def __init__(self, port: int = 8080, rate: float = 40.0, seed: int | None = None) -> None:
        check_needs()  # before any process or directory exists
        # Every port bound first: one in use is an error naming it before anything starts,
        # and each server takes its socket, so what answers on a port is the demo's own.
        try:
            self.sockets: dict[str, socket.socket] = {"datasource": listen(port)}
        except StartupError as exc:
            raise StartupError(f"{exc}: choose another with --port") from None
        self.sockets.update(flask=listen(), starlette=listen())
        self.port = port
        self.flask_port = self.sockets["flask"].getsockname()[1]
        self.starlette_port = self.sockets["starlette"].getsockname()[1]
        self.rate = rate
        self.seed = seed
        self.logs = Path(tempfile.mkdtemp(prefix="slicecount-demo-"))
        self.redis = EmbeddedRedis()
        self.services: list[Service] = []
        self.traffic: Traffic | None = None
        self.store: Store | None = None
        self.state_file: Path | None = None
        self.started = time.time()

    def start(self, echo: Callable[[str], None]) -> None:
        self.redis.start()
        env = {
            **os.environ,
            "SLICECOUNT_REDIS_URL": self.redis.url,
            "SLICECOUNT_FLUSH_INTERVAL": "1",
            "PYTHONUNBUFFERED": "1",
        }
        py = sys.executable
        fd = {name: str(sock.fileno()) for name, sock in self.sockets.items()}
        # (name, readiness path, command); the example apps do not count /health
        specs = [
            (
                "flask",
                "/health",
                [
                    py,
                    "-m",
                    "gunicorn",
                    "-w",
                    "2",
                    "-k",
                    "gthread",
                    "--threads",
                    "4",
                    "-b",
                    f"fd://{fd['flask']}",
                    "-c",
                    "python:slicecount.examples.gunicorn_conf",
                    "slicecount.examples.flask_app:app",
                ],
            ),
            (
                "starlette",
                "/health",
                [
                    py,
                    "-m",
                    "uvicorn",
                    "slicecount.examples.starlette_app:app",
                    "--fd",
                    fd["starlette"],
                    "--no-access-log",
                ],
            ),
            (
                "datasource",
                "/",
                [
                    py,
                    "-m",
                    "uvicorn",
                    "--factory",
                    "slicecount.datasource.app:from_env",
                    "--fd",
                    fd["datasource"],
                    "--log-level",
                    "warning",
                ],
            ),
            ("cleaner", "", [py, "-m", "slicecount.cli", "cleaner", "--interval", "10"]),
        ]
        for name, path, command in specs:
            sock = self.sockets.pop(name, None)
            fds = () if sock is None else (sock.fileno(),)
            service = Service(name, command, env, self.logs, pass_fds=fds)
            self.services.append(service)
            if sock is not None:
                port = sock.getsockname()[1]
                sock.close()  # the service holds it now: if it dies, the port refuses
                service.wait_http(port, path)
        self.store = Store(Settings.from_env(env))  # the apps' settings, the demo's redis
        self.store.annotate("demo started", ["deploy"], title="demo started")
        flask = f"http://127.0.0.1:{self.flask_port}"
        starlette = f"http://127.0.0.1:{self.starlette_port}"
        datasource = f"http://127.0.0.1:{self.port}/"
        self.state_file = demo_state.publish(
            demo_state.DemoState(os.getpid(), self.redis.url, datasource, str(self.logs))
        )
        echo(f"redis      {self.redis.url}")
        echo(f"flask      {flask}  (gunicorn, 2 workers)")
        echo(f"starlette  {starlette}  (uvicorn)")
        echo(f"datasource {datasource}  <- Grafana: simpod-json-datasource URL")
        echo(
            "show       slicecount show http.requests --by status  (finds this redis while "
            "the demo runs)"
        )
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

    def stop(self, hurry: threading.Event | None = None) -> Stopped:
        """Traffic first (its last requests answered), then the apps (they write their last
        counts), the cleaner and the datasource, Redis last; the counts checked before Redis
        stops. ``hurry`` set (a second Ctrl-C): kill what is still running."""
        stopped = Stopped()
        if self.traffic is not None:
            # the last answers counted before they are read (a wait that a Ctrl-C during
            # run()'s join cannot cut short: see Traffic.wait)
            self.traffic.stop(STOP_TIMEOUT)
            stopped.answered, stopped.failed = self.traffic.sent, self.traffic.failed
        apps = [s for s in self.services if s.name in APPS]
        for group in (apps, [s for s in self.services if s.name not in APPS]):
            for service in group:
                service.terminate()
            problems = [service.wait(hurry) for service in group]
            stopped.lost += [problem for problem in problems if problem is not None]
        for service in apps:
            stopped.lost += service.losses()
        if self.store is not None and self.traffic is not None:
            self._check_counts(self.store, stopped)
        if self.store is not None:
            self.store.close()
        self.redis.close()
        if self.state_file is not None:
            demo_state.withdraw(self.state_file)
        for sock in self.sockets.values():
            sock.close()
        return stopped

    def _check_counts(self, store: Store, stopped: Stopped) -> None:
        """Every request the apps answered is in Redis (at the coarsest precision, whose
        slices outlive the demo). More is no loss: a browser may have visited the apps."""
        precision = max(store.settings.precisions)
        try:
            ids = store.series("http.requests", precision)
            read = store.read(ids, precision, self.started - precision, time.time() + precision)
        except SlicecountError as exc:
            stopped.lost.append(f"the counts could not be read back: {exc}")
            return
        stopped.counted = sum(sum(v or 0 for v in values) for values in read.values())
        missing = stopped.answered - stopped.counted
        if missing > 0:
            stopped.lost.append(
                f"{missing} of the {stopped.answered} requests the apps answered were not "
                "counted in redis"
            )
