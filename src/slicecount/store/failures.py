"""What a redis-py error means: an error reply that may pass (sent again later) or not, and
what failed, said without the configuration (no host, user or password: the datasource's 503
bodies and the CLI's one line carry it). Pure of I/O."""

from __future__ import annotations

import errno
import re
import socket
import ssl

from redis import exceptions
from redis.exceptions import RedisClusterException
from redis.sentinel import MasterNotFoundError, SlaveNotFoundError

from slicecount.store.replies import Refusal, ScriptMissing

TRANSIENT = (
    exceptions.OutOfMemoryError,
    exceptions.BusyLoadingError,
    exceptions.ReadOnlyError,
    exceptions.TryAgainError,
    exceptions.ClusterDownError,
    exceptions.MasterDownError,
    exceptions.AskError,
    exceptions.MovedError,
)
"""Error replies whose cause may pass: the same command may be sent again later."""
TRANSIENT_CODES = re.compile(
    r"(?:^|: -)(?:OOM|BUSY|LOADING|READONLY|MASTERDOWN|NOREPLICAS|TRYAGAIN|CLUSTERDOWN"
    r"|MISCONF|NOPERM|NOAUTH)\b"
)
"""The same, for error replies redis-py leaves as a plain ResponseError: a bare code, or one
raised inside a script (Redis 6.2 raises OOM at a script's first write even under pcall,
before anything is written). MISCONF (a failing RDB save stops writes) and NOPERM (an ACL
being fixed) refuse every write of a script alike: nothing was written, so try again."""


def refusal(error: exceptions.ResponseError) -> Exception:
    """An error reply as the reply reader takes it."""
    if isinstance(error, exceptions.NoScriptError):
        return ScriptMissing(str(error))
    message = str(error)
    transient = isinstance(error, TRANSIENT) or TRANSIENT_CODES.search(message) is not None
    return Refusal(message, transient)


UNREACHABLE = (exceptions.ConnectionError, exceptions.TimeoutError, RedisClusterException)
"""What redis-py raises when no server answered (or answered too late); unlike an error
reply, its text names hosts and ports, not what failed."""
REDIS_ERRORS = (exceptions.RedisError, RedisClusterException)
"""Everything redis-py raises about Redis (a cluster's own errors derive from neither)."""


def failure(exc: BaseException) -> str:
    """What ``exc`` says went wrong, naming no host, user or password: an error reply's
    own text (Redis's words: WRONGPASS, NOPERM ...), else the kind of connection failure."""
    if isinstance(exc, exceptions.AuthenticationError):  # WRONGPASS, NOAUTH
        return f"authentication failed ({str(exc).rstrip('.')})"
    if isinstance(exc, exceptions.TimeoutError):
        return "timed out"
    if isinstance(exc, MasterNotFoundError | SlaveNotFoundError):
        return "the Sentinels name no reachable primary"
    if not isinstance(exc, UNREACHABLE):
        return str(exc)
    causes: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and len(causes) < 10:
        causes.append(cause)
        cause = cause.__cause__ or cause.__context__
    for cause in causes:
        if isinstance(cause, ssl.SSLError):
            return f"TLS handshake failed ({cause.reason or cause.__class__.__name__})"
        if isinstance(cause, socket.gaierror):
            return "host not found"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, FileNotFoundError):
            return "no such socket file"
        if isinstance(cause, TimeoutError):
            return "timed out"
        if isinstance(cause, OSError) and cause.errno is not None:
            return f"connection failed ({errno.errorcode.get(cause.errno, cause.errno)})"
    if isinstance(exc, RedisClusterException):
        return "no cluster node reachable"
    return "connection lost"
