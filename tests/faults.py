"""Faults a real deployment meets, made on purpose against a real redis-server."""

from __future__ import annotations

import socket
import struct
import threading
from types import TracebackType

from slicecount.embedded import free_port

RESET = struct.pack("ii", 1, 0)
"""SO_LINGER on, 0 s: close() sends an RST."""


class CuttingProxy:
    """A TCP proxy to Redis on 127.0.0.1 that, when armed, passes ``skip`` replies on, then
    swallows the next ones until the server falls quiet and drops the connection: the server
    has applied a write whose client never learns it (a reset mid-reply, as in a failover).
    ``reset``: the client's side is reset (an RST, as a load balancer or a crashed host's
    kernel sends), not closed."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.cuts = 0
        self._armed = threading.Event()
        self._skip = 0
        self._reset = False
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def cut_next_reply(self, skip: int = 0, reset: bool = False) -> None:
        self._skip, self._reset = skip, reset
        self._armed.set()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream_port))
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        try:
            while data := source.recv(65536):
                if replies and self._armed.is_set():
                    if self._skip:
                        self._skip -= 1
                    else:
                        self._armed.clear()
                        self.cuts += 1
                        source.settimeout(0.3)  # let the server finish, swallowing its replies
                        try:
                            while source.recv(65536):
                                pass
                        except OSError:
                            pass
                        if self._reset:  # no FIN: closed with a zero linger, an RST
                            sink.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)
                            sink.shutdown(socket.SHUT_RD)  # wakes the other pump: it closes
                        break  # the replies are dropped with the connection
                sink.sendall(data)
        except OSError:
            pass
        client = sink if replies else source
        for sock in (source, sink):
            try:
                if not (self._reset and sock is client):  # (a shutdown would send a FIN)
                    sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def close(self) -> None:
        self._closing = True
        self._listener.close()

    def __enter__(self) -> CuttingProxy:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
