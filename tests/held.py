"""A real HTTP server that holds every request until told to answer: requests in flight at
will, for the tests of how the traffic generator and the demo stop."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Held:
    """What the server saw: ``arrived`` set at the first request; ``answered`` the requests
    it answered (noted before the answer is written, so a client cannot count one first)."""

    release: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Event = field(default_factory=threading.Event)
    answered: list[str] = field(default_factory=list)
    on_arrival: Callable[[], None] = lambda: None
    url: str = ""


@contextmanager
def holding(release: threading.Event | None = None) -> Iterator[Held]:
    """Serve on a free port until the block ends; requests wait for ``release`` (say, the
    stop event of the client: answers only once it is stopped)."""
    held = Held() if release is None else Held(release)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the example servers

        def do_GET(self) -> None:
            if not held.arrived.is_set():
                held.arrived.set()
                held.on_arrival()
            held.release.wait(30)
            held.answered.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "4")
            self.end_headers()
            self.wfile.write(b"held")

        def log_message(self, *args: object) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler) as server:
        server.daemon_threads = True
        held.url = f"http://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield held
        finally:
            held.release.set()
            server.shutdown()
