"""The asyncio twin of ``slicecount.store``: same names, no logic of its own."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import redis
import redis.asyncio as aioredis

from slicecount import operations as ops
from slicecount import trimming
from slicecount.config import Settings
from slicecount.errors import StoreError
from slicecount.operations import Batch, Operation
from slicecount.series import Labels
from slicecount.store_base import (
    SCRIPTS,
    Clock,
    StoreBase,
    client_options,
    exec_replies,
    pack_transaction,
    wire_command,
)


class AsyncStore(StoreBase):
    """Counters in Redis at every configured precision (redis.asyncio client)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        client: aioredis.Redis | None = None,
        clock: Clock = time.time,
    ) -> None:
        super().__init__(settings, clock=clock)
        self.client: aioredis.Redis = client or aioredis.Redis.from_url(
            self.settings.redis_url, **client_options(self.settings)
        )

    async def _execute(self, batch: Batch) -> list[Any]:
        if batch.bulk:
            return await self._execute_bulk(batch)
        try:
            return await self._execute_pipeline(batch)
        except redis.exceptions.NoScriptError:
            await self._load_scripts()  # a restarted or flushed server: load and send again
            return await self._execute_pipeline(batch)

    async def _load_scripts(self) -> None:
        try:
            for source in SCRIPTS.values():
                await self.client.script_load(source)
        except redis.RedisError as exc:
            raise StoreError(f"redis at {self.settings.redis_url}: {exc}") from exc

    async def _execute_pipeline(self, batch: Batch) -> list[Any]:
        try:
            async with self.client.pipeline(transaction=batch.transaction) as pipe:
                for command in batch.commands:
                    pipe.execute_command(*wire_command(command))
                return await pipe.execute()
        except redis.exceptions.NoScriptError:
            raise
        except redis.RedisError as exc:
            raise StoreError(f"redis at {self.settings.redis_url}: {exc}") from exc

    async def _execute_bulk(self, batch: Batch) -> list[Any]:
        """One MULTI/EXEC sent as a single packed buffer (see ``Store._execute_bulk``)."""
        pool = self.client.connection_pool
        try:
            connection = await pool.get_connection()  # type: ignore[no-untyped-call]
        except redis.RedisError as exc:
            raise StoreError(f"redis at {self.settings.redis_url}: {exc}") from exc
        try:
            await connection.send_packed_command(pack_transaction(connection, batch.commands))
            refusals: list[redis.ResponseError] = []
            for _ in range(len(batch.commands) + 1):
                try:
                    await connection.read_response()
                except redis.ResponseError as refusal:
                    refusals.append(refusal)
            try:
                replies: Any = await connection.read_response(disable_decoding=True)
            except redis.ResponseError as exc:
                replies = exc
            return exec_replies(replies, refusals)
        except StoreError:
            raise
        except redis.RedisError as exc:
            await connection.disconnect()
            raise StoreError(f"redis at {self.settings.redis_url}: {exc}") from exc
        except BaseException:
            await connection.disconnect()
            raise
        finally:
            await pool.release(connection)

    async def _run(self, operation: Operation) -> Any:
        try:
            batch = next(operation)
            while True:
                batch = operation.send(await self._execute(batch))
        except StopIteration as done:
            return done.value

    async def incr(
        self, name: str, n: int = 1, labels: Labels | None = None, now: float | None = None
    ) -> None:
        """Add ``n`` to a series at every precision now (the book's update_counter)."""
        await self._run(self._incr_op(name, n, labels, now))

    async def apply(self, batch: Mapping[str, Mapping[int, int]]) -> int:
        """Write ``{series id: {epoch second: count}}``; return how many commands Redis refused."""
        refused: int = await self._run(self._apply_op(batch))
        return refused

    async def get(
        self, name: str, precision: int, labels: Labels | None = None
    ) -> list[tuple[int, int]]:
        """Every ``(slice start, count)`` of a series at ``precision``, oldest first."""
        result: list[tuple[int, int]] = await self._run(self._get_op(name, precision, labels))
        return result

    async def series(self, name: str, precision: int) -> list[str]:
        """The series ids of metric ``name`` that exist at ``precision``."""
        result: list[str] = await self._run(self._series_op(name, precision))
        return result

    async def names(self, precision: int) -> list[str]:
        """The metric names that have a series at ``precision``."""
        result: list[str] = await self._run(self._names_op(precision))
        return result

    async def read(
        self, series_ids: Sequence[str], precision: int, start: float, end: float
    ) -> dict[str, list[int | None]]:
        """Counts of each series for every slice from ``start`` to ``end`` (None: no field)."""
        result: dict[str, list[int | None]] = await self._run(
            self._read_op(series_ids, precision, start, end)
        )
        return result

    async def all_series(self, precision: int) -> list[str]:
        """Every series id that exists at ``precision``."""
        result: list[str] = await self._run(self._all_series_op(precision))
        return result

    async def annotate(
        self,
        text: str,
        tags: Sequence[str] = (),
        when: float | None = None,
        end: float | None = None,
        title: str = "",
    ) -> dict[str, Any]:
        """Record an annotation (a deploy marker...) at ``when`` (default now); returns it."""
        annotation = self._annotation(text, tags, when, end, title)
        await self._run(ops.add_annotation(self.keys, annotation))
        return annotation

    async def annotations(
        self, start: float, end: float, tags: Sequence[str] = (), limit: int = 1000
    ) -> list[dict[str, Any]]:
        """Annotations from ``start`` to ``end`` (epoch seconds) having all ``tags``."""
        result: list[dict[str, Any]] = await self._run(self._annotations_op(start, end, limit))
        return [a for a in result if set(tags) <= set(a.get("tags", ()))]

    async def trim_chunk(
        self,
        precision: int,
        start: str | None,
        chunk: int,
        mode: str,
        cutoff: int,
        first: int,
        shard: int = 0,
    ) -> trimming.TrimChunk:
        """One atomic trim of up to ``chunk`` hashes of ``precision`` (the cleaner's step)."""
        result: trimming.TrimChunk = await self._run(
            self._trim_op(shard, precision, start, chunk, mode, cutoff, first)
        )
        return result

    async def acquire_lease(self, pass_index: int, owner: str, ttl_ms: int) -> bool:
        """True if this caller is the one cleaner to do pass ``pass_index``."""
        result: bool = await self._run(trimming.acquire_lease(self.keys, pass_index, owner, ttl_ms))
        return result

    async def cleaner_cutoffs(self) -> dict[int, int]:
        """precision -> the cutoff the last complete cleaner pass trimmed to."""
        result: dict[int, int] = await self._run(trimming.cutoffs(self.keys))
        return result

    async def save_cleaner_cutoff(self, precision: int, cutoff: int) -> None:
        await self._run(trimming.save_cutoff(self.keys, precision, cutoff))

    async def trim_annotations(self, before: float) -> int:
        """Drop annotations older than ``before`` (epoch seconds); return how many."""
        result: int = await self._run(trimming.trim_annotations(self.keys, int(before * 1000)))
        return result

    async def delete(self, name: str, labels: Labels | None = None) -> int:
        """Remove a metric (or one labelled series of it); return how many hashes went."""
        result: int = await self._run(self._delete_op(name, labels))
        return result

    async def ping(self) -> bool:
        """True when Redis answers."""
        try:
            return bool(await self.client.ping())
        except redis.RedisError:
            return False

    async def close(self) -> None:
        """Release the connection pool."""
        await self.client.aclose()

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
