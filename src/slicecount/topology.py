"""What a Redis URL names, decided once (as the ``limits`` library does). Pure.

    redis://host:6379/0, rediss://..., unix:///path/redis.sock?db=0   one server
    redis+sentinel://host:26379,host:26380/mymaster/0                 the primary a group of
    rediss+sentinel://...                                             Sentinels guards
    redis+cluster://host:7000,host:7001                               a Redis Cluster

Options travel in the query string (``?password=...&socket_timeout=...``); for Sentinel the
password is the primary's (``sentinel_password=`` is the Sentinels' own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

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
    """The topology of ``url``; ConfigurationError naming the URL and what is wrong."""
    if "://" not in url:  # "localhost:6379" parses as scheme "localhost"
        example = "unix://" + url if url.startswith("/") else "redis://" + url
        raise ConfigurationError(
            f"redis URL {url!r} has no scheme: write e.g. {example} "
            f"(one of {', '.join(s + '://' for s in SCHEMES)})"
        )
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ConfigurationError(
            f"unknown redis URL scheme {parts.scheme!r} in {url!r}: expected one of "
            f"{', '.join(SCHEMES)}"
        )
    kind, tls = SCHEMES[parts.scheme]
    if kind == "standalone":
        return Topology("standalone", url, tls=tls)
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    username, password = _credentials(parts.netloc, options)
    nodes = _nodes(url, parts.netloc.rpartition("@")[2], DEFAULT_PORTS[kind])
    path = [p for p in parts.path.split("/") if p]
    if kind == "cluster":
        if path and path != ["0"]:
            raise ConfigurationError(f"a Redis Cluster has only database 0, got {url!r}")
        return Topology("cluster", url, nodes, tls=tls, username=username, password=password,
                        options=options)  # fmt: skip
    if not path or len(path) > 2:
        raise ConfigurationError(
            f"a Sentinel URL names its service: redis+sentinel://host:26379/mymaster[/db], "
            f"got {url!r}"
        )
    db = path[1] if len(path) == 2 else options.pop("db", "0")
    if not db.isdigit():
        raise ConfigurationError(f"database must be a number, got {db!r} in {url!r}")
    return Topology("sentinel", url, nodes, unquote(path[0]), int(db), tls, username, password,
                    options)  # fmt: skip


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
            raise ConfigurationError(f"port must be a number, got {port!r} in {url!r}")
        nodes.append((host, int(port) if colon else default_port))
    if not hosts.strip():
        raise ConfigurationError(f"no host in {url!r}: name at least one node")
    return tuple(nodes)


def without_options(url: str, names: frozenset[str]) -> str:
    """``url`` with the query options ``names`` removed (a caller that must set them itself:
    redis-py lets URL options win over keyword arguments)."""
    parts = urlsplit(url)
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in names]
    return urlunsplit(parts._replace(query=urlencode(kept)))
