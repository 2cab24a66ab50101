"""``slicecount datasource`` as a real process tree, and which worker process accepted a
connection, found by the operating system (``/proc``: the accepted socket's inode, then the
process holding it) rather than by anything the server says about itself."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

needs_proc = pytest.mark.skipif(
    not os.path.exists("/proc/net/tcp"), reason="finds connections' processes in /proc"
)


@dataclass
class Served:
    """A running ``slicecount datasource`` and its output once stopped."""

    process: subprocess.Popen[bytes]
    port: int
    output: str = field(default="")

    def children(self) -> list[int]:
        """The processes the server started (its workers, multiprocessing's tracker)."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if parent == self.process.pid:
                found.append(int(entry))
        return found

    def request(
        self, method: str, path: str, body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, bytes, int]:  # fmt: skip
        """One request on a fresh connection: status, body, and the pid that accepted it."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=20)
        try:
            connection.request(method, path, body, dict(headers or {}))
            response = connection.getresponse()
            answer = response.read()
            assert connection.sock is not None
            client_port = connection.sock.getsockname()[1]
            return response.status, answer, self.owner(client_port)  # the connection is open
        finally:
            connection.close()

    def owner(self, client_port: int) -> int:
        """The process holding the server's side of the connection from ``client_port``."""
        inode = accepted_inode(self.port, client_port)
        target = f"socket:[{inode}]"
        for pid in [self.process.pid, *self.children()]:
            try:
                descriptors = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in descriptors:
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        return pid
                except OSError:
                    continue
        raise AssertionError(f"no process of the server holds the connection from {client_port}")


def accepted_inode(server_port: int, client_port: int) -> str:
    """The inode of the established socket from ``client_port`` to ``server_port``."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            next(rows)
            for row in rows:
                cells = row.split()
                local, remote, state, inode = cells[1], cells[2], cells[3], cells[9]
                if (
                    state == "01"  # ESTABLISHED
                    and int(local.rsplit(":", 1)[1], 16) == server_port
                    and int(remote.rsplit(":", 1)[1], 16) == client_port
                ):
                    return inode
    raise AssertionError(f"no connection from port {client_port} to {server_port}")


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without any ``SLICECOUNT_*`` variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLICECOUNT_")}
    return {**env, **extra}


@contextmanager
def datasource(arguments: list[str], port: int, env: dict[str, str]) -> Iterator[Served]:
    """``slicecount datasource ARGUMENTS --port PORT`` until the block ends (then SIGTERM)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "slicecount.cli", "datasource", *arguments, "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    served = Served(process, port)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, process.communicate()[0].decode()
            try:
                served.request("GET", "/livez")
                break
            except (OSError, AssertionError):
                assert time.monotonic() < deadline, "the datasource did not start"
                time.sleep(0.1)
        yield served
    finally:
        process.terminate()
        served.output = process.communicate(timeout=30)[0].decode()
