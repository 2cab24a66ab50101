"""Who a request counts against: the key functions of the throttle. Pure.

A key function takes a ``Peer`` (the request as the server handed it: a WSGI environ or an
ASGI scope behind one small interface) and returns the key to count against, or None to leave
the request unlimited. The default is the address of the client the server saw. Behind
proxies that address is the nearest proxy's: ``forwarded_for(proxies=N)`` trusts the last N
entries of ``X-Forwarded-For`` as werkzeug's ProxyFix does. Trust only as many proxies as
really stand in front of the app: any client can write that header.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from slicecount.errors import ConfigurationError


class Peer:
    """A request seen through the server's own mapping (environ or scope). Its headers are
    read from that mapping on the first ``header()`` call: the default key never asks."""

    __slots__ = ("_headers", "_read", "client", "native")

    def __init__(
        self,
        client: str,
        headers: Mapping[str, str] | None,
        native: Any,
        read: Callable[[Any], Mapping[str, str]] | None = None,
    ) -> None:
        self.client = client
        self._headers = headers  # names lower-case; None: ``read(native)`` when first asked
        self._read = read
        self.native = native  # the WSGI environ or the ASGI scope

    def header(self, name: str) -> str | None:
        headers = self._headers
        if headers is None:
            headers = self._headers = self._read(self.native) if self._read is not None else {}
        return headers.get(name.lower())

    @classmethod
    def of_environ(cls, environ: Mapping[str, Any]) -> Peer:
        return cls(str(environ.get("REMOTE_ADDR") or ""), None, environ, _environ_headers)

    @classmethod
    def of_scope(cls, scope: Mapping[str, Any]) -> Peer:
        client = scope.get("client")
        return cls(str(client[0]) if client else "", None, scope, _scope_headers)


def _environ_headers(environ: Mapping[str, Any]) -> dict[str, str]:
    return {
        key[5:].replace("_", "-").lower(): value
        for key, value in environ.items()
        if key.startswith("HTTP_") and isinstance(value, str)
    }


def _scope_headers(scope: Mapping[str, Any]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return headers


KeyFunction = Callable[[Peer], "str | None"]


def client_address(peer: Peer) -> str | None:
    """The address of the client the server saw (the default key)."""
    return peer.client or None


def forwarded_for(proxies: int) -> KeyFunction:
    """The client address ``proxies`` trusted proxies report in ``X-Forwarded-For`` (each
    appends the address it saw); the server's when the header has fewer entries."""
    if proxies.__class__ is not int or proxies < 1:
        raise ConfigurationError(f"proxies must be an integer >= 1, got {proxies!r}")

    def key(peer: Peer) -> str | None:
        hops = [h.strip() for h in (peer.header("x-forwarded-for") or "").split(",") if h.strip()]
        return hops[-proxies] if len(hops) >= proxies else client_address(peer)

    return key


def header(name: str) -> KeyFunction:
    """The value of request header ``name`` (an API key, a tenant): requests without it are
    not limited by this key (pair it with a limit on the client address)."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError(f"header name must be a non-empty string, got {name!r}")

    def key(peer: Peer) -> str | None:
        return peer.header(name)

    return key


def check_names(routes: Iterable[object], what: str) -> tuple[str, ...]:
    """Route templates as given by the user: strings, else ConfigurationError naming one."""
    if isinstance(routes, str):
        raise ConfigurationError(f"{what} must be a list of route templates, got {routes!r}")
    names = tuple(routes)
    for route in names:
        if not isinstance(route, str) or not route:
            raise ConfigurationError(f"{what} must be route templates (strings), got {route!r}")
    return names  # type: ignore[return-value]
