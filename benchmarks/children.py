"""Servers the benchmarks start as child processes (gunicorn, uvicorn, Prometheus), each
logging to a file, stopped by its own pid."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from pathlib import Path

START_TIMEOUT = 30.0


class Child:
    """A server in a child process, its output in a log file; stopped by its own pid."""

    def __init__(
        self,
        name: str,
        command: list[str],
        logs: Path,
        env: dict[str, str],
        sock: socket.socket | None = None,
    ) -> None:
        """``sock``: the listening socket the server takes (``listen()``), so the server that
        answers on its port is this one; closed here once the child holds it."""
        self.name = name
        self.log = logs / f"{name}.log"
        with self.log.open("wb") as output:
            self.process = subprocess.Popen(
                command, env=env, stdout=output, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
                pass_fds=() if sock is None else (sock.fileno(),),
            )  # fmt: skip
        if sock is not None:
            sock.close()

    def wait_ready(self, url: str) -> None:
        """Until ``url`` answers 200; else exit non-zero with the end of the log."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        tail = self.log.read_text(errors="replace")[-2000:]
        raise SystemExit(f"{self.name} did not start ({url}):\n{tail}")

    def stop(self) -> None:
        """SIGTERM (gunicorn's worker then flushes its counts), SIGKILL after 15 s."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
