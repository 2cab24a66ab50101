"""The error tree: callers catch ``SlicecountError``; the middleware swallows ``StoreError``."""

from __future__ import annotations


class SlicecountError(Exception):
    """Base of every error slicecount raises on purpose."""


class ConfigurationError(SlicecountError, ValueError):
    """A setting, series name, label or precision is invalid; the message names the bad value."""


class StoreError(SlicecountError):
    """Redis could not be reached or refused a command (translated at the store boundary)."""


class QueryError(SlicecountError, ValueError):
    """A datasource query is malformed or exceeds a limit."""


class StartupError(SlicecountError):
    """A process slicecount starts (the embedded redis-server, a demo service) did not come
    up, or its binary is missing; the message says why and shows the process's last output."""
