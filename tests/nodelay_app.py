"""An ASGI app that answers with the TCP_NODELAY option of the connection it answers on (found
among this process's sockets by the client's address): what the server set on it."""

from __future__ import annotations

import os
import socket
from typing import Any


def nodelay_of(peer: tuple[str, int]) -> int | None:
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            with socket.socket(fileno=os.dup(int(name))) as sock:
                if sock.family == socket.AF_INET and sock.getpeername() == peer:
                    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        except OSError:
            continue  # closed meanwhile, or not connected
    return None


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    nodelay = nodelay_of(tuple(scope["client"]))
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(nodelay).encode()})
