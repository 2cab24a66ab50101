"""Rate limits on the same Redis: limits as text (``limits``), the decision math (``decision``),
the local quota's bookkeeping (``quota``) and the ``Limiter`` the middleware calls (``limiter``).
It knows no web framework: the HTTP face (``Throttle``, the ``limit`` decorator) is in
``slicecount.middleware``.

``Limiter`` and ``Verdict`` load on first use, so importing the pure parts loads no Redis client.

It may import store/, operations/, recording/ (to count its errors), core/, config and errors:
no web framework.

The whole house, and what each layer may import: docs/architecture.md.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from slicecount.throttle.clients import Peer, client_address, forwarded_for, header
from slicecount.throttle.decision import Decision
from slicecount.throttle.limits import Limit, parse_limits

if TYPE_CHECKING:
    from slicecount.throttle.limiter import Limiter, Verdict

__all__ = [
    "Decision",
    "Limit",
    "Limiter",
    "Peer",
    "Verdict",
    "client_address",
    "forwarded_for",
    "header",
    "parse_limits",
]


def __getattr__(name: str) -> Any:
    if name in ("Limiter", "Verdict"):
        value = getattr(import_module("slicecount.throttle.limiter"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'slicecount.throttle' has no attribute {name!r}")
