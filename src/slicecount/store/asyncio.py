"""The asyncio store: the same operations as ``Store``, executed with redis.asyncio.

Only the executor differs from ``slicecount.store`` (``await`` on the connection); the method
table binds the public data API an asyncio caller uses (the datasource, async apps and
scripts); a feature runs its own operations with ``await store.run(op(store.context, ...))``.
"""

from __future__ import annotations

import asyncio
import functools
import math
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

import redis
import redis.asyncio as aioredis
from redis._parsers.hiredis import NOT_ENOUGH_DATA, _AsyncHiredisParser
from redis.asyncio.cluster import ClusterNode as AsyncClusterNode
from redis.asyncio.cluster import RedisCluster as AsyncCluster
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.crc import key_slot

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

if sys.version_info >= (3, 11, 3):
    from asyncio import timeout as deadline  # type: ignore[attr-defined, unused-ignore]

    def move(window: Any, when: float) -> None:
        window.reschedule(when)

else:  # asyncio's is broken before 3.11.3 (redis-py#2633); redis requires this one there
    from async_timeout import timeout as deadline

    def move(window: Any, when: float) -> None:
        window.update(when)


P = ParamSpec("P")
T = TypeVar("T")


def _awaiting(
    op: Callable[Concatenate[Context, P], Operation[T]],
) -> Callable[Concatenate[AsyncStore, P], Coroutine[Any, Any, T]]:
    """An operation as an ``AsyncStore`` coroutine method."""

    @functools.wraps(op)
    async def method(self: AsyncStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.run(op(self.context, *args, **kwargs))

    return method


def _hiredis_reader(connection: Any) -> Any:
    """The hiredis reader of a connection speaking RESP2 (ours, ``wire.client_options``),
    or None: another parser (a client built without hiredis) is read reply by reply."""
    parser = getattr(connection, "_parser", None)
    if isinstance(parser, _AsyncHiredisParser) and connection.protocol in (2, "2"):
        return getattr(parser, "_reader", None)
    return None


async def _take(
    hiredis: Any, parser: Any, reader: ReplyReader, raw: bool, more: Callable[[], None]
) -> None:
    """Feed ``reader`` its replies from ``hiredis``, reading the socket when it runs dry. As
    redis-py's parser does: an error reply is a refusal, a connection error (LOADING ...)
    raises, alone or first in an array."""
    gets = hiredis.gets
    left = reader.expected
    replies: list[Any] = []
    refused = False
    while left:
        reply = gets(False) if raw else gets()
        if reply is NOT_ENOUGH_DATA:
            try:
                await parser.read_from_socket()  # (raises when Redis closed the connection)
            except OSError as reset:  # as redis-py's read_response names it
                raise redis.ConnectionError(f"error while reading from Redis: {reset}") from reset
            more()
            continue
        if type(reply) is list:
            if reply and isinstance(reply[0], redis.ConnectionError):
                raise reply[0]
        elif isinstance(reply, redis.ResponseError):
            reply = refusal(reply)
            refused = True
        elif isinstance(reply, redis.ConnectionError):
            raise reply
        replies.append(reply)
        left -= 1
    reader.feed_all(replies, refused)


CLIENTS = Clients(aioredis.Redis, AsyncSentinel, AsyncCluster, AsyncClusterNode)


class AsyncStore(StoreBase["aioredis.Redis | AsyncCluster"]):
    """Counters in Redis at every configured precision (redis.asyncio client)."""

    @staticmethod
    def _connect(settings: Settings) -> aioredis.Redis | AsyncCluster:
        client: aioredis.Redis | AsyncCluster = connect(settings, CLIENTS)
        return client

    async def run(self, operation: Operation[T]) -> T:
        """Drive one operation to its result: on one pooled connection, or on a cluster one
        per node it reaches (a batch spanning nodes is sent to them concurrently)."""
        try:
            batch = next(operation)  # argument checks run here, before any I/O
        except StopIteration as nothing_to_send:
            early: T = nothing_to_send.value
            return early
        held: dict[Any, tuple[Callable[[Any], Awaitable[None]], Any]] = {}
        try:
            while True:
                batch = operation.send(await self._dispatch(held, batch))
        except StopIteration as done:
            result: T = done.value
            return result
        except REDIS_ERRORS as exc:
            await self._drop(held)
            await self._reload_slots()  # a node may be gone: its replica may serve its slots
            raise self._error(exc) from exc
        except BaseException as exc:
            # cancelled mid-reply, or a refusal that left state behind (a WATCH): never reuse
            await self._drop(held)
            if isinstance(exc, StoreError) and MOVED.search(str(exc)):
                await self._reload_slots()  # the slots moved: learn where, the caller retries
            raise
        finally:
            for release, connection in held.values():
                await release(connection)

    async def _dispatch(
        self, held: dict[Any, tuple[Callable[[Any], Awaitable[None]], Any]], batch: Batch
    ) -> list[Any]:
        client = self.client
        if not isinstance(client, AsyncCluster):
            pool = client.connection_pool
            if None not in held:
                taken = await pool.get_connection()  # type: ignore[no-untyped-call]
                held[None] = (pool.release, taken)
            return await self._send(held[None][1], batch)
        if client._initialize:  # the slot map, once
            await client.initialize()
        nodes = client.nodes_manager
        parts = split(
            batch,
            lambda key: nodes.get_node_from_slot(key_slot(key.encode())),
            client.get_default_node(),
        )

        def connection(node: Any) -> Any:
            if node.name not in held:

                async def release(used: Any) -> None:
                    node.release(used)

                held[node.name] = (release, node.acquire_connection())
            return held[node.name][1]

        if len(parts) == 1:
            node, whole, _ = parts[0]
            return await self._send(connection(node), whole)
        answers = await asyncio.gather(
            *(self._send(connection(node), part) for node, part, _ in parts)
        )
        replies: list[Any] = [None] * len(batch.commands)
        for (_, _, positions), answer in zip(parts, answers, strict=True):
            for position, reply in zip(positions, answer, strict=True):
                replies[position] = reply
        return replies

    async def _reload_slots(self) -> None:
        """On a cluster, learn again which node serves which slot (best effort)."""
        if isinstance(self.client, AsyncCluster):
            try:
                await self.client.nodes_manager.initialize()
            except REDIS_ERRORS:  # (no node answers: RedisClusterException, not a RedisError)
                pass  # the cluster is still electing: the next attempt asks again

    @staticmethod
    async def _drop(held: dict[Any, tuple[Callable[[Any], Awaitable[None]], Any]]) -> None:
        for _, connection in held.values():
            await connection.disconnect()

    async def _send(self, connection: Any, batch: Batch) -> list[Any]:
        try:
            return await self._round_trip(connection, batch)
        except ScriptMissing:
            await self._round_trip(connection, LOAD_SCRIPTS)
            return await self._round_trip(connection, batch)

    @staticmethod
    async def _round_trip(connection: Any, batch: Batch) -> list[Any]:
        """Send a batch and read its replies under one deadline, moved on by
        ``socket_timeout`` whenever Redis sends more: Redis silent that long fails the batch.
        The replies are taken straight from the connection's hiredis reader as each read
        from the socket allows: redis-py's ``read_response`` (its own timeout, set up and
        torn down at each reply, three coroutines deep) cost a refresh reading its open
        hashes (thousands of small replies) more than Redis took to send them."""
        reader = ReplyReader(batch)
        await connection.send_packed_command([pack(batch)])
        wait: float | None = connection.socket_timeout
        loop = asyncio.get_running_loop()
        try:
            async with deadline(wait) as window:

                def more() -> None:  # Redis sent something: it has another wait to go on
                    if wait is not None:
                        move(window, loop.time() + wait)

                hiredis = _hiredis_reader(connection)
                if hiredis is not None:
                    await _take(hiredis, connection._parser, reader, batch.raw, more)
                else:
                    for _ in range(reader.expected):
                        try:
                            reply = await connection.read_response(
                                disable_decoding=batch.raw, timeout=math.inf
                            )
                        except redis.ResponseError as error:
                            reply = refusal(error)
                        reader.feed(reply)
                        more()
        except asyncio.TimeoutError as silent:  # (the built-in TimeoutError from 3.11 on)
            await connection.disconnect(nowait=True)  # mid-reply: never reused
            raise redis.TimeoutError(f"no reply from Redis for {wait} s") from silent
        return reader.result()

    async def ping(self) -> bool:
        """True when Redis answers."""
        try:
            return await self.run(ping(self.context))
        except StoreError:
            return False

    async def close(self) -> None:
        """Release the connection pool (and the connections to the Sentinels, if any)."""
        await self.client.aclose()
        if isinstance(self.client, AsyncCluster):
            return
        guard = getattr(self.client.connection_pool, "sentinel_manager", None)
        for sentinel in getattr(guard, "sentinels", ()):
            await sentinel.aclose()

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    incr = _awaiting(writing.incr)
    add_unique = _awaiting(unique_writing.add_unique)
    write_uniques = _awaiting(unique_writing.write_uniques)
    apply = _awaiting(writing.apply)
    get = _awaiting(reading.get)
    series = _awaiting(reading.series)
    names = _awaiting(reading.names)
    all_series = _awaiting(reading.all_series)
    read = _awaiting(reading.read)
    read_stored = _awaiting(reading.read_stored)
    delete = _awaiting(reading.delete)
    annotations = _awaiting(annotating.find)
    exemplars = _awaiting(exemplar_reading.read_exemplars)
    get_unique = _awaiting(unique_reading.get_unique)
    members = _awaiting(unique_reading.members)
    count_unions = _awaiting(unique_reading.count_unions)
    unique_series = _awaiting(unique_reading.unique_series)
    all_unique_series = _awaiting(unique_reading.all_unique_series)
