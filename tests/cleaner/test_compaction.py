"""The blocks layout's cleaner against a real Redis: sealed open fields move into blocks at
every precision exactly, the sealed point is honoured, late writes are counted once, retention
drops frames and empty series, racing cleaners double nothing, foreign data is left alone."""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import pytest
import redis

from slicecount.cleaner import Cleaner
from slicecount.cleaner.compaction import Compaction
from slicecount.config import Settings
from slicecount.core import blocks
from slicecount.core.frames import FRAME_SLICES
from slicecount.core.keys import KeySpace
from slicecount.core.slices import oldest_kept
from slicecount.operations import compacting
from slicecount.operations.batches import Batch, Operation
from slicecount.operations.compacting import SEAL_GRACE, WRITER_LIVE
from slicecount.operations.writing import WRITER_MEMORY
from slicecount.store import Store
from tests.cleaner.blocks_layout import (
    blocks_settings,
    expected,
    open_fields,
    open_write,
    racing_cleaner,
    stored,
    write_open,
)

NOW = 1_700_006_400  # a multiple of 86400
SERIES = ('http.requests{route="/a"}', 'http.requests{route="/b"}', "jobs")
T = TypeVar("T")


@pytest.fixture
def settings(redis_url: str) -> Settings:
    return blocks_settings(redis_url)


def keyspace(settings: Settings) -> KeySpace:
    return KeySpace(settings.prefix, settings.shards)


def in_retention(
    settings: Settings, now: int, slices: dict[int, dict[int, int]]
) -> dict[int, dict[int, int]]:
    """The slices a pass at ``now`` must keep: those inside each precision's retention."""
    return {
        p: {s: n for s, n in by.items() if s >= oldest_kept(p, settings.retention_for(p), now)}
        for p, by in slices.items()
    }


def traffic(seed: int, start: int, end: int) -> dict[int, int]:
    rng = random.Random(seed)
    return {t: rng.choice((0, 0, 1, 1, 2, 7)) for t in range(start, end)}


def figure_fields(client: redis.Redis, keys: KeySpace, before: int) -> tuple[int, list[str]]:
    """(open fields, series) of the cleaner's own figures (recorded as series by each pass,
    so the next pass compacts them too) holding a slice older than ``before``."""
    fields, series = 0, []
    for member in client.zrange(keys.known(), 0, -1):
        name = str(member)[2:]
        if name.startswith("slicecount.cleaner."):
            old = [f for f in client.hkeys(keys.open(name)) if int(f) < before]
            fields += len(old)
            series += [name] if old else []
    return fields, series


def pass_at(store: Store, now: int, writers_now: int | None = None) -> Compaction:
    """One pass of a cleaner at ``now``: what its compaction did."""
    cleaner = Cleaner(store, clock=lambda: now, writers_clock=lambda: writers_now or now)
    stats = cleaner.run_once()
    assert stats is not None and stats.compaction is not None and not stats.interrupted
    return stats.compaction


@pytest.mark.slow
@pytest.mark.topologies
def test_sealed_fields_move_into_blocks_exactly_at_every_precision(
    settings: Settings, store: Store, redis_client: redis.Redis
) -> None:
    written = {sid: traffic(n, NOW - 7200, NOW + 5) for n, sid in enumerate(SERIES)}
    for sid, counts in written.items():
        write_open(redis_client, settings, sid, counts)
    done = pass_at(store, NOW)
    sealed = NOW - SEAL_GRACE
    assert set(done.sealed.values()) == {sealed}
    assert done.compacted >= len(SERIES) and done.conflicts == 0 and not done.bad
    keys = keyspace(settings)
    for sid, counts in written.items():
        # nothing at or after the sealed point moved: those fields are as written
        still_open = {int(f): int(n) for f, n in redis_client.hgetall(keys.open(sid)).items()}
        assert still_open == {t: n for t, n in counts.items() if t >= sealed and n}, sid
        got = stored(store, sid)
        assert in_retention(settings, NOW, got) == in_retention(
            settings, NOW, expected(settings, counts)
        )
        # retention drops whole frames: nothing older than the frame of the oldest slice kept
        for p, slices in got.items():
            period = p * FRAME_SLICES
            floor = oldest_kept(p, settings.retention_for(p), NOW)
            assert min(slices) >= floor - floor % period
    assert done.moved == sum(1 for c in written.values() for t, n in c.items() if t < sealed and n)
    # 2 h of seconds move in several calls a series (MAX_FIELDS): each call wrote its block
    assert done.written > sum(redis_client.strlen(keys.block(sid)) for sid in SERIES)


def test_a_late_write_after_sealing_is_counted_at_once_then_moved_once(
    settings: Settings, store: Store, redis_client: redis.Redis
) -> None:
    counts = traffic(3, NOW - 540, NOW)  # inside the 1 s retention at NOW + 60
    write_open(redis_client, settings, "jobs", counts)
    pass_at(store, NOW)
    # an outage ends: a writer's replayed chunk lands in a slice sealed long ago
    late = {NOW - 500: 5, NOW - 499: 1}
    write_open(redis_client, settings, "jobs", late)
    for t, n in late.items():
        counts[t] += n
    assert stored(store, "jobs") == expected(settings, counts)
    keys = keyspace(settings)
    assert redis_client.hget(keys.open("jobs"), str(NOW - 500)) == "5"
    figures, figure_series = figure_fields(redis_client, keys, NOW + 60 - SEAL_GRACE)
    second = pass_at(store, NOW + 60)
    assert second.moved == figures + 2 + sum(
        1 for t, n in counts.items() if NOW - SEAL_GRACE <= t < NOW + 50 and n
    )
    rewritten = ["jobs", *figure_series]
    assert second.written == sum(redis_client.strlen(keys.block(s)) for s in rewritten)
    assert redis_client.hget(keys.open("jobs"), str(NOW - 500)) is None
    assert stored(store, "jobs") == expected(settings, counts)
    figures, figure_series = figure_fields(redis_client, keys, NOW + 120 - SEAL_GRACE)
    third = pass_at(store, NOW + 120)  # nothing of jobs left to move: nothing doubled
    assert third.moved == figures and third.compacted == len(figure_series)
    assert stored(store, "jobs") == expected(settings, counts)


def test_a_live_writers_mark_holds_sealing_back_and_a_quiet_one_does_not(
    settings: Settings, store: Store, redis_client: redis.Redis
) -> None:
    counts = traffic(4, NOW - 300, NOW)
    write_open(redis_client, settings, "jobs", counts)
    keys = keyspace(settings)
    # writer "w" wrote a second ago, and its outbox still holds a chunk of NOW - 100
    redis_client.zadd(keys.writers(), {"w": NOW - 1})
    redis_client.zadd(keys.marks(), {"w": NOW - 100})
    done = pass_at(store, NOW)
    assert done.sealed == {0: NOW - 100}
    still_open = {int(f) for f in redis_client.hkeys(keys.open("jobs"))}
    assert still_open == {t for t, n in counts.items() if t >= NOW - 100 and n}
    # quiet for longer than WRITER_LIVE: it holds nothing back any more
    later = NOW + 60 + 2  # the next pass (a lease per minute): quiet for 63 s
    assert later - (NOW - 1) > WRITER_LIVE
    assert pass_at(store, later).sealed == {0: later - SEAL_GRACE}
    assert stored(store, "jobs") == expected(settings, counts)
    assert redis_client.hlen(keys.open("jobs")) == 0
    # quiet for a week: forgotten, and its mark with it
    assert redis_client.zscore(keys.marks(), "w") == NOW - 100
    Cleaner(store, clock=lambda: NOW + WRITER_MEMORY + 1).run_once()
    assert redis_client.zscore(keys.writers(), "w") is None
    assert redis_client.zscore(keys.marks(), "w") is None


def test_retention_drops_old_frames_and_a_series_left_with_nothing_goes(
    settings: Settings, store: Store, redis_client: redis.Redis
) -> None:
    keys = keyspace(settings)
    longest = max(p * settings.retention_for(p) for p in settings.precisions)
    # past every precision's retention at NOW, frames (up to 30 days of hours) and all
    then = NOW - longest - 2 * max(settings.precisions) * FRAME_SLICES
    write_open(redis_client, settings, "aged", {then - 5: 2})
    write_open(redis_client, settings, "mixed", {then - 5: 2, NOW - 3600: 4})
    pass_at(store, then + 60)  # "aged" and "mixed" sealed into blocks back then
    assert redis_client.exists(keys.block("aged"))
    write_open(redis_client, settings, "gone", {then - 5: 3})  # expires while still open
    write_open(redis_client, settings, "mixed", {NOW - 30: 1})
    # the figures the pass at then + 60 recorded expire as they stand, like gone's
    figures, figure_series = figure_fields(redis_client, keys, NOW - longest)
    done = pass_at(store, NOW)
    assert done.expired == 1 + figures  # gone's open field, past every precision's retention
    assert done.removed == 2 + len(figure_series)
    members = redis_client.zrange(keys.known(), 0, -1)
    # (beside the cleaner's own figures, recorded as series too)
    assert {m for m in members if "slicecount.cleaner." not in m} == {"0:mixed"}
    for sid in ("gone", "aged"):
        assert not redis_client.exists(keys.open(sid), keys.block(sid)), sid
    kept = expected(settings, {NOW - 3600: 4, NOW - 30: 1})
    assert stored(store, "mixed") == {
        p: {s: n for s, n in by.items() if p > 1 or s >= NOW - 600} for p, by in kept.items()
    }  # of "then", nothing: 1 s slices an hour old are past their 10 minutes too


@pytest.mark.parametrize("prefix", [compacting.PREFIX_BYTES, 64])
def test_the_frame_at_the_retention_edge_is_cut_there_when_its_block_is_rewritten(
    settings: Settings,
    store: Store,
    redis_client: redis.Redis,
    prefix: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Retention ends inside a section's oldest frame: a pass rewriting the block anyway keeps
    none of that frame's slices before the edge but a margin (the 1 s section kept up to a
    frame, 12 minutes, of expired slices for 10 minutes of retention), whether the pass adds to that
    frame or not, and whether the block's first read held that frame or not (``prefix``);
    the coarser precisions keep every count."""
    monkeypatch.setattr(compacting, "PREFIX_BYTES", prefix)
    counts = traffic(8, NOW - 1500, NOW - SEAL_GRACE)
    write_open(redis_client, settings, "jobs", counts)
    for now in (NOW, NOW + 300, NOW + 600):
        pass_at(store, now)  # at NOW + 300 the edge frame [NOW - 720, NOW) gets nothing new
        edge = oldest_kept(1, settings.retention_for(1), now)
        got, truth = stored(store, "jobs"), expected(settings, counts)
        margin = {s: n for s, n in truth[1].items() if edge - compacting.EDGE_MARGIN <= s}
        assert got[1] == margin, now  # nothing past the edge but the margin
        assert {p: got[p] for p in got if p > 1} == {p: truth[p] for p in truth if p > 1}
        late = {now + 5: 1, now + 200: 2}  # what the next pass seals, in the next frame
        write_open(redis_client, settings, "jobs", late)
        counts.update(late)


def test_an_edge_frame_that_does_not_decode_is_kept_and_the_counts_are_sealed(
    settings: Settings, store: Store, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Foreign bytes in the frame at the retention edge, past the block's first read: the
    frame is kept as it is, and the pass seals the series' new counts all the same."""
    monkeypatch.setattr(compacting, "PREFIX_BYTES", 64)
    keys = keyspace(settings)
    write_open(redis_client, settings, "jobs", traffic(9, NOW - 1500, NOW - SEAL_GRACE))
    pass_at(store, NOW)
    raw = redis.Redis.from_url(settings.redis_url)  # (bytes, not text)
    block = raw.get(keys.block("jobs"))
    assert isinstance(block, bytes)
    header = blocks.parse_header(block)
    section = header.section(1)
    assert section is not None
    _, _, offset, length = header.frames(1, section.first, section.first + 1)
    raw.setrange(keys.block("jobs"), offset, b"\x07" * length)  # no such width
    write_open(redis_client, settings, "jobs", {NOW + 5: 3, NOW + 200: 4})
    done = pass_at(store, NOW + 300)
    assert done.conflicts == 0 and not done.bad
    assert redis_client.hlen(keys.open("jobs")) == 0  # sealed
    (read,) = store.read(["jobs"], 5, NOW, NOW + 200).values()  # (the 5 s frames only)
    assert {NOW + 5 * k: n for k, n in enumerate(read) if n} == {NOW + 5: 3, NOW + 200: 4}


def interleave_once(operation: Operation[T], between: Callable[[], object]) -> Operation[T]:
    """``operation`` with ``between()`` run once, after its first round trip."""
    batch: Batch = next(operation)
    replies = yield batch
    between()
    while True:
        try:
            batch = operation.send(replies)
        except StopIteration as done:
            result: T = done.value
            return result
        replies = yield batch


def test_a_plan_made_on_a_block_another_cleaner_rewrote_is_skipped_not_applied_twice(
    settings: Settings, store: Store, redis_client: redis.Redis
) -> None:
    counts = traffic(5, NOW - 540, NOW - 100)
    write_open(redis_client, settings, "jobs", counts)
    keys = keyspace(settings)
    member = keys.series_member("jobs")
    with Store(settings) as other:
        ctx = store.context
        pass_at(store, NOW - 300)  # a block exists: its generation is the compare-and-set
        racing = compacting.compact(ctx, 0, [member], NOW - SEAL_GRACE, NOW)
        done = store.run(interleave_once(racing, lambda: pass_at(other, NOW)))
    assert done.conflicts == 1 and done.compacted == 0 and done.moved == 0
    assert stored(store, "jobs") == expected(settings, counts)
    assert redis_client.hlen(keys.open("jobs")) == 0


@pytest.mark.slow
@pytest.mark.topologies
def test_three_cleaners_racing_writers_lose_and_double_nothing(
    settings: Settings, store: Store
) -> None:
    rng = random.Random(7)
    written: dict[str, dict[int, int]] = {sid: {} for sid in SERIES}
    clock = [NOW]
    stop = threading.Event()

    def write() -> None:
        with Store(settings) as own:
            for step in range(1000):  # 200 s of a clock that the cleaners follow
                now = clock[0]
                for sid in SERIES:
                    # mostly the current second, sometimes a late one long sealed
                    t = now - rng.choice((0, 0, 0, 1, 2, 40, 300))
                    n = rng.randint(1, 5)
                    own.run(open_write(own, sid, {t: n}))
                    written[sid][t] = written[sid].get(t, 0) + n
                clock[0] = NOW + step // 5
        stop.set()

    passes: list[Compaction] = []
    clean = functools.partial(racing_cleaner, settings, clock, stop, passes)

    threads = [threading.Thread(target=write)] + [threading.Thread(target=clean) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    pass_at(store, clock[0] + 60)
    for sid in SERIES:
        got, wanted = stored(store, sid), expected(settings, written[sid])
        for p in settings.precisions:
            diff = {s: (got[p].get(s), wanted[p].get(s)) for s in got[p].keys() | wanted[p].keys()}
            assert {s: d for s, d in diff.items() if d[0] != d[1]} == {}, (sid, p)
        assert open_fields(store, sid) == 0
    skipped = sum(p.conflicts for p in passes)
    print(f"{len(passes)} compactions, {skipped} splices skipped on a conflict")


def test_foreign_data_is_left_alone_and_the_other_series_are_compacted(
    settings: Settings, store: Store, redis_client: redis.Redis
) -> None:
    keys = keyspace(settings)
    counts = traffic(6, NOW - 120, NOW - 60)
    for sid in ("a", "b", "c"):
        write_open(redis_client, settings, sid, counts)
    redis_client.set(keys.block("a"), "not a block at all")
    redis_client.hset(keys.open("b"), "not-a-second", "x")
    redis_client.zadd(keys.known(), {"0:d": 0, "garbage": 0})
    redis_client.set(keys.open("d"), "a string")
    done = pass_at(store, NOW)
    assert redis_client.get(keys.block("a")) == "not a block at all"
    assert redis_client.hlen(keys.open("a")) == len([n for n in counts.values() if n])
    assert redis_client.hget(keys.open("b"), "not-a-second") == "x"
    assert redis_client.get(keys.open("d")) == "a string"
    for sid in ("b", "c"):  # b's foreign field stays, its counts moved like c's
        assert stored(store, sid) == expected(settings, counts)
        assert not redis_client.hexists(keys.open(sid), str(NOW - 100))
    assert len(done.bad) >= 3, done.bad


def test_the_daemon_compacts_pass_after_pass_until_stopped(
    settings: Settings, store: Store, redis_client: redis.Redis
) -> None:
    now = int(time.time())
    counts = traffic(8, now - 500, now - 20)
    write_open(redis_client, settings, "jobs", counts)
    keys = keyspace(settings)
    cleaner = Cleaner(store, interval=0.2)
    worker = threading.Thread(target=cleaner.run)
    worker.start()
    deadline = time.monotonic() + 10
    while redis_client.hlen(keys.open("jobs")) and time.monotonic() < deadline:
        time.sleep(0.05)
    cleaner.stop()
    worker.join()
    assert redis_client.hlen(keys.open("jobs")) == 0
    assert stored(store, "jobs") == expected(settings, counts)
