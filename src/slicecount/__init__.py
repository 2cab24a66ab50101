"""slicecount: counters over time for Flask and Starlette apps, kept in Redis at several
precisions at once (the *Redis in Action* §5.2 counters pattern).

The public names load lazily (PEP 562): ``import slicecount.series`` (or ``keys``, ``config``,
the query parser, the middleware core) imports no Redis client and registers no process hook;
the Redis-facing names load on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from slicecount.config import Settings
from slicecount.errors import (
    ConfigurationError,
    QueryError,
    SlicecountError,
    StartupError,
    StoreError,
)
from slicecount.series import encode as series_id
from slicecount.series import parse as parse_series

if TYPE_CHECKING:
    from slicecount.default import annotate, configure, event, get_recorder, unique
    from slicecount.lifecycle import close_all
    from slicecount.middleware.limit import limit
    from slicecount.middleware.throttle import Throttle
    from slicecount.recorder import Recorder
    from slicecount.store import Store
    from slicecount.store_async import AsyncStore
    from slicecount.throttle.limiter import Limiter

__version__ = "0.1.0"

_LAZY = {
    "AsyncStore": "slicecount.store_async",
    "Recorder": "slicecount.recorder",
    "Store": "slicecount.store",
    "annotate": "slicecount.default",
    "close_all": "slicecount.lifecycle",
    "configure": "slicecount.default",
    "event": "slicecount.default",
    "get_recorder": "slicecount.default",
    "limit": "slicecount.middleware.limit",
    "Limiter": "slicecount.throttle.limiter",
    "Throttle": "slicecount.middleware.throttle",
    "unique": "slicecount.default",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'slicecount' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "AsyncStore",
    "ConfigurationError",
    "Limiter",
    "QueryError",
    "Recorder",
    "Settings",
    "SlicecountError",
    "StartupError",
    "Store",
    "StoreError",
    "Throttle",
    "__version__",
    "annotate",
    "close_all",
    "configure",
    "event",
    "get_recorder",
    "limit",
    "parse_series",
    "series_id",
    "unique",
]
