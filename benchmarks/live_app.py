"""The app of ``bench_vs_prometheus.py --live``: it goes on serving the seeded traffic at real
time, counting each second's requests into slicecount through a Recorder that flushes every
second, and exposing its totals (continued from the history's) on ``/metrics`` as a client
library does, for a real Prometheus to scrape.

    python live_app.py PLAN FD

``PLAN``: a pickle of the Redis URL, the layout, the first live second, the totals at that
second and the (series id, n) of every live second (``seeded_traffic.Traffic.by_second``);
``FD``: the listening socket the exporter answers on. Each second's requests are counted once
it has ended, so nothing is ever written ahead of now. SIGTERM writes what is buffered and
ends.
"""

from __future__ import annotations

import pickle
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

from seeded_traffic import exposition
from slicecount import Recorder, Store, parse_series


class Exporter(BaseHTTPRequestHandler):
    """``GET /metrics``: the totals as they stand (``/`` answers too, for the readiness
    check)."""

    totals: ClassVar[dict[str, int]] = {}
    lock: ClassVar[threading.Lock] = threading.Lock()

    def do_GET(self) -> None:
        with self.lock:
            body = exposition(self.totals).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a scrape every 15 s is not news


def serve(fd: int) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Exporter, bind_and_activate=False)
    server.socket.close()
    server.socket = socket.socket(fileno=fd)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    with open(sys.argv[1], "rb") as file:
        plan = pickle.load(file)
    Exporter.totals = dict(plan["totals"])
    server = serve(int(sys.argv[2]))
    live: dict[int, list[tuple[str, int]]] = plan["live"]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with Store.from_url(plan["redis_url"], layout=plan["layout"]) as store:
        recorder = Recorder(store, flush_interval=1.0)
        issued = {s: recorder.series_id(*parse_series(s)) for e in live.values() for s, _ in e}
        second = plan["first"]
        while not stop.is_set():
            stop.wait(max(0.0, second + 1 - time.time()))  # until the second has ended
            while second + 1 <= time.time():
                entries = [(issued[s], n) for s, n in live.get(second, ())]
                recorder.add_ids(tuple(entries), now=second + 0.5)
                with Exporter.lock:
                    for s, n in live.get(second, ()):
                        Exporter.totals[s] = Exporter.totals.get(s, 0) + n
                second += 1
        recorder.close()
    server.shutdown()


if __name__ == "__main__":
    main()
