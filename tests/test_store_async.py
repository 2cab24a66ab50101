"""The asyncio twin gives the same answers as the sync store on the same data."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import pytest
from hiredis import pack_command
from redis._parsers import _AsyncHiredisParser, _AsyncRESP2Parser

from slicecount.config import Settings
from slicecount.embedded import EmbeddedRedis
from slicecount.errors import StoreError
from slicecount.operations.batches import Batch, Command, Operation, ScriptCall
from slicecount.store import Store, wire
from slicecount.store.asyncio import AsyncStore
from slicecount.store.replies import Refusal
from tests.faults import CuttingProxy

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


@pytest.mark.parametrize("parser", ["hiredis", "python"])
def test_a_batch_is_read_alike_by_the_hiredis_fast_path_and_redis_pys_parser(
    private_redis: EmbeddedRedis, parser: str
) -> None:
    """``AsyncStore._round_trip`` takes replies straight from the connection's hiredis reader
    (a client without hiredis reads them through redis-py): both give the same replies, over
    many socket reads, with a refused command in place in a bulk batch (or raised in another)
    and decoded or raw as the batch asks."""
    keys = [f"h{n}" for n in range(400)]

    def batch(raw: bool, bulk: bool) -> Operation[list[Any]]:
        commands: list[Command | ScriptCall] = [("HGETALL", k) for k in keys]
        commands[7:7] = [("INCR", "h1"), ("GET", "nothing"), ("HLEN", "h2")]
        replies: list[Any] = yield Batch(commands, raw=raw, bulk=bulk)
        return replies

    async def scenario() -> None:
        async with AsyncStore.from_url(private_redis.url, socket_timeout=2.0) as astore:
            pool = astore.client.connection_pool  # type: ignore[union-attr]
            if parser == "python":
                pool.connection_kwargs["parser_class"] = _AsyncRESP2Parser
            await astore.client.hset("h1", mapping={f"f{n}": "x" * 300 for n in range(300)})
            await astore.client.hset("h2", mapping={"a": "1", "b": "2"})
            for raw in (False, True):
                replies = await astore.run(batch(raw, bulk=True))
                assert len(replies) == len(keys) + 3
                assert isinstance(replies[7], Refusal) and "WRONGTYPE" in str(replies[7])
                assert replies[8:10] == [None, 2]
                whole = replies[:7] + replies[10:]
                big = whole[1]
                assert len(big) == 600 and all(isinstance(s, bytes if raw else str) for s in big)
                assert whole[2] == ([b"a", b"1", b"b", b"2"] if raw else ["a", "1", "b", "2"])
                assert all(r == [] for r in whole[:1] + whole[3:])
            with pytest.raises(StoreError, match="WRONGTYPE"):
                await astore.run(batch(False, bulk=False))
            assert await astore.client.hlen("h2") == 2  # the connection is still good
            parsers = {type(c._parser) for c in pool._available_connections}
            assert parsers == {_AsyncRESP2Parser if parser == "python" else _AsyncHiredisParser}

    asyncio.run(scenario())


def test_a_batch_packs_as_hiredis_packs_it_whether_its_reads_were_packed_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Open hashes' HGETALLs, sent again at every refresh, are packed once (``wire.pack``):
    the bytes are hiredis's, in a transaction too, and the packed ones stay bounded."""
    monkeypatch.setattr(wire, "_PACKED", {})
    monkeypatch.setattr(wire, "_MAX_PACKED", 3)
    commands: list[Command | ScriptCall] = [("HGETALL", f"k{n}") for n in range(5)]
    commands += [("GET", "x"), ScriptCall("block_generations", ("b",), ())]
    plain = [pack_command(wire._wire(c)) for c in commands]
    for _ in range(2):
        assert wire.pack(Batch(commands)) == b"".join(plain)
        whole = [pack_command(("MULTI",)), *plain, pack_command(("EXEC",))]
        assert wire.pack(Batch(commands, transaction=True)) == b"".join(whole)
        assert 0 < len(wire._PACKED) <= 3


@pytest.mark.parametrize("reset", [False, True], ids=["closed", "reset"])
def test_a_connection_cut_mid_batch_fails_the_read_with_a_store_error(
    private_redis: EmbeddedRedis, reset: bool
) -> None:
    """Redis's connection closed or reset (an RST) while a batch's replies arrive: a
    StoreError, as redis-py names it (a 503 from the datasource, never a 500), and the next
    read on a new connection."""

    def batch() -> Operation[list[Any]]:
        replies: list[Any] = yield Batch([("HGETALL", "h")] * 200, raw=True)
        return replies

    with CuttingProxy(private_redis.port) as proxy:

        async def scenario() -> None:
            async with AsyncStore.from_url(proxy.url, socket_timeout=5.0) as astore:
                await astore.client.hset("h", mapping={f"f{n}": "x" * 100 for n in range(1000)})
                proxy.cut_next_reply(skip=1, reset=reset)
                with pytest.raises(StoreError):
                    await astore.run(batch())
                assert proxy.cuts == 1
                assert await astore.client.hlen("h") == 1000

        asyncio.run(scenario())
