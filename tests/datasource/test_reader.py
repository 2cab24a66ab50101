"""The Reader on a real Redis: one /query discovers and reads for all its targets at once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

import pytest

from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.core.spans import Spans
from slicecount.datasource.simpod import endpoints
from slicecount.errors import LimitExceeded
from slicecount.reads.chunks import READS_IN_FLIGHT
from slicecount.reads.reader import Reader
from slicecount.reads.sharing import all_done
from slicecount.store import Store
from slicecount.store.asyncio import AsyncStore
from tests.datasource.conftest import HOUR, NOW, legacy_body, write_known_data

T = TypeVar("T")


class CountingStore(AsyncStore):
    """A real AsyncStore that records its discovery, read and annotation calls, and how many
    of them (and of reads alone) were under way at once."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, clock=lambda: NOW)
        self.calls: list[tuple[Any, ...]] = []
        self.in_flight: list[str] = []
        self.most_in_flight = 0
        self.most_reads_in_flight = 0
        self.read_delay = 0.0  # seconds each read holds on: overlaps that do not hang on timing

    async def _track(self, call: tuple[Any, ...], work: Awaitable[T]) -> T:
        self.calls.append(call)
        self.in_flight.append(call[0])
        self.most_in_flight = max(self.most_in_flight, len(self.in_flight))
        reads = self.in_flight.count("read")
        self.most_reads_in_flight = max(self.most_reads_in_flight, reads)
        try:
            return await work
        finally:
            self.in_flight.remove(call[0])

    async def series(self, name: str, precision: int) -> list[str]:
        return await self._track(("series", name, precision), super().series(name, precision))

    async def read(
        self, series_ids: Sequence[str], precision: int, start: float, end: float
    ) -> dict[str, list[int | None]]:
        async def held() -> dict[str, list[int | None]]:
            await asyncio.sleep(self.read_delay)
            return await AsyncStore.read(self, series_ids, precision, start, end)

        return await self._track(("read", precision, len(series_ids)), held())

    async def read_stored(  # the blocks layout's read: counted as a read
        self,
        series_ids: Sequence[str],
        precision: int,
        start: float,
        end: float,
        held: Mapping[str, int] | None = None,
    ) -> Spans:
        async def delayed() -> Spans:
            await asyncio.sleep(self.read_delay)
            return await AsyncStore.read_stored(self, series_ids, precision, start, end, held)

        return await self._track(("read", precision, len(series_ids)), delayed())

    async def annotations(
        self, start: float, end: float, tags: Sequence[str] = (), limit: int = 1000
    ) -> list[dict[str, Any]]:
        return await self._track(
            ("annotations", tuple(tags)), super().annotations(start, end, tags, limit)
        )

    def kinds(self) -> list[str]:
        return [call[0] for call in self.calls]


TARGETS: list[dict[str, Any]] = [
    {"target": "http.requests", "refId": "A"},
    {"target": 'sum(rate(http.requests{route="/a"}))', "refId": "B"},
    {"target": "deploy", "refId": "Anno"},
    {"target": "db.queries", "refId": "C", "payload": {"precision": "300"}},
    {"target": "histogram_quantile(0.5, http.request.duration)", "refId": "D"},
]


async def answer(
    settings: Settings, *bodies: dict[str, Any], ttl: float = 2.0
) -> tuple[list[list[dict[str, Any]]], CountingStore]:
    """Each body's /query answer from one Reader, and the store's record of calls."""
    store = CountingStore(settings)
    async with store:
        reader = Reader(store, Limits(), clock=lambda: NOW, ttl=ttl)
        return [json.loads((await endpoints.query(reader, body)).body) for body in bodies], store


@pytest.fixture
def data(settings: Settings, store: Store) -> Settings:
    write_known_data(store)
    return settings


def test_every_target_discovered_then_read_together_in_one_read_per_precision(
    data: Settings,
) -> None:
    ([frames], store) = asyncio.run(answer(data, legacy_body(TARGETS, NOW - HOUR, NOW)))
    assert store.calls == [
        ("series", "http.requests", 60),
        ("series", "db.queries", 300),
        ("series", "http.request.duration.bucket", 60),
        ("read", 60, 3 + 3),  # /a 200, /a 500, /b 200; three buckets
        ("read", 300, 1),
        ("annotations", ("deploy",)),
    ]
    assert store.most_in_flight == 3  # each round's calls all under way at once
    assert [f["refId"] for f in frames] == ["A", "A", "A", "B", "Anno", "C", "D"]
    assert frames[4]["rows"][0][2] == "deploy v1.2"


def test_answers_are_the_same_as_one_target_at_a_time(data: Settings) -> None:
    together = legacy_body(TARGETS, NOW - HOUR, NOW)
    alone = [legacy_body([t], NOW - HOUR, NOW) for t in TARGETS]
    ([combined, *separate], _) = asyncio.run(answer(data, together, *alone, ttl=0))
    assert combined == [frame for frames in separate for frame in frames]


def test_discovery_is_reused_within_its_ttl(data: Settings) -> None:
    body = legacy_body(TARGETS[:2], NOW - HOUR, NOW)
    (_, cached) = asyncio.run(answer(data, body, body))
    assert cached.kinds() == ["series", "read", "read"]
    (_, fresh) = asyncio.run(answer(data, body, body, ttl=0))
    assert fresh.kinds() == ["series", "read", "series", "read"]


def test_what_a_query_derives_from_discovery_follows_the_cache(
    data: Settings, store: Store
) -> None:
    """The names and the series a selector matches are remembered with the discovery answer
    they came from: a new series (of a known metric, of a new one) is answered as soon as
    discovery is asked again, and not before."""
    targets = [
        {"target": 'http.requests{route=~"/c|/d"}', "refId": "A"},
        {"target": "(jobs.done|http.requests)", "refId": "B"},
    ]
    body = legacy_body(targets, NOW - HOUR, NOW)

    async def before_and_after(ttl: float, route: str, queue: str) -> list[list[int]]:
        """How many lines each target has, before and after two new series are written."""
        async with AsyncStore(data, clock=lambda: NOW) as async_store:
            reader = Reader(async_store, Limits(), clock=lambda: NOW, ttl=ttl)
            answers = [json.loads((await endpoints.query(reader, body)).body)]
            store.apply(
                {
                    f'http.requests{{method="GET",route="{route}",status="200"}}': {NOW - 30: 4},
                    f'jobs.done{{queue="{queue}"}}': {NOW - 30: 2},
                }
            )
            answers.append(json.loads((await endpoints.query(reader, body)).body))
        return [[sum(f["refId"] == r for f in frames) for r in "AB"] for frames in answers]

    assert asyncio.run(before_and_after(3600, "/c", "mail")) == [[0, 3], [0, 3]]
    assert asyncio.run(before_and_after(0, "/d", "sms")) == [[1, 5], [2, 7]]


def test_the_series_limit_stops_the_query_before_any_read(data: Settings, store: Store) -> None:
    store.apply({f'many{{i="{i}"}}': {NOW - 10: 1} for i in range(6)})
    body = legacy_body(
        [{"target": "db.queries", "refId": "A"}, {"target": "many", "refId": "B"}], NOW - HOUR, NOW
    )

    async def scenario() -> CountingStore:
        counting = CountingStore(data)
        async with counting:
            reader = Reader(counting, Limits(max_series=5), clock=lambda: NOW)
            with pytest.raises(LimitExceeded, match="more than 5 series"):
                await endpoints.query(reader, body)
            return counting

    assert asyncio.run(scenario()).kinds() == ["series", "series"]


def test_a_failure_cancels_the_calls_still_under_way() -> None:
    finished: list[str] = []

    async def slow() -> None:
        await asyncio.sleep(5)
        finished.append("slow")

    async def failing() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("redis went away")

    async def scenario() -> asyncio.Future[None]:
        tasks = [asyncio.ensure_future(slow()), asyncio.ensure_future(failing())]
        with pytest.raises(RuntimeError, match="went away"):
            await all_done(tasks)
        return tasks[0]

    slow_task = asyncio.run(asyncio.wait_for(scenario(), 2))
    assert slow_task.cancelled() and finished == []


@pytest.mark.layouts("book")  # the book's charge: a point each (blocks: test_bad_input.py)
def test_over_the_work_budget_nothing_is_read(data: Settings) -> None:
    # A: 3 series, B: 2, D: 3 buckets, each of 61 points; C: 1 series of 13 five-minute points
    body = legacy_body(TARGETS, NOW - HOUR, NOW)

    async def scenario(budget: int) -> CountingStore:
        counting = CountingStore(data)
        async with counting:
            reader = Reader(counting, Limits(max_request_points=budget), clock=lambda: NOW)
            try:
                await endpoints.query(reader, body)
            except LimitExceeded as exc:
                assert "reads 501 points" in str(exc) and "max_request_points = 500" in str(exc)
            return counting

    assert asyncio.run(scenario(500)).kinds() == ["series"] * 3  # discovered, never read
    assert asyncio.run(scenario(501)).kinds() == ["series"] * 3 + ["read", "read", "annotations"]


def heavy_body(series: int, points: int, end: int = NOW) -> dict[str, Any]:
    target = {"target": "load", "refId": "A", "payload": {"precision": "1"}}
    return legacy_body([target], end - points + 1, end)


@pytest.fixture
def load(settings: Settings, store: Store) -> Settings:
    """50 series of 600 one-second slices: 30 000 points, read in chunks of 16 384 at most."""
    store.apply({f'load{{i="{i}"}}': {NOW - s: 1 for s in range(600)} for i in range(50)})
    return settings.with_changes(retention={1: 1000, 5: 120, 60: 120, 300: 120, 3600: 120,
                                            18000: 120, 86400: 120})  # fmt: skip


@pytest.mark.slow
@pytest.mark.layouts("book")  # its counts are the book's read chunks (READ_CHUNK_POINTS)
@pytest.mark.parametrize("turns", [1, 2])
def test_heavy_requests_take_turns(load: Settings, turns: int) -> None:
    """Two heavy requests at once: with one turn, the reads of one never overlap the other's
    (they end a second apart: the same read would be shared)."""
    limits = Limits(max_inline_points=10_000, heavy_requests=turns)
    bodies = [heavy_body(50, 600), heavy_body(50, 600, NOW - 1)]

    async def scenario() -> tuple[CountingStore, list[Any]]:
        counting = CountingStore(load)
        counting.read_delay = 0.3  # long enough for two turns to overlap on a busy machine
        async with counting:
            reader = Reader(counting, limits, clock=lambda: NOW)
            answers = await asyncio.gather(*(endpoints.query(reader, b) for b in bodies))
            return counting, [json.loads(a.body) for a in answers]

    store, (first, second) = asyncio.run(scenario())
    assert len(first) == len(second) == 50
    assert len(first[0]["datapoints"]) == len(second[0]["datapoints"]) == 600
    assert [sum(v for v, _ in f["datapoints"]) for f in first] == [600] * 50
    assert [sum(v for v, _ in f["datapoints"]) for f in second] == [599] * 50
    assert store.kinds().count("read") == 2 * 2  # 30 000 points: 2 chunks of 27 series at most
    assert store.most_reads_in_flight == READS_IN_FLIGHT * turns


@pytest.mark.slow
def test_light_requests_do_not_wait_behind_heavy_ones(load: Settings) -> None:
    limits = Limits(max_inline_points=10_000, heavy_requests=1)
    light = legacy_body([{"target": 'load{i="7"}', "refId": "A"}], NOW - HOUR, NOW)

    async def scenario() -> None:
        counting = CountingStore(load)
        async with counting:
            reader = Reader(counting, limits, clock=lambda: NOW)
            async with reader.heavy():  # every heavy turn taken
                heavy = asyncio.ensure_future(endpoints.query(reader, heavy_body(50, 600)))
                answer = await asyncio.wait_for(endpoints.query(reader, light), 10)
                assert len(json.loads(answer.body)) == 1
                await asyncio.sleep(0.05)
                assert not heavy.done()  # still waiting for its turn
                assert ("read", 60, 1) in counting.calls  # the light one, at 60 s slices
                assert not [c for c in counting.calls if c[:2] == ("read", 1)]
            assert len(json.loads((await heavy).body)) == 50

    asyncio.run(scenario())


def test_an_unchanged_discovery_answer_is_the_same_object(data: Settings, store: Store) -> None:
    """What a query derives from discovery (the names, the series a selector matches) is
    remembered with the very answer: asked again and unchanged, it is kept, not rebuilt."""

    async def scenario() -> tuple[bool, bool, int]:
        async with CountingStore(data) as counting:
            reader = Reader(counting, Limits(), clock=lambda: NOW, ttl=0)
            first = await reader.series_of("http.requests", 60)
            again = await reader.series_of("http.requests", 60)
            store.apply({'http.requests{method="GET",route="/c",status="200"}': {NOW - 5: 1}})
            changed = await reader.series_of("http.requests", 60)
            return again is first, changed is first, len(changed) - len(first)

    assert asyncio.run(scenario()) == (True, False, 1)


class HeldStore(CountingStore):
    """Its series listings wait for ``release``: loads under way that a test can cancel."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.release = asyncio.Event()

    async def series(self, name: str, precision: int) -> list[str]:
        await self.release.wait()
        return await super().series(name, precision)


def test_the_panels_of_a_refresh_share_one_discovery_load(data: Settings) -> None:
    """Grafana sends a refresh's panels at once: every one that finds the discovery cache
    expired waits for the one load under way instead of listing the registry itself; a load
    whose request went away leaves the others to load it again."""

    async def scenario() -> tuple[int, int, bool, int, int]:
        held = HeldStore(data)
        async with held:
            reader = Reader(held, Limits(), clock=lambda: NOW, ttl=60)
            panels = [
                asyncio.ensure_future(reader.series_of("http.requests", 60)) for _ in range(6)
            ]
            await asyncio.sleep(0.05)
            held.release.set()
            answers = await asyncio.gather(*panels)
            loads = held.kinds().count("series")
            held.release.clear()
            first = asyncio.ensure_future(reader.series_of("db.queries", 60))
            second = asyncio.ensure_future(reader.series_of("db.queries", 60))
            await asyncio.sleep(0.05)  # both wait: the first loads, the second waits for it
            first.cancel()
            await asyncio.sleep(0.05)
            held.release.set()
            found = await second
            again = held.kinds().count("series") - loads
            return loads, len({id(a) for a in answers}), first.cancelled(), len(found), again

    loads, distinct, cancelled, found, again = asyncio.run(scenario())
    assert (loads, distinct, cancelled, again) == (1, 1, True, 1)
    assert found > 0
