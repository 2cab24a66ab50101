"""Optional auth for the datasource: ``SLICECOUNT_TOKEN`` as a bearer token or as the password
of basic auth (Grafana's proxy sends either), compared in constant time. Pure ASGI."""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]

OPEN_PATHS = frozenset(
    {("GET", "/"), ("HEAD", "/")}
    | {("GET", "/api/v1/status/buildinfo"), ("POST", "/api/v1/status/buildinfo")}
)
"""What Grafana's "Save & test" probes (and the built-in page), and the Prometheus version
Grafana reads to pick its features: answered without credentials."""
OPEN_PREFIX = "/ui/"
"""The page's static files: public code, no data (its API calls carry the token)."""


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


class TokenAuth:
    """Answers 401 to every request but ``GET /`` unless it carries the token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        method, path = scope.get("method"), scope.get("path", "")
        if (
            scope["type"] != "http"
            or (method, path) in OPEN_PATHS
            or (method in ("GET", "HEAD") and path.startswith(OPEN_PREFIX))
        ):
            await self.app(scope, receive, send)
            return
        header = dict(scope.get("headers") or []).get(b"authorization")
        if authorized(header, self.token):
            await self.app(scope, receive, send)
            return
        body = b'{"message":"authentication required: send the SLICECOUNT_TOKEN as a bearer token"}'
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="slicecount"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
