"""The demo's child processes. Each runs in a session of its own, so a terminal's Ctrl-C
reaches only the demo, which stops them in order (the apps write their last counts while Redis
still runs); each server takes a socket the demo bound, so what answers on its port is the
process the demo started; each writes its output to a log file in the demo's directory."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from slicecount.errors import StartupError

START_TIMEOUT = 30.0
"""Seconds each service may take to answer its first request."""
STOP_TIMEOUT = 15.0
"""Seconds each service may take to stop (and flush) after SIGTERM before it is killed."""
LOST_MARK = "could not write"
"""What a Recorder's ``close()`` logs when it gives up on counts (``Recorder.close``)."""


class Service:
    """One child process of the demo, its log in the demo's directory."""

    def __init__(
        self,
        name: str,
        command: list[str],
        env: dict[str, str],
        logs: Path,
        pass_fds: Sequence[int] = (),
    ) -> None:
        self.name = name
        self.log = logs / f"{name}.log"
        with self.log.open("wb") as output:
            self.process = subprocess.Popen(
                command,
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=tuple(pass_fds),
            )

    def wait_http(self, port: int, path: str = "/") -> None:
        """Until the service answers an HTTP request on ``port`` (any status). Trusted only
        because the service serves on a socket the demo bound: no other process can answer."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and self.process.poll() is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            try:
                conn.request("GET", path)
                conn.getresponse().read()
                return
            except (OSError, http.client.HTTPException):
                time.sleep(0.1)
            finally:
                conn.close()
        tail = self.log.read_text(errors="replace")[-2000:]
        raise StartupError(f"{self.name} did not start on port {port}:\n{tail}")

    def terminate(self) -> None:
        """Ask the service to stop (gracefully: servers finish their requests, apps flush)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def wait(self, hurry: threading.Event | None = None) -> str | None:
        """Wait for the service to exit; kill its whole process group past ``STOP_TIMEOUT``
        or once ``hurry`` is set. Returns what went wrong, or None if it exited cleanly."""
        deadline = time.monotonic() + STOP_TIMEOUT
        problem = None
        while not self._exited():
            if time.monotonic() > deadline or (hurry is not None and hurry.is_set()):
                why = (
                    "when asked to"
                    if hurry is not None and hurry.is_set()
                    else (f"after {STOP_TIMEOUT:g} s")
                )
                problem = f"{self.name} was killed {why}: counts it held may be lost"
                break
            time.sleep(0.05)
        # Whatever is left of its group (a worker of a master gone), while the leader's pid
        # is still unreaped, so the group id names no one else's processes.
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        status = self.process.wait()
        # uvicorn re-raises the SIGTERM it handled once it has shut down: a clean exit too
        if problem is None and status not in (0, -signal.SIGTERM):
            problem = f"{self.name} exited with status {status} (see {self.log})"
        return problem

    def _exited(self) -> bool:
        """True once the process has exited, without reaping it (its pid stays reserved)."""
        if self.process.returncode is not None:
            return True
        try:
            state = os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return state is not None

    def stop(self, hurry: threading.Event | None = None) -> str | None:
        """``terminate()`` then ``wait()``."""
        self.terminate()
        return self.wait(hurry)

    def losses(self) -> list[str]:
        """The lines of the service's log that say counts could not be written."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return [f"{self.name}: {line.strip()}" for line in text.splitlines() if LOST_MARK in line]
