"""Requests of one refresh share their reads, and never an answer older than their arrival
(heavy requests taking turns: test_reader)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.datasource.simpod import endpoints
from slicecount.reads.reader import Reader
from slicecount.reads.sharing import SharedReads
from slicecount.store import Store
from tests.datasource import test_reader
from tests.datasource.conftest import NOW, legacy_body
from tests.datasource.test_reader import CountingStore

load = test_reader.load  # the fixture: 50 series of 600 one-second slices
LIMITS = Limits(max_inline_points=10_000, heavy_requests=1)


def panel(target: str, ref: str = "A") -> dict[str, Any]:
    """A target over the last 600 s at 1 s slices: 50 series x 600 points, a heavy read."""
    return legacy_body([{"target": target, "refId": ref, "payload": {"precision": "1"}}],
                       NOW - 599, NOW)  # fmt: skip


def totals(frames: list[dict[str, Any]]) -> list[float]:
    return [sum(v for v, _ in frame["datapoints"]) for frame in frames]


@pytest.mark.layouts("book")  # its counts are the book's read chunks (READ_CHUNK_POINTS)
def test_panels_of_one_refresh_read_the_same_slices_once(load: Settings) -> None:
    bodies = [panel("load"), panel("sum(load)"), panel("max(load)"), panel('load{i="3"}')]

    async def scenario() -> tuple[CountingStore, list[Any]]:
        counting = CountingStore(load)
        counting.read_delay = 0.1
        async with counting:
            reader = Reader(counting, LIMITS, clock=lambda: NOW)
            answers = await asyncio.gather(*(endpoints.query(reader, b) for b in bodies))
            return counting, [json.loads(a.body) for a in answers]

    store, (every, summed, most, one) = asyncio.run(scenario())
    assert totals(every) == [600] * 50 and totals(summed) == [50 * 600]
    assert totals(most) == [600] and totals(one) == [600]
    reads = [c for c in store.calls if c[0] == "read"]
    assert sorted(reads) == [("read", 1, 1), ("read", 1, 23), ("read", 1, 27)]  # each once


@pytest.mark.layouts("book")  # its counts are the book's read chunks (READ_CHUNK_POINTS)
def test_a_request_never_reads_before_it_arrived(load: Settings, store: Store) -> None:
    """A count written between two requests is in the second one's answer: a read that
    started before a request arrived is not shared with it."""

    async def scenario() -> tuple[CountingStore, list[float], list[float]]:
        counting = CountingStore(load)
        async with counting:
            reader = Reader(counting, LIMITS, clock=lambda: NOW)
            before = json.loads((await endpoints.query(reader, panel("sum(load)"))).body)
            store.apply({'load{i="7"}': {NOW - 5: 10}})
            after = json.loads((await endpoints.query(reader, panel("sum(load)"))).body)
            return counting, totals(before), totals(after)

    counting, before, after = asyncio.run(scenario())
    assert before == [30_000] and after == [30_010]
    assert counting.kinds().count("read") == 2 * 2


@pytest.mark.slow
@pytest.mark.layouts("book")  # its counts are the book's read chunks (READ_CHUNK_POINTS)
def test_a_shared_read_cancelled_with_its_request_is_read_again(load: Settings) -> None:
    async def scenario() -> tuple[CountingStore, list[Any]]:
        counting = CountingStore(load)
        counting.read_delay = 0.3
        async with counting:
            reader = Reader(counting, LIMITS, clock=lambda: NOW)
            async with reader.heavy():  # both wait for the one turn, in arrival order
                first = asyncio.ensure_future(endpoints.query(reader, panel("load")))
                await asyncio.sleep(0.1)
                second = asyncio.ensure_future(endpoints.query(reader, panel("sum(load)")))
                await asyncio.sleep(0.1)
            while "read" not in counting.kinds():
                await asyncio.sleep(0.01)
            first.cancel()  # its client went away while its read was under way
            answer = json.loads((await second).body)
            assert first.cancelled()
            return counting, answer

    counting, answer = asyncio.run(scenario())
    assert totals(answer) == [30_000]
    assert counting.kinds().count("read") == 2 * 2  # the cancelled read, then its own


def test_a_read_is_kept_only_while_a_request_that_arrived_before_it_is_under_way() -> None:
    async def scenario() -> list[int]:
        reads = SharedReads[list[int]](max_points=1000)
        loads: list[int] = []

        async def load() -> list[int]:
            loads.append(len(loads))
            return loads[-1:]

        with reads.request() as first:
            with reads.request() as second:  # both arrived before the read started
                read = await reads.read("key", 1, first, load)
                assert await reads.read("key", 1, second, load) is read
                assert reads.results(read) == {}
            with reads.request() as third:  # arrived after it started: reads anew
                again = await reads.read("key", 1, third, load)
                assert again is not read and reads.results(read) is None
            assert reads.results(again) == {}  # the first request is still under way
        assert reads.results(again) is None  # every request answered: nothing kept
        return loads

    assert asyncio.run(scenario()) == [0, 1]
