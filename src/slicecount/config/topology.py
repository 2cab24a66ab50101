"""What a Redis URL names, decided once (as the ``limits`` library does). Pure.

    redis://host:6379/0, rediss://..., unix:///path/redis.sock?db=0   one server
    redis+sentinel://host:26379,host:26380/mymaster/0                 the primary a group of
    rediss+sentinel://...                                             Sentinels guards
    redis+cluster://host:7000,host:7001                               a Redis Cluster

Options travel in the query string (``?password=...&socket_timeout=...``); for Sentinel the
password is the primary's (``sentinel_password=`` is the Sentinels' own).

A URL is shown (in an error, a log line, a repr, the CLI's output) only through ``redact``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import parse_qsl, unquote, unquote_plus, urlsplit

from slicecount.errors import ConfigurationError

Kind = Literal["standalone", "sentinel", "cluster"]
SCHEMES: dict[str, tuple[Kind, bool]] = {
    "redis": ("standalone", False),
    "rediss": ("standalone", True),
    "unix": ("standalone", False),
    "redis+sentinel": ("sentinel", False),
    "rediss+sentinel": ("sentinel", True),
    "redis+cluster": ("cluster", False),
    "rediss+cluster": ("cluster", True),
}
DEFAULT_PORTS = {"standalone": 6379, "sentinel": 26379, "cluster": 6379}
TLS_SCHEMES = {
    "redis": "rediss://",
    "unix": "rediss://",
    "redis+sentinel": "rediss+sentinel://",
    "redis+cluster": "rediss+cluster://",
}
REDACTED = "***"
"""What a password is shown as."""


@dataclass(frozen=True)
class Topology:
    """One server, a Sentinel-guarded primary, or a cluster: the nodes to ask first."""

    kind: Kind
    url: str
    nodes: tuple[tuple[str, int], ...] = ()
    service: str = ""  # the Sentinel service name
    db: int = 0
    tls: bool = False
    username: str | None = None
    password: str | None = None
    options: dict[str, str] = field(default_factory=dict)


def parse_url(url: str) -> Topology:
    """The topology of ``url``; ConfigurationError naming the URL (redacted) and what is wrong."""
    shown = redact(url)
    if "://" not in url:  # "localhost:6379" parses as scheme "localhost"
        example = redact("unix://" + url if url.startswith("/") else "redis://" + url)
        raise ConfigurationError(
            f"redis URL {shown!r} has no scheme: write e.g. {example} "
            f"(one of {', '.join(s + '://' for s in SCHEMES)})"
        )
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unclosed [IPv6 bracket
        raise ConfigurationError(f"malformed redis URL {shown!r}: {exc}") from None
    if parts.scheme not in SCHEMES:
        raise ConfigurationError(
            f"unknown redis URL scheme {parts.scheme!r} in {shown!r}: expected one of "
            f"{', '.join(SCHEMES)}"
        )
    kind, tls = SCHEMES[parts.scheme]
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    tls_options = sorted(name for name in options if name.startswith("ssl_"))
    if tls_options and not tls:
        raise ConfigurationError(
            f"{', '.join(tls_options)} in {shown!r} need TLS: use {TLS_SCHEMES[parts.scheme]}"
        )
    if kind == "standalone":
        return Topology("standalone", url, tls=tls)
    username, password = _credentials(parts.netloc, options)
    nodes = _nodes(shown, parts.netloc.rpartition("@")[2], DEFAULT_PORTS[kind])
    path = [p for p in parts.path.split("/") if p]
    if kind == "cluster":
        if path and path != ["0"]:
            raise ConfigurationError(f"a Redis Cluster has only database 0, got {shown!r}")
        return Topology(
            "cluster", url, nodes, tls=tls, username=username, password=password, options=options
        )
    if not path or len(path) > 2:
        raise ConfigurationError(
            f"a Sentinel URL names its service: redis+sentinel://host:26379/mymaster[/db], "
            f"got {shown!r}"
        )
    db = path[1] if len(path) == 2 else options.pop("db", "0")
    if not db.isdigit():
        raise ConfigurationError(f"database must be a number, got {db!r} in {shown!r}")
    return Topology(
        "sentinel", url, nodes, unquote(path[0]), int(db), tls, username, password, options
    )


def _credentials(netloc: str, options: dict[str, str]) -> tuple[str | None, str | None]:
    userinfo, at, _ = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    password = options.pop("password", password)
    username = options.pop("username", username)
    return username, password


def _nodes(url: str, hosts: str, default_port: int) -> tuple[tuple[str, int], ...]:
    nodes = []
    for item in hosts.split(","):
        host, colon, port = item.strip().rpartition(":") if ":" in item else (item, "", "")
        host = host.strip("[]") or "127.0.0.1"
        if colon and not port.isdigit():
            raise ConfigurationError(f"port must be a number, got {port!r} in {redact(url)!r}")
        nodes.append((host, int(port) if colon else default_port))
    if not hosts.strip():
        raise ConfigurationError(f"no host in {redact(url)!r}: name at least one node")
    return tuple(nodes)


def without_options(url: str, names: frozenset[str]) -> str:
    """``url`` with the query options ``names`` removed (a caller that must set them itself:
    redis-py lets URL options win over keyword arguments); the rest kept as written (a
    rebuilt ``unix:///path`` would lose its ``//``, which redis-py then refuses)."""
    base, _, query = url.partition("?")
    kept = [item for item in query.split("&") if item and _name(item) not in names]
    return f"{base}?{'&'.join(kept)}" if kept else base


def redact(url: str) -> str:
    """``url`` fit to show in an error, a log line or a repr: the password of its user part
    and the value of every option whose name holds ``password`` (``password``,
    ``sentinel_password``, ``ssl_password``) replaced by ``***``; scheme, user name, hosts,
    database and other options kept. Works on any text, a malformed URL too."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    # The user part ends at the LAST "@": a password with an unencoded "/", "?" or "@" is
    # hidden whole (more than urlsplit would take as userinfo: never less).
    userinfo, at, tail = rest.rpartition("@")
    if at:
        user, colon, _ = userinfo.partition(":")
        rest = f"{user}:{REDACTED}@{tail}" if colon else rest
    return f"{scheme}{sep}{_redact_query(rest)}"


def secrets(url: str) -> tuple[str, ...]:
    """The passwords ``url`` holds, as written and decoded (longest first): what must be
    scrubbed from any text that might quote them (a client library's error message)."""
    found: set[str] = set()
    userinfo, at, _ = url.partition("://")[2].rpartition("@")
    if at and ":" in userinfo:
        found.add(userinfo.partition(":")[2])
    for item in url.partition("?")[2].split("&"):
        name, equals, value = item.partition("=")
        if equals and _secret_option(name):
            found.add(value.partition("#")[0])
    found |= {unquote_plus(secret) for secret in found} | {unquote(s) for s in found}
    return tuple(sorted((s for s in found if s), key=len, reverse=True))


def scrub(text: str, url: str) -> str:
    """``text`` with every password of ``url`` replaced by ``***``."""
    for secret in secrets(url):
        text = text.replace(secret, REDACTED)
    return text


def _name(item: str) -> str:
    return unquote_plus(item.partition("=")[0])


def _secret_option(name: str) -> bool:
    return "password" in unquote_plus(name).lower()


def _redact_query(text: str) -> str:
    base, mark, query = text.partition("?")
    if not mark:
        return text
    items = [
        f"{item.partition('=')[0]}={REDACTED}" if _secret_option(_name(item)) else item
        for item in query.split("&")
    ]
    return f"{base}?{'&'.join(items)}"
