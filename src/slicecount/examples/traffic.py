"""A bounded traffic generator for the example apps: mixed routes, some errors, a slow
endpoint, N+1 database pages. ``python -m slicecount.examples.traffic --help``."""

from __future__ import annotations

import argparse
import http.client
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from slicecount.examples import USER_HEADER

USERS = 500
"""Simulated users the traffic comes from (for the unique counts)."""
Pick = Callable[[random.Random], tuple[str, str]]


def mix(shares: Sequence[tuple[float, Pick]], rest: Pick) -> Pick:
    """A pick of one of several requests: a draw in [0, 1) takes the first of ``shares`` whose
    cumulative share it falls below, ``rest`` what is left."""

    def pick(rng: random.Random) -> tuple[str, str]:
        roll = rng.random()
        for below, request in shares:
            if roll < below:
                return request(rng)
        return rest(rng)

    return pick


def always(method: str, path: str) -> Pick:
    """A request that never varies."""
    return lambda rng: (method, path)


flask_request = mix(
    [
        (0.30, always("GET", "/")),
        (0.60, lambda rng: ("GET", f"/users/{rng.randint(1, 120)}")),  # ids over 100 are 404
        (0.72, always("GET", "/users")),  # the N+1 page: 4 queries
        (0.85, lambda rng: ("POST", f"/orders?plan={rng.choice(['free', 'pro', 'team'])}")),
        (0.93, lambda rng: ("GET", f"/slow?seconds={rng.choice([0.05, 0.2, 0.6])}")),
        (0.97, always("GET", "/error")),
    ],
    lambda rng: ("GET", f"/no/such/page/{rng.randint(1, 10**6)}"),
)
"""The Flask example's traffic."""

starlette_request = mix(
    [
        (0.30, always("GET", "/")),
        (0.60, lambda rng: ("GET", f"/items/{rng.randint(1, 1100)}")),
        (0.70, lambda rng: ("GET", f"/api/v1/items/{rng.randint(1, 50)}")),
        (0.85, lambda rng: ("POST", f"/checkout?pay={rng.choice(['card', 'paypal'])}")),
        (0.92, always("GET", "/stream?seconds=0.3")),
        (0.96, always("GET", "/error")),
    ],
    always("GET", "/missing"),
)
"""The Starlette example's traffic."""


@dataclass
class Traffic:
    """Sends requests from a few threads at about ``rate`` per second until stopped."""

    targets: list[tuple[str, Pick]]
    rate: float = 40.0
    threads: int = 4
    seed: int | None = None
    stop_event: threading.Event = field(default_factory=threading.Event)
    sent: int = 0
    failed: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _running: int = 0
    """Workers started and not yet done (``_idle`` notified when one ends)."""
    _idle: threading.Condition = field(default_factory=threading.Condition)

    def _worker(self, k: int, until: float) -> None:
        try:
            self._send(k, until)
        finally:
            with self._idle:
                self._running -= 1
                self._idle.notify_all()

    def _send(self, k: int, until: float) -> None:
        rng = random.Random(None if self.seed is None else self.seed + k)
        conns: dict[str, http.client.HTTPConnection] = {}
        pause = self.threads / self.rate
        while not self.stop_event.is_set() and time.monotonic() < until:
            base, pick = rng.choice(self.targets)
            method, path = pick(rng)
            parts = urlsplit(base)
            conn = conns.get(base) or http.client.HTTPConnection(
                parts.hostname or "127.0.0.1", parts.port or 80, timeout=10
            )
            conns[base] = conn
            try:
                # a few hundred simulated users, some far busier than others
                user = f"user-{int(rng.paretovariate(1.2)) % USERS}"
                conn.request(method, path, headers={USER_HEADER: user})
                response = conn.getresponse()
                response.read()
                if response.status >= 500 or response.will_close:
                    conn.close()  # servers drop the connection after an app error
                with self._lock:
                    self.sent += 1
            except (OSError, http.client.HTTPException):
                conn.close()
                with self._lock:
                    self.failed += 1
            self.stop_event.wait(rng.expovariate(1 / pause))
        for conn in conns.values():
            conn.close()

    def run(self, seconds: float) -> None:
        """Send for ``seconds`` (or until ``stop()``); returns when every thread is done."""
        until = time.monotonic() + seconds
        workers = [
            threading.Thread(target=self._worker, args=(k, until), daemon=True)
            for k in range(self.threads)
        ]
        for worker in workers:
            with self._idle:  # counted before it starts: stop() cannot miss it
                self._running += 1
            worker.start()
        self.wait()

    def start(self, seconds: float) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(seconds,), daemon=True)
        thread.start()
        return thread

    def wait(self, timeout: float | None = None) -> bool:
        """Until every worker is done (its last answer counted in ``sent`` or ``failed``);
        False if one still runs after ``timeout`` seconds. Not ``Thread.join``: a join that a
        Ctrl-C interrupts marks a thread done that still runs (CPython issue 90882, seen on
        3.11), and ``sent`` read then misses the answers still on their way."""
        with self._idle:
            return self._idle.wait_for(lambda: self._running == 0, timeout)

    def stop(self, timeout: float | None = 0.0) -> bool:
        """Stop sending; with ``timeout``, ``wait()`` for the requests in flight (the default
        0: don't wait). True when every worker is done."""
        self.stop_event.set()
        return self.wait(timeout)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flask", default="http://127.0.0.1:8000", help="Flask example URL")
    parser.add_argument("--starlette", default="http://127.0.0.1:8001", help="Starlette URL")
    parser.add_argument("--rate", type=float, default=40.0, help="requests per second")
    parser.add_argument("--seconds", type=float, default=3600.0, help="how long to run")
    return parser


def main() -> None:
    args = build_parser().parse_args()
    traffic = Traffic([(args.flask, flask_request), (args.starlette, starlette_request)], args.rate)
    try:
        traffic.run(args.seconds)
    except KeyboardInterrupt:
        traffic.stop(timeout=15.0)  # the answers on their way are counted before we say
    print(f"sent {traffic.sent} requests, {traffic.failed} failed")


if __name__ == "__main__":
    main()
