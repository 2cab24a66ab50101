"""The sealed frames a datasource holds between refreshes (``reads/sealed.py``), on a real
Redis: a refresh reads from Redis only the frames of the blocks that changed, and its counts
are exact whatever changed in between (a late write after sealing, a cleaner's pass, three
cleaners racing, a block trimmed away and written again); the frames held stay within their
bound."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Mapping, Sequence

import pytest

from slicecount.cleaner.compaction import Compaction, Compactor
from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.reads.chunks import SliceRange, Slices
from slicecount.reads.reader import Reader
from slicecount.store import Store
from slicecount.store.asyncio import AsyncStore
from tests.cleaner.blocks_layout import (
    blocks_settings,
    open_write,
    racing_cleaner,
    stored,
    write_open,
)

pytestmark = pytest.mark.layouts("blocks")

NOW = 1_700_006_400 + 1800  # half past: the last hour and the window moved are the same frames
SERIES = [f'http.requests{{route="/r{i}"}}' for i in range(40)]
PRECISION = 5
FIRST, LAST = NOW - 3600, NOW - PRECISION  # the last hour's slices, as a panel reads them


@pytest.fixture
def settings(redis_url: str) -> Settings:
    return blocks_settings(redis_url)


def history(store: Store, settings: Settings, seed: int) -> dict[str, dict[int, int]]:
    """Two hours of counts of every series, sealed into blocks by a cleaner's pass."""
    rng = random.Random(seed)
    written = {
        sid: {t: rng.randint(1, 3) for t in range(NOW - 7200, NOW - 60, rng.randint(3, 9))}
        for sid in SERIES
    }
    for sid, counts in written.items():
        store.run(open_write(store, sid, counts))
    Compactor(store).run(NOW)
    return written


def truth(store: Store, first: int, last: int, ids: Sequence[str] = SERIES) -> dict[str, list[int]]:
    """What a reader must find: each series' block plus its open hash, read in Python."""
    out = {}
    for sid in ids:
        found = stored(store, sid)[PRECISION]
        out[sid] = [found.get(s, 0) for s in range(first, last + 1, PRECISION)]
    return out


async def refresh(
    reader: Reader, first: int, last: int, ids: Sequence[str] = SERIES
) -> dict[str, list[int]]:
    read = await reader.read_slices(ids, SliceRange(PRECISION, first, last, PRECISION))
    assert isinstance(read, Slices)
    return {sid: read.counts[read.row[sid]].tolist() for sid in ids}


async def exact(
    reader: Reader, store: Store, first: int, last: int, ids: Sequence[str] = SERIES
) -> dict[str, list[int]]:
    """A refresh, checked against what the store holds (block plus open hash, in Python)."""
    got = await refresh(reader, first, last, ids)
    assert got == truth(store, first, last, ids), (first, last)
    return got


def add(written: dict[str, dict[int, int]], sid: str, counts: Mapping[int, int]) -> None:
    for t, n in counts.items():
        written[sid][t] = written[sid].get(t, 0) + n


def slices_of(counts: Mapping[int, int], first: int, last: int) -> list[int]:
    """The slices at ``PRECISION`` from ``first`` to ``last`` of what was written."""
    out = [0] * ((last - first) // PRECISION + 1)
    for second, n in counts.items():
        if first <= second < last + PRECISION:
            out[(second - first) // PRECISION] += n
    return out


@pytest.mark.slow
@pytest.mark.topologies  # and on a Redis Cluster and through a Sentinel
def test_a_refresh_reads_only_the_blocks_that_changed(settings: Settings, store: Store) -> None:
    history(store, settings, 1)

    async def dashboard() -> None:
        async with AsyncStore(settings) as own:
            reader = Reader(own, Limits(), clock=lambda: NOW)
            sealed = reader.sealed
            await exact(reader, store, FIRST, LAST)
            assert (sealed.fetched, sealed.reused) == (40, 0)
            await exact(reader, store, FIRST, LAST)
            assert (sealed.fetched, sealed.reused) == (40, 40)
            moved = FIRST + 10, LAST + 10  # the window a 10 s refresh interval moves
            await exact(reader, store, *moved)
            assert (sealed.fetched, sealed.reused) == (40, 80)
            for sid in SERIES[:5]:  # new counts: in the open hashes, the blocks unchanged
                store.run(open_write(store, sid, {NOW - 30: 7, NOW - 20: 1}))
            got = await refresh(reader, *moved)
            assert got == truth(store, *moved) and got[SERIES[0]][(NOW - 30 - moved[0]) // 5] >= 7
            assert (sealed.fetched, sealed.reused) == (40, 120)
            Compactor(store).run(NOW + 60)  # those five blocks are rewritten
            await exact(reader, store, *moved)
            assert (sealed.fetched, sealed.reused) == (45, 155)

    asyncio.run(dashboard())


def test_a_window_moved_by_the_refresh_interval_is_cut_from_frames_decoded_once(
    settings: Settings, store: Store
) -> None:
    """A read whose frames are all held cuts its slices from a wider window decoded by an
    earlier read (``SealedFrames.window``), the open slices added anew: exact after new open
    counts and after a pass, counted within the bound, and not kept past a quarter of it."""
    history(store, settings, 6)

    async def dashboard() -> None:
        async with AsyncStore(settings) as own:
            reader = Reader(own, Limits(), clock=lambda: NOW)
            sealed = reader.sealed
            await exact(reader, store, FIRST, LAST)
            frames_only = sealed.size
            await exact(reader, store, FIRST, LAST)
            assert sealed.cut == 0 and sealed.size > frames_only  # decoded, and kept
            for shift in (10, 20, 30):  # a dashboard refreshed every 10 s
                moved = FIRST + shift, LAST + shift
                await exact(reader, store, *moved)
            assert sealed.cut == 3
            store.run(open_write(store, SERIES[7], {NOW - 30: 7, NOW - 3000: 2}))
            await exact(reader, store, *moved)
            assert sealed.cut == 4  # the same frames: only the open slices differ
            Compactor(store).run(NOW + 60)  # that block rewritten: the chunk decoded anew
            await exact(reader, store, *moved)
            assert sealed.cut == 4 and sealed.size <= sealed.max_bytes
            small = Reader(own, Limits(sealed_frame_bytes=4 * frames_only), clock=lambda: NOW)
            for _ in range(3):  # the window (720 slices a series) is past a quarter of it
                await exact(small, store, FIRST, LAST)
            assert small.sealed.cut == 0 and small.sealed.size < 2 * frames_only  # frames only

    asyncio.run(dashboard())


@pytest.mark.slow
def test_a_late_write_after_sealing_is_read_at_once_and_after_its_pass(
    settings: Settings, store: Store
) -> None:
    written = history(store, settings, 2)
    late = {NOW - 3000: 1000}  # a slice sealed long ago

    async def dashboard() -> None:
        async with AsyncStore(settings) as own:
            reader = Reader(own, Limits(), clock=lambda: NOW)
            before = await refresh(reader, FIRST, LAST)
            store.run(open_write(store, SERIES[3], late))
            add(written, SERIES[3], late)
            after = await refresh(reader, FIRST, LAST)  # frames held, the open hash read
            assert reader.sealed.reused == 40
            assert after[SERIES[3]] == slices_of(written[SERIES[3]], FIRST, LAST)
            column = (NOW - 3000 - FIRST) // PRECISION
            assert after[SERIES[3]][column] == before[SERIES[3]][column] + 1000
            Compactor(store).run(NOW + 60)  # the late count moves into its block
            assert await refresh(reader, FIRST, LAST) == after
            assert reader.sealed.fetched == 41  # that block's frames read again, once

    asyncio.run(dashboard())


def test_a_block_deleted_and_written_again_is_never_read_from_old_frames(
    settings: Settings, store: Store
) -> None:
    """The same writes before and after the metric is deleted: the same passes write each
    block. Before new blocks started at a random generation, the new one had the old one's,
    and a reader holding the old frames served them."""
    every_minute = range(FIRST, LAST, 60)

    async def dashboard() -> None:
        async with AsyncStore(settings) as own:
            reader = Reader(own, Limits(), clock=lambda: NOW)
            for n in (1, 5):
                for sid in SERIES:
                    write_open(store.client, settings, sid, dict.fromkeys(every_minute, n))
                Compactor(store).run(NOW)
                got = await refresh(reader, FIRST, LAST)
                assert got == truth(store, FIRST, LAST)
                assert {max(c) for c in got.values()} == {n}
                assert store.delete("http.requests") == len(SERIES)
            assert reader.sealed.fetched == 2 * len(SERIES)

    asyncio.run(dashboard())


@pytest.mark.slow
def test_the_frames_held_stay_within_their_bound(settings: Settings, store: Store) -> None:
    """Four panels of ten series each, with room for about two of their reads: the least
    recently used goes, and is read again whole."""
    history(store, settings, 4)
    panels = [SERIES[i : i + 10] for i in range(0, 40, 10)]

    async def dashboard() -> None:
        async with AsyncStore(settings) as own:
            probe = Reader(own, Limits(), clock=lambda: NOW)
            await refresh(probe, FIRST, LAST, panels[0])
            bound = int(probe.sealed.size * 2.5)
            reader = Reader(own, Limits(sealed_frame_bytes=bound), clock=lambda: NOW)
            sealed = reader.sealed
            for panel in panels:
                assert await refresh(reader, FIRST, LAST, panel) == truth(store, FIRST, LAST, panel)
                assert 0 < sealed.size <= bound
            assert len(sealed) == 20 and (sealed.fetched, sealed.reused) == (40, 0)
            await refresh(reader, FIRST, LAST, panels[3])  # held
            await refresh(reader, FIRST, LAST, panels[0])  # gone: read again
            assert (sealed.fetched, sealed.reused) == (50, 10) and sealed.size <= bound

    asyncio.run(dashboard())


@pytest.mark.slow
def test_three_cleaners_racing_while_a_dashboard_refreshes_lose_and_double_nothing(
    settings: Settings, store: Store
) -> None:
    written = history(store, settings, 5)
    rng = random.Random(5)
    clock = [NOW]
    stop = threading.Event()
    passes: list[Compaction] = []

    async def dashboard() -> None:
        async with AsyncStore(settings) as own:
            reader = Reader(own, Limits(), clock=lambda: clock[0])
            for _ in range(40):  # a round: writes, then refreshes while the cleaners move them
                clock[0] += 5
                for sid in rng.sample(SERIES, 10):
                    counts = {clock[0] - rng.choice((0, 1, 15, 40, 900)): rng.randint(1, 4)}
                    store.run(open_write(store, sid, counts))
                    add(written, sid, counts)
                first, last = clock[0] - 1800, clock[0] - PRECISION
                want = {sid: slices_of(written[sid], first, last) for sid in SERIES}
                for _ in range(3):
                    assert await refresh(reader, first, last) == want
            assert reader.sealed.reused > 0 and reader.sealed.fetched > len(SERIES)

    cleaners = [
        threading.Thread(target=racing_cleaner, args=(settings, clock, stop, passes))
        for _ in range(3)
    ]
    for thread in cleaners:
        thread.start()
    try:
        asyncio.run(dashboard())
    finally:
        stop.set()
        for thread in cleaners:
            thread.join()
    assert sum(p.compacted for p in passes) > 0  # they moved counts while the dashboard read
