"""What the sync and asyncio stores share beside the operations: client options, the Lua
scripts and the packing of a batch into RESP bytes (what a redis-py error means: ``failures``).
Sends nothing."""

from __future__ import annotations

import hashlib
import re
import time
from importlib import resources
from typing import Any, Generic, NamedTuple, TypeVar

from hiredis import pack_command
from redis.backoff import NoBackoff
from redis.retry import Retry

from slicecount.config import Settings
from slicecount.config.topology import REDACTED, parse_url, redact, scrub
from slicecount.core.keys import KeySpace
from slicecount.errors import ConfigurationError, StoreError
from slicecount.operations.batches import Batch, Clock, Command, Context, ScriptCall
from slicecount.store.failures import REDIS_ERRORS, failure

C = TypeVar("C")
S = TypeVar("S", bound="StoreBase[Any]")

SCRIPTS = {
    script.name.removesuffix(".lua"): script.read_text(encoding="utf-8")
    for script in sorted(
        (resources.files("slicecount.store") / "lua").iterdir(), key=lambda f: f.name
    )
    if script.name.endswith(".lua")
}
"""Lua scripts shipped as package data, sent by EVALSHA (loaded on NOSCRIPT)."""
SCRIPT_SHAS = {name: hashlib.sha1(src.encode()).hexdigest() for name, src in SCRIPTS.items()}

LOAD_SCRIPTS = Batch([("SCRIPT", "LOAD", source) for source in SCRIPTS.values()])
"""The batch that teaches a server (new, restarted or flushed) every script."""


def _flag(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


def _cert_reqs(text: str) -> str:
    if text not in ("none", "optional", "required"):
        raise ValueError(text)
    return text


TLS_OPTIONS: dict[str, Any] = {
    "ssl_ca_certs": str,
    "ssl_certfile": str,
    "ssl_keyfile": str,
    "ssl_cert_reqs": _cert_reqs,
    "ssl_check_hostname": _flag,
}
"""redis-py's TLS options a ``rediss+sentinel://`` or ``rediss+cluster://`` URL may carry
(the ones both the blocking and the asyncio clients take); a ``rediss://`` URL takes all of
redis-py's own."""
SENTINEL_OPTIONS: dict[str, Any] = {
    "socket_timeout": float,
    "socket_connect_timeout": float,
    "sentinel_password": str,
    "sentinel_username": str,
    **TLS_OPTIONS,
}
"""Query-string options a Sentinel URL may carry (a standalone URL takes redis-py's own)."""
CLUSTER_OPTIONS: dict[str, Any] = {
    "socket_timeout": float,
    "socket_connect_timeout": float,
    **TLS_OPTIONS,
}
"""Query-string options a cluster URL may carry."""


def _options(settings: Settings, known: dict[str, Any], also: str) -> dict[str, Any]:
    """The URL's options of a Sentinel or cluster URL, converted; ConfigurationError naming
    an unknown one or a bad value."""
    topology = parse_url(settings.redis_url)
    values = {}
    for name, text in topology.options.items():
        kind = known.get(name)
        if kind is None:
            raise ConfigurationError(
                f"unknown option {name!r} in {redact(settings.redis_url)!r}: expected one of "
                f"{', '.join(known)}, {also}"
            )
        try:
            values[name] = kind(text)
        except ValueError:
            shown = REDACTED if "password" in name else repr(text)
            raise ConfigurationError(f"option {name}={shown} is not valid") from None
    return values


def sentinel_arguments(
    settings: Settings,
) -> tuple[list[tuple[str, int]], dict[str, Any], dict[str, Any]]:
    """(the Sentinels, their connection options, the primary's) for redis-py's ``Sentinel``
    (sync and asyncio take the same); ConfigurationError naming an unknown option."""
    topology = parse_url(settings.redis_url)
    primary = client_options(settings)
    sentinel: dict[str, Any] = {
        "socket_timeout": settings.socket_timeout,
        "socket_connect_timeout": settings.socket_timeout,
    }
    # the Sentinels and the primary share the TLS options: one CA signs both, as a TLS
    # Sentinel setup (tls-replication) requires
    for name, value in _options(settings, SENTINEL_OPTIONS, "password, username, db").items():
        if name.startswith("sentinel_"):
            sentinel[name.removeprefix("sentinel_")] = value
        else:
            primary[name] = sentinel[name] = value
    primary |= {"db": topology.db, "password": topology.password, "username": topology.username}
    if topology.tls:
        primary["ssl"] = sentinel["ssl"] = True
    return list(topology.nodes), sentinel, primary


MOVED = re.compile(r"\b(?:MOVED|ASK|CLUSTERDOWN)\b")
"""Refusals saying the cluster's slots are elsewhere (or moving): the slot map is reloaded."""


def cluster_arguments(settings: Settings) -> tuple[list[tuple[str, int]], dict[str, Any]]:
    """(the seed nodes, the options of every node's connections) for a Redis Cluster."""
    topology = parse_url(settings.redis_url)
    options = client_options(settings) | _options(settings, CLUSTER_OPTIONS, "password, username")
    options |= {"password": topology.password, "username": topology.username}
    if topology.tls:
        options["ssl"] = True
    return list(topology.nodes), options


class Clients(NamedTuple):
    """The redis-py classes of one flavour (blocking or asyncio) that ``connect`` builds."""

    plain: Any
    sentinel: Any
    cluster: Any
    node: Any


def connect(settings: Settings, clients: Clients) -> Any:
    """The client the URL's topology calls for: one server, the primary a group of Sentinels
    names, or a cluster seeded by the URL's nodes."""
    topology = parse_url(settings.redis_url)
    if topology.kind == "sentinel":
        nodes, watchers, primary = sentinel_arguments(settings)
        guard = clients.sentinel(nodes, sentinel_kwargs=watchers)
        return guard.master_for(topology.service, **primary)
    if topology.kind == "cluster":
        nodes, options = cluster_arguments(settings)
        seeds = [clients.node(host, port) for host, port in nodes]
        return clients.cluster(startup_nodes=seeds, **options)
    try:
        client = clients.plain.from_url(settings.redis_url, **client_options(settings))
        pool = client.connection_pool
        # what the first connection would refuse (an unknown option, a bad port), refused now
        pool.connection_class(**pool.connection_kwargs)
    except (TypeError, ValueError) as exc:
        url = settings.redis_url
        raise ConfigurationError(f"redis URL {redact(url)!r}: {scrub(str(exc), url)}") from None
    return client


def client_options(settings: Settings) -> dict[str, Any]:
    """redis-py connection options shared by the sync and asyncio clients."""
    return {
        "decode_responses": True,
        # RESP2, whatever the client's default: the operations decode flat HGETALL/ZSCAN
        # replies, and proxies and managed services that lack HELLO 3 still work.
        "protocol": 2,
        "socket_timeout": settings.socket_timeout,
        "socket_connect_timeout": settings.socket_timeout,
        # Retries belong to the caller (the Recorder merges a failed batch back): a silent
        # library retry of a MULTI/EXEC whose reply was lost could count it twice.
        "retry": Retry(NoBackoff(), 0),
    }


def pack(batch: Batch) -> bytes:
    """The batch as one RESP buffer (MULTI/EXEC around it for a transaction). hiredis packs a
    70 000-command flush in ~0.1 s; redis-py's pipeline would spend ~1 s of Python on it."""
    packed = [_packed(command) for command in batch.commands]
    if batch.transaction:
        packed = [pack_command(("MULTI",)), *packed, pack_command(("EXEC",))]
    return b"".join(packed)


_REREAD = frozenset({"HGETALL"})
"""Commands sent again with the same keys, packed once: a live refresh reads every series'
open hash, 2 300 of them at 40 routes, and packing them was 5 % of its CPU."""
_PACKED: dict[Command, bytes] = {}
_MAX_PACKED = 100_000


def _packed(command: Command | ScriptCall) -> bytes:
    if isinstance(command, ScriptCall) or command[0] not in _REREAD:
        one: bytes = pack_command(_wire(command))
        return one
    found = _PACKED.get(command)
    if found is None:
        if len(_PACKED) >= _MAX_PACKED:
            _PACKED.clear()  # a new key after another: packing them all again costs little
        found = _PACKED[command] = pack_command(command)
    return found


def _wire(command: Command | ScriptCall) -> Command:
    """A command as sent: script calls become EVALSHA of the script's SHA1."""
    if isinstance(command, ScriptCall):
        sha = SCRIPT_SHAS[command.name]
        return ("EVALSHA", sha, len(command.keys), *command.keys, *command.args)
    return command


class StoreBase(Generic[C]):
    """What ``Store`` and ``AsyncStore`` hold: the operations' context and a client of kind C."""

    def __init__(
        self, settings: Settings | None = None, *, client: C | None = None, clock: Clock = time.time
    ) -> None:
        self.context = Context.of(settings if settings is not None else Settings(), clock)
        self.settings: Settings = self.context.settings
        self.keys: KeySpace = self.context.keys
        self.clock = clock
        try:  # (a cluster client reads the slot map here)
            self.client: C = client if client is not None else self._connect(self.settings)
        except REDIS_ERRORS as exc:
            raise self._error(exc) from exc

    @staticmethod
    def _connect(settings: Settings) -> C:
        raise NotImplementedError

    @classmethod
    def from_url(cls: type[S], url: str, *, clock: Clock = time.time, **settings: Any) -> S:
        """A store for ``url``; other keyword arguments are ``Settings`` fields."""
        return cls(Settings(redis_url=url, **settings), clock=clock)

    def _error(self, exc: Exception) -> StoreError:
        """A redis-py error as slicecount raises it: the URL redacted, and any password the
        library's text might quote scrubbed (the message of a Sentinel's or a cluster's
        error embeds the errors of every node it tried)."""
        url = self.settings.redis_url
        return StoreError(
            f"redis at {redact(url)}: {scrub(str(exc), url)}", failure=scrub(failure(exc), url)
        )
