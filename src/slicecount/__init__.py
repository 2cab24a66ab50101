"""slicecount: counters over time for Flask and Starlette apps, kept in Redis at several
precisions at once (the *Redis in Action* §5.2 counters pattern).

The public names load lazily (PEP 562): ``import slicecount.core.series`` (or ``keys``, ``config``,
the query parser, the middleware core) imports no Redis client and registers no process hook;
the Redis-facing names load on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from slicecount.config import Settings
from slicecount.core.series import encode as series_id
from slicecount.core.series import parse as parse_series
from slicecount.errors import (
    ConfigurationError,
    QueryError,
    SlicecountError,
    StartupError,
    StoreError,
)

if TYPE_CHECKING:
    from slicecount.middleware.limit import limit
    from slicecount.middleware.throttle import Throttle
    from slicecount.recording.default import (
        annotate,
        configure,
        event,
        get_recorder,
        observe,
        unique,
    )
    from slicecount.recording.lifecycle import close_all
    from slicecount.recording.recorder import Recorder
    from slicecount.store import Store
    from slicecount.store.asyncio import AsyncStore
    from slicecount.throttle.limiter import Limiter

__version__ = "0.1.0"

_LAZY = {
    "AsyncStore": "slicecount.store.asyncio",
    "Recorder": "slicecount.recording.recorder",
    "Store": "slicecount.store",
    "annotate": "slicecount.recording.default",
    "close_all": "slicecount.recording.lifecycle",
    "configure": "slicecount.recording.default",
    "event": "slicecount.recording.default",
    "get_recorder": "slicecount.recording.default",
    "limit": "slicecount.middleware.limit",
    "Limiter": "slicecount.throttle.limiter",
    "observe": "slicecount.recording.default",
    "Throttle": "slicecount.middleware.throttle",
    "unique": "slicecount.recording.default",
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
    "observe",
    "parse_series",
    "series_id",
    "unique",
]
