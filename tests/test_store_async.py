"""The asyncio twin gives the same answers as the sync store on the same data."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from slicecount.config import Settings
from slicecount.embedded import EmbeddedRedis
from slicecount.errors import StoreError
from slicecount.store import Store
from slicecount.store.asyncio import AsyncStore

T0 = 1_700_000_000


@pytest.mark.topologies
@pytest.mark.layouts("book", "blocks")
def test_async_store_matches_the_sync_store(settings: Settings, store: Store) -> None:
    each = len(settings.precisions) if settings.layout == "book" else 1  # keys of a series

    async def scenario() -> None:
        async with AsyncStore(settings, clock=lambda: T0 + 3.5) as astore:
            assert await astore.ping()
            await astore.incr("a", 2, {"k": "v"})
            assert await astore.apply({'a{k="v"}': {T0: 1, T0 + 60: 5}, "b": {T0: 1}}) == 0
            assert await astore.get("a", 1, {"k": "v"}) == store.get("a", 1, {"k": "v"})
            assert await astore.get("a", 60, {"k": "v"}) == [(T0 - 20, 3), (T0 + 40, 5)]
            assert await astore.series("a", 5) == store.series("a", 5) == ['a{k="v"}']
            assert await astore.names(3600) == ["a", "b"]
            assert await astore.read(['a{k="v"}'], 60, T0 - 20, T0 + 40) == {'a{k="v"}': [3, 5]}
            assert await astore.delete("a") == each
            assert store.series("a", 5) == []
            with pytest.raises(ValueError, match="'bad name'"):
                await astore.incr("bad name")

    asyncio.run(scenario())


def test_async_store_translates_connection_errors() -> None:
    async def scenario() -> None:
        async with AsyncStore.from_url("redis://127.0.0.1:1/0", socket_timeout=0.5) as astore:
            assert not await astore.ping()
            with pytest.raises(StoreError):
                await astore.apply({"x": {T0: 1}})
            with pytest.raises(StoreError):
                await astore.series("x", 60)

    asyncio.run(scenario())


def test_async_bulk_write_survives_a_restart_and_reports_aborts(
    private_redis: EmbeddedRedis,
) -> None:
    async def scenario() -> None:
        async with AsyncStore.from_url(private_redis.url, socket_timeout=1.0) as astore:
            assert await astore.apply({"x": {T0: 1}}) == 0
            private_redis.stop()
            with pytest.raises(StoreError):
                await astore.apply({"x": {T0: 1}})
            private_redis.start()
            await astore.client.config_set("maxmemory", 1)
            with pytest.raises(StoreError, match="maxmemory"):
                await astore.apply({"x": {T0: 1}})
            await astore.client.config_set("maxmemory", 0)
            assert await astore.apply({"x": {T0: 5}}) == 0
            assert await astore.get("x", 1) == [(T0, 5)]

    asyncio.run(scenario())


@pytest.mark.slow
def test_a_redis_that_stops_answering_mid_batch_fails_the_read_in_its_socket_timeout(
    private_redis: EmbeddedRedis,
) -> None:
    """A batch's replies share one deadline (``AsyncStore._round_trip``): a Redis silent for
    ``socket_timeout`` fails the read with a StoreError, the half-read connection is not
    reused, and the store reads again once Redis is back."""
    ids = [f'x{{n="{i}"}}' for i in range(300)]

    async def scenario() -> None:
        async with AsyncStore.from_url(
            private_redis.url, layout="blocks", socket_timeout=0.5
        ) as astore:
            await astore.apply({s: {T0: 1} for s in ids})
            pid = private_redis.pid
            assert pid is not None
            os.kill(pid, signal.SIGSTOP)
            started = time.monotonic()
            try:
                with pytest.raises(StoreError):
                    await astore.read_stored(ids, 1, T0, T0 + 1)
                took = time.monotonic() - started
            finally:
                os.kill(pid, signal.SIGCONT)
            assert 0.4 < took < 5
            found = await astore.read_stored(ids, 1, T0, T0 + 1)
            assert {dict(stored.open)[T0] for stored in found.each().values()} == {1}

    asyncio.run(scenario())
