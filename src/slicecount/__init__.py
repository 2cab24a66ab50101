"""slicecount: counters over time for Flask and Starlette apps, kept in Redis at several
precisions at once (the *Redis in Action* §5.2 counters pattern)."""

from slicecount.config import Settings
from slicecount.default import annotate, configure, event, get_recorder
from slicecount.errors import ConfigurationError, QueryError, SlicecountError, StoreError
from slicecount.recorder import Recorder, close_all
from slicecount.series import encode as series_id
from slicecount.series import parse as parse_series
from slicecount.store import Store
from slicecount.store_async import AsyncStore

__version__ = "0.1.0"

__all__ = [
    "AsyncStore",
    "ConfigurationError",
    "QueryError",
    "Recorder",
    "Settings",
    "SlicecountError",
    "Store",
    "StoreError",
    "__version__",
    "annotate",
    "close_all",
    "configure",
    "event",
    "get_recorder",
    "parse_series",
    "series_id",
]
