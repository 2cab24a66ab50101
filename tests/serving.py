"""A real uvicorn server for an ASGI app, on a free port, in a thread of the test."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from slicecount.embedded import listen


@contextmanager
def serving(app: Any) -> Iterator[int]:
    """Serve ``app`` on 127.0.0.1 until the block ends; yields the port. The socket is bound
    here, so what answers on the port is this server (never another that took a port only
    guessed free)."""
    sock = listen()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
