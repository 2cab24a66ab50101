"""The asyncio store: the same operations as ``Store``, executed with redis.asyncio.

Only the executor differs from ``slicecount.store`` (``await`` on the connection); the method
table binds the operations an asyncio caller uses (the datasource, async apps and scripts).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

import redis
import redis.asyncio as aioredis
from redis.asyncio.sentinel import Sentinel as AsyncSentinel

from slicecount import annotating, reading, writing
from slicecount.batches import Batch, Context, Operation, ping
from slicecount.config import Settings
from slicecount.errors import StoreError
from slicecount.replies import ReplyReader, ScriptMissing
from slicecount.topology import parse_url
from slicecount.wire import (
    LOAD_SCRIPTS,
    StoreBase,
    client_options,
    pack,
    refusal,
    sentinel_arguments,
)

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


class AsyncStore(StoreBase[aioredis.Redis]):
    """Counters in Redis at every configured precision (redis.asyncio client)."""

    @staticmethod
    def _connect(settings: Settings) -> aioredis.Redis:
        topology = parse_url(settings.redis_url)
        if topology.kind == "sentinel":
            nodes, sentinel_options, primary = sentinel_arguments(settings)
            guard = AsyncSentinel(nodes, sentinel_kwargs=sentinel_options)  # type: ignore[no-untyped-call]
            client: aioredis.Redis = guard.master_for(topology.service, **primary)
            return client
        return aioredis.Redis.from_url(settings.redis_url, **client_options(settings))

    async def run(self, operation: Operation[T]) -> T:
        """Drive one operation to its result on one pooled connection."""
        try:
            batch = next(operation)  # argument checks run here, before any I/O
        except StopIteration as nothing_to_send:
            early: T = nothing_to_send.value
            return early
        pool = self.client.connection_pool
        try:
            connection = await pool.get_connection()  # type: ignore[no-untyped-call]
        except redis.RedisError as exc:
            raise self._error(exc) from exc
        try:
            while True:
                batch = operation.send(await self._send(connection, batch))
        except StopIteration as done:
            result: T = done.value
            return result
        except redis.RedisError as exc:
            await connection.disconnect()
            raise self._error(exc) from exc
        except BaseException:
            # cancelled mid-reply, or a refusal that left state behind (a WATCH): never reuse it
            await connection.disconnect()
            raise
        finally:
            await pool.release(connection)

    async def _send(self, connection: Any, batch: Batch) -> list[Any]:
        try:
            return await self._round_trip(connection, batch)
        except ScriptMissing:
            await self._round_trip(connection, LOAD_SCRIPTS)
            return await self._round_trip(connection, batch)

    @staticmethod
    async def _round_trip(connection: Any, batch: Batch) -> list[Any]:
        reader = ReplyReader(batch)
        await connection.send_packed_command([pack(batch)])
        for _ in range(reader.expected):
            try:
                reply = await connection.read_response()
            except redis.ResponseError as error:
                reply = refusal(error)
            reader.feed(reply)
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
        guard = getattr(self.client.connection_pool, "sentinel_manager", None)
        for sentinel in getattr(guard, "sentinels", ()):
            await sentinel.aclose()

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    incr = _awaiting(writing.incr)
    apply = _awaiting(writing.apply)
    get = _awaiting(reading.get)
    series = _awaiting(reading.series)
    names = _awaiting(reading.names)
    all_series = _awaiting(reading.all_series)
    read = _awaiting(reading.read)
    delete = _awaiting(reading.delete)
    annotations = _awaiting(annotating.find)
