"""Optional auth for the datasource: ``SLICECOUNT_TOKEN`` as a bearer token or as the password
of basic auth (Grafana's proxy sends either), compared in constant time. Pure ASGI.

What stays open without the token: the built-in page and its static files (public code, no
data: its API calls carry the token), the probes (``/livez``, ``/readyz``: what an
orchestrator asks, without a secret in its manifest) and the Prometheus version Grafana reads
to pick its features. ``GET /`` for any client but a browser is Grafana's "Save & test" and
needs the token: a health check that answers 200 to a wrong token says green when no query
would work."""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from slicecount.datasource.prometheus.results import error as prometheus_error

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]

logger = logging.getLogger("slicecount.datasource")

LIVENESS, READINESS = "/livez", "/readyz"
"""The probes: the process serves (no Redis call), and a query would reach Redis."""
PROMETHEUS_PREFIX = "/api/v1/"
"""Paths whose errors are Prometheus envelopes."""
OPEN_PATHS = frozenset(
    {(m, p) for m in ("GET", "HEAD") for p in (LIVENESS, READINESS)}
    | {("GET", "/api/v1/status/buildinfo"), ("POST", "/api/v1/status/buildinfo")}
)
"""The probes, and the Prometheus version Grafana reads to pick its features."""
OPEN_PREFIX = "/ui/"
"""The page's static files: public code, no data (its API calls carry the token)."""
MISSING = (
    "authentication required: send the datasource's token (SLICECOUNT_TOKEN) as a bearer "
    "token or as the basic-auth password"
)
WRONG = "wrong credentials: the token sent is not the datasource's (SLICECOUNT_TOKEN)"


def wants_page(method: str | None, accept: str) -> bool:
    """A browser opening ``/`` (its Accept names text/html) gets the page; any other client
    (Grafana's "Save & test" sends ``application/json, text/plain, */*``) the health check."""
    return method in ("GET", "HEAD") and "text/html" in accept.lower()


def open_warning(where: str) -> str:
    """What a datasource started without a token says once."""
    return (
        f"no token: the datasource is open to anyone who can reach {where} "
        "(set SLICECOUNT_TOKEN to require one)"
    )


def authorized(header: bytes | None, token: str) -> bool:
    """True when an Authorization header carries ``token`` (Bearer, or Basic password)."""
    if not header:
        return False
    scheme, _, value = header.decode("latin-1").partition(" ")
    expected = token.encode()
    scheme = scheme.lower()
    if scheme == "bearer":
        return hmac.compare_digest(value.strip().encode(), expected)
    if scheme == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        _, _, password = decoded.partition(b":")
        return hmac.compare_digest(password, expected)
    return False


def _header(scope: Scope, name: bytes) -> bytes | None:
    headers: Iterable[tuple[bytes, bytes]] = scope.get("headers") or []
    return next((value for key, value in headers if key == name), None)


def is_open(scope: Scope) -> bool:
    """True for the requests answered without the token (see the module's docstring)."""
    method, path = scope.get("method"), scope.get("path", "")
    if (method, path) in OPEN_PATHS:
        return True
    if method in ("GET", "HEAD") and path.startswith(OPEN_PREFIX):
        return True
    accept = (_header(scope, b"accept") or b"").decode("latin-1")
    return path == "/" and wants_page(method, accept)


class TokenAuth:
    """Answers 401 to every request but the open ones unless it carries the token: in
    Prometheus's error envelope under ``/api/v1/``, as ``{"message": ...}`` elsewhere."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or is_open(scope):
            await self.app(scope, receive, send)
            return
        header = _header(scope, b"authorization")
        if authorized(header, self.token):
            await self.app(scope, receive, send)
            return
        message = WRONG if header else MISSING
        if scope.get("path", "").startswith(PROMETHEUS_PREFIX):
            answer, status = prometheus_error("unauthorized", message)
        else:
            answer, status = {"message": message}, 401
        body = json.dumps(answer).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="slicecount"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class OpenNotice:
    """On a datasource without a token: serves everyone, and says once that a request came
    with credentials (Grafana configured with a token this server does not check)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.noticed = False

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if not self.noticed and scope["type"] == "http" and _header(scope, b"authorization"):
            self.noticed = True
            logger.warning(
                "a request to %s carried credentials, but this datasource has no token and "
                "serves everyone: set SLICECOUNT_TOKEN (or --token) to check them",
                scope.get("path", ""),
            )
        await self.app(scope, receive, send)
