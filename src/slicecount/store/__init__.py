"""The Redis edge, the only package that sends Redis commands: ``Store`` (blocking),
``AsyncStore`` (``asyncio``), the wire (client options, Lua scripts, packing), the replies, the
routing of a batch by cluster node, and ``lua/``. It may import operations/, core/, config,
errors and redis; no feature's module (a feature runs its operations with ``store.run``).

The whole house, and what each layer may import: docs/architecture.md.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slicecount.store.asyncio import AsyncStore
    from slicecount.store.blocking import Store

__all__ = ["AsyncStore", "Store"]
_HOMES = {"AsyncStore": "slicecount.store.asyncio", "Store": "slicecount.store.blocking"}


def __getattr__(name: str) -> Any:
    # on first use: the pure modules here (replies, routing) load no Redis client
    if name in _HOMES:
        value = getattr(import_module(_HOMES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'slicecount.store' has no attribute {name!r}")
