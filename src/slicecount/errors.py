"""The error tree: callers catch ``SlicecountError``; the middleware swallows ``StoreError``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class SlicecountError(Exception):
    """Base of every error slicecount raises on purpose."""


class ConfigurationError(SlicecountError, ValueError):
    """A setting, series name, label, count or time is invalid; the message names the bad value
    and ``reason`` says what kind of refusal it is (the label of ``slicecount.rejected``)."""

    def __init__(self, message: str, reason: str = "invalid") -> None:
        super().__init__(message)
        self.reason = reason


class StoreError(SlicecountError):
    """Redis could not be reached or refused a command (translated at the store boundary).

    ``permanent``: Redis answered with a refusal that sending the same again cannot cure (a
    script error, a key of another type); else the outcome may be unknown or the cause
    passing (a timeout, a reset, OOM, a failover), and the same batch may be sent again.

    The message may name the server (its URL with the password redacted): it is for logs.
    ``failure`` says what went wrong in words that name no host, user or password ("connection
    refused", "authentication failed"): it is what an HTTP answer may show."""

    def __init__(self, message: str, *, permanent: bool = False, failure: str = "") -> None:
        super().__init__(message)
        self.permanent = permanent
        self.failure = failure or message


class QueryError(SlicecountError, ValueError):
    """A datasource query is malformed or exceeds a limit."""


class LimitExceeded(QueryError):
    """A request asks for more work than a limit allows (answered 422)."""


class StartupError(SlicecountError):
    """A process slicecount starts (the embedded redis-server, a demo service) did not come
    up, or its binary is missing; the message says why and shows the process's last output."""


class MissingExtra(SlicecountError, ModuleNotFoundError):
    """An optional dependency is not installed; the message names the extra that brings it.

    Raised from a module's guarded imports (``extra_imports``)."""

    def __init__(self, extra: str, missing: ModuleNotFoundError, needed_by: str) -> None:
        super().__init__(
            f"{needed_by} needs {missing.name or missing}, which is not installed: "
            f"pip install 'slicecount[{extra}]'",
            name=missing.name,
        )
        self.extra = extra


@contextmanager
def extra_imports(extra: str, needed_by: str) -> Iterator[None]:
    """A module's imports of an optional dependency: ``with extra_imports("flask", "the Flask
    middleware"): import flask``. A module that is not installed raises MissingExtra naming
    the extra that brings it (one raised by a module imported inside passes as it is)."""
    try:
        yield
    except MissingExtra:
        raise
    except ModuleNotFoundError as exc:
        raise MissingExtra(extra, exc, needed_by) from exc
