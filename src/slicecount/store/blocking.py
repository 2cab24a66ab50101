"""The blocking store: the only module (with its asyncio twin) that sends Redis commands.

It executes operations (``store.run(op(store.context, ...))``): each operation runs on one
pooled connection, each batch goes out as one packed buffer and its replies are fed to a
``ReplyReader``; redis-py errors become ``StoreError``. No logic of its own. The method table at
the end binds the public data API (writing, reading, annotating and unique counts) as methods;
a feature's own operations (the cleaner's trims, resharding's moves, the throttle's hits) are run
by that feature, so the store imports none of them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot
from redis.sentinel import Sentinel

from slicecount.config import Settings
from slicecount.errors import StoreError
from slicecount.operations import (
    annotating,
    exemplar_reading,
    reading,
    unique_reading,
    unique_writing,
    writing,
)
from slicecount.operations.batches import Batch, Context, Operation, ping
from slicecount.store.failures import REDIS_ERRORS, refusal
from slicecount.store.replies import ReplyReader, ScriptMissing
from slicecount.store.routing import split
from slicecount.store.wire import LOAD_SCRIPTS, MOVED, Clients, StoreBase, connect, pack

P = ParamSpec("P")
T = TypeVar("T")


def _blocking(
    op: Callable[Concatenate[Context, P], Operation[T]],
) -> Callable[Concatenate[Store, P], T]:
    """An operation as a ``Store`` method (its docstring and signature, minus the context)."""

    @functools.wraps(op)
    def method(self: Store, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.run(op(self.context, *args, **kwargs))

    return method


CLIENTS = Clients(redis.Redis, Sentinel, RedisCluster, ClusterNode)


class Store(StoreBase["redis.Redis | RedisCluster"]):
    """Counters in Redis at every configured precision (blocking redis-py client)."""

    @staticmethod
    def _connect(settings: Settings) -> redis.Redis | RedisCluster:
        client: redis.Redis | RedisCluster = connect(settings, CLIENTS)
        return client

    def run(self, operation: Operation[T]) -> T:
        """Drive one operation to its result: on one pooled connection, or on a cluster one
        per node it reaches (each batch split by node, a transaction whole to its slot's)."""
        try:
            batch = next(operation)  # argument checks run here, before any I/O
        except StopIteration as nothing_to_send:
            early: T = nothing_to_send.value
            return early
        held: dict[Any, tuple[Any, Any]] = {}  # node -> (pool, connection)
        try:
            while True:
                batch = operation.send(self._dispatch(held, batch))
        except StopIteration as done:
            result: T = done.value
            return result
        except REDIS_ERRORS as exc:
            self._drop(held)
            self._reload_slots()  # a node may be gone: its replica may serve its slots now
            raise self._error(exc) from exc
        except BaseException as exc:
            # half-read replies, or a refusal that left state behind (a WATCH): never reuse
            self._drop(held)
            if isinstance(exc, StoreError) and MOVED.search(str(exc)):
                self._reload_slots()  # the slots moved: learn where, the caller retries
            raise
        finally:
            for pool, connection in held.values():
                pool.release(connection)

    def _dispatch(self, held: dict[Any, tuple[Any, Any]], batch: Batch) -> list[Any]:
        client = self.client
        if not isinstance(client, RedisCluster):
            return self._send(self._held(held, None, client.connection_pool), batch)
        nodes = client.nodes_manager
        parts = split(
            batch,
            lambda key: nodes.get_node_from_slot(key_slot(key.encode())),
            client.get_default_node(),  # type: ignore[no-untyped-call]
        )
        if len(parts) == 1:
            node, whole, _ = parts[0]
            pool = client.get_redis_connection(node).connection_pool
            return self._send(self._held(held, node.name, pool), whole)
        replies: list[Any] = [None] * len(batch.commands)
        for node, part, positions in parts:
            pool = client.get_redis_connection(node).connection_pool
            for position, reply in zip(
                positions, self._send(self._held(held, node.name, pool), part), strict=True
            ):
                replies[position] = reply
        return replies

    def _reload_slots(self) -> None:
        """On a cluster, learn again which node serves which slot (best effort)."""
        if isinstance(self.client, RedisCluster):
            try:
                self.client.nodes_manager.initialize()
            except REDIS_ERRORS:  # (no node answers: RedisClusterException, not a RedisError)
                pass  # the cluster is still electing: the next attempt asks again

    @staticmethod
    def _held(held: dict[Any, tuple[Any, Any]], node: Any, pool: Any) -> Any:
        """The operation's connection to ``node``, taken from ``pool`` the first time."""
        if node not in held:
            held[node] = (pool, pool.get_connection())
        return held[node][1]

    @staticmethod
    def _drop(held: dict[Any, tuple[Any, Any]]) -> None:
        for _, connection in held.values():
            connection.disconnect()

    def _send(self, connection: Any, batch: Batch) -> list[Any]:
        try:
            return self._round_trip(connection, batch)
        except ScriptMissing:  # a new, restarted or flushed server: teach it, send again
            self._round_trip(connection, LOAD_SCRIPTS)
            return self._round_trip(connection, batch)

    @staticmethod
    def _round_trip(connection: Any, batch: Batch) -> list[Any]:
        reader = ReplyReader(batch)
        connection.send_packed_command([pack(batch)])
        for _ in range(reader.expected):
            try:
                reply = connection.read_response(disable_decoding=batch.raw)
            except redis.ResponseError as error:
                reply = refusal(error)
            reader.feed(reply)
        return reader.result()

    def ping(self) -> bool:
        """True when Redis answers."""
        try:
            return self.run(ping(self.context))
        except StoreError:
            return False

    def close(self) -> None:
        """Release the connection pool (and the connections to the Sentinels, if any)."""
        self.client.close()
        if isinstance(self.client, RedisCluster):
            return
        guard = getattr(self.client.connection_pool, "sentinel_manager", None)
        for sentinel in getattr(guard, "sentinels", ()):
            sentinel.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    incr = _blocking(writing.incr)
    add_unique = _blocking(unique_writing.add_unique)
    write_uniques = _blocking(unique_writing.write_uniques)
    apply = _blocking(writing.apply)
    write_chunk = _blocking(writing.write_chunk)
    get = _blocking(reading.get)
    series = _blocking(reading.series)
    names = _blocking(reading.names)
    all_series = _blocking(reading.all_series)
    read = _blocking(reading.read)
    read_stored = _blocking(reading.read_stored)
    delete = _blocking(reading.delete)
    annotate = _blocking(annotating.annotate)
    annotations = _blocking(annotating.find)
    exemplars = _blocking(exemplar_reading.read_exemplars)
    get_unique = _blocking(unique_reading.get_unique)
    members = _blocking(unique_reading.members)
    count_unions = _blocking(unique_reading.count_unions)
    unique_series = _blocking(unique_reading.unique_series)
    all_unique_series = _blocking(unique_reading.all_unique_series)
