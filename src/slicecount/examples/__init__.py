"""Example apps instrumented with slicecount, and a traffic generator (the demo and the stack)."""

from __future__ import annotations

from slicecount.throttle.clients import Peer

USER_HEADER = "X-User"
"""The header the traffic generator names its simulated users in."""


def visitor(peer: Peer) -> str | None:
    """Who a request came from, for ``unique_clients=``: the traffic generator's simulated
    user, else (a browser) the client address."""
    return peer.header(USER_HEADER) or peer.client or None
