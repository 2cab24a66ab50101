"""Changing the shard count: ``reshard`` moves every counter of the old layout to the new one,
exactly once, on one server, a cluster and behind Sentinel, even when a run is cut short or a
writer of the old layout adds counts during the move."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from slicecount.cleaner.reshard import reshard
from slicecount.cli import main
from slicecount.config import Settings
from slicecount.operations.batches import Batch
from slicecount.operations.resharding import move_counter, old_layout
from slicecount.store import Store
from tests.sealing import seal

pytestmark = pytest.mark.topologies
T0 = 1_700_006_400
TRAFFIC = {
    f'jobs{{kind="{k}",n="{n}"}}': {T0 - s: n + s % 3 for s in range(0, 400, 7)}
    for k in ("a", "b")
    for n in range(12)
}
"""24 series: from 3 shards to 8, 21 move and 3 stay in place (both paths); from 1, all move."""


@pytest.fixture(params=[1, 3], ids=["from-1", "from-3"])
def stores(settings: Settings, topology: str, request: Any) -> Iterator[tuple[Store, Store]]:
    """The book's layout: a store of the old shard count, holding TRAFFIC and an annotation,
    and one of the new (the blocks layout's: ``block_stores``)."""
    if request.param == 1 and topology == "cluster":
        pytest.skip("a cluster refuses one shard (all keys on one master)")
    settings = settings.with_changes(layout="book")
    new = settings if settings.shards > 1 else settings.with_changes(shards=8)
    with Store(settings.with_changes(shards=request.param)) as old, Store(new) as store:
        assert old.apply(TRAFFIC) == 0
        old.annotate("v2 deployed", ["deploy"], when=T0 - 60)
        yield old, store


def totals(store: Store, precision: int) -> dict[str, int]:
    ids = store.series("jobs", precision)
    since = T0 - store.settings.retention_for(precision) * precision
    return {
        sid: sum(v or 0 for v in values)
        for sid, values in store.read(ids, precision, since, T0).items()
    }


def expected(precision: int, retention: int) -> dict[str, int]:
    since = (T0 - retention * precision) // precision * precision
    return {sid: sum(n for s, n in per.items() if s >= since) for sid, per in TRAFFIC.items()}


def assert_moved(old: Store, store: Store, extra: int = 0) -> None:
    for p in store.settings.precisions:
        want = expected(p, store.settings.retention_for(p))
        want['jobs{kind="a",n="0"}'] += extra
        assert totals(store, p) == want, p
        moved = [sid for sid in TRAFFIC if old.keys.counter(p, sid) != store.keys.counter(p, sid)]
        left = old.read(moved, p, T0 - 500, T0)  # the old layout's counters of those
        assert {n for values in left.values() for n in values} == {None}, p
    assert [a["text"] for a in store.annotations(T0 - 120, T0)] == ["v2 deployed"]


def test_every_counter_moves_once_and_a_rerun_moves_nothing(stores: tuple[Store, Store]) -> None:
    old, store = stores
    layout = old_layout(store.context, old.settings.shards)
    moving = [
        (p, sid)
        for p in store.settings.precisions
        for sid in TRAFFIC
        if layout.counter(p, sid) != store.keys.counter(p, sid)  # else it stays in place
    ]
    assert len(moving) > 0.5 * 7 * len(TRAFFIC)
    held = sum(
        len([n for n in old.read([sid], p, T0 - 500, T0)[sid] if n is not None])
        for p, sid in moving
    )
    report = reshard(store, old.settings.shards)
    annotations = int(layout.annotations() != store.keys.annotations())  # one key past 1 shard
    assert (report.counters, report.left, report.annotations) == (len(moving), 0, annotations)
    assert report.slices == held
    assert_moved(old, store)
    again = reshard(store, old.settings.shards)
    assert (again.counters, again.slices, again.annotations) == (0, 0, 0)
    assert_moved(old, store)


def cut_short(
    op: Generator[Batch, list[Any], Any], steps: int
) -> Generator[Batch, list[Any], None]:
    """The first ``steps`` round trips of an operation, then a crash (nothing more is sent)."""
    batch = next(op)
    for _ in range(steps - 1):
        batch = op.send((yield batch))
    yield batch


@pytest.mark.parametrize("steps", [1, 2])  # crashed after the claim; after the landing
def test_a_move_cut_short_is_finished_by_the_next_run_without_doubling(
    stores: tuple[Store, Store], steps: int
) -> None:
    old, store = stores
    layout = old_layout(store.context, old.settings.shards)
    member = store.keys.member(60, 'jobs{kind="a",n="0"}')
    shard = layout.shard('jobs{kind="a",n="0"}')
    store.run(cut_short(move_counter(store.context, layout, shard, member), steps))
    reshard(store, old.settings.shards)
    assert_moved(old, store)


def test_counts_written_to_the_old_layout_during_a_move_stay_for_the_next_run(
    stores: tuple[Store, Store],
) -> None:
    old, store = stores
    layout = old_layout(store.context, old.settings.shards)
    series = 'jobs{kind="a",n="0"}'
    member = store.keys.member(60, series)
    store.run(cut_short(move_counter(store.context, layout, layout.shard(series), member), 2))
    old.apply({series: {T0 - 1: 5}})  # a writer still on the old layout
    # the run finishing the cut-short move takes out only what it landed: the 5 stay behind
    assert reshard(store, old.settings.shards).left == 1
    again = reshard(store, old.settings.shards)
    assert (again.counters, again.slices, again.left) == (1, 1, 0)
    assert_moved(old, store, extra=5)


def test_the_command_line(stores: tuple[Store, Store]) -> None:
    old, store = stores
    settings = store.settings
    arguments = ["reshard", "--redis-url", settings.redis_url, "--shards", str(settings.shards)]
    done = CliRunner().invoke(main, [*arguments, "--from", str(old.settings.shards)])
    assert done.exit_code == 0, done.output
    assert f"annotations from {old.settings.shards} shards to {settings.shards}" in done.output
    assert_moved(*stores)
    refused = CliRunner().invoke(main, [*arguments, "--from", str(settings.shards)])
    assert refused.exit_code == 1 and "--from must be a shard count" in refused.output


@pytest.mark.slow
@pytest.mark.topologies("standalone")
def test_a_counter_of_many_slices_moves_whole(settings: Settings) -> None:
    wide = settings.with_changes(retention=20_000)  # 20 000 one-second slices in one hash
    with Store(wide.with_changes(shards=1)) as old, Store(wide.with_changes(shards=8)) as store:
        old.apply({"wide": {T0 - s: 1 for s in range(20_000)}})
        report = reshard(store, 1)
        assert report.left == 0
        assert sum(n or 0 for n in store.read(["wide"], 1, T0 - 20_000, T0)["wide"]) == 20_000


# -- the blocks layout: a series' open hash and block move together ------------------------

SEALED_BEFORE = T0 - 200
"""The blocks of the old layout hold TRAFFIC before this second; its open hashes the rest."""
NEW_TRAFFIC = {sid: {T0 - 450: 3, T0 - 2: 1} for sid in list(TRAFFIC)[:10]}
"""Counts written and sealed under the new layout before the move: the blocks merge."""


@pytest.fixture(params=[1, 3], ids=["from-1", "from-3"])
def block_stores(
    settings: Settings, topology: str, redis_client: redis.Redis, request: Any
) -> Iterator[tuple[Store, Store]]:
    """Blocks layout: a store of the old shard count holding TRAFFIC (partly sealed) and one
    of the new, already holding NEW_TRAFFIC (sealed)."""
    if request.param == 1 and topology == "cluster":
        pytest.skip("a cluster refuses one shard (all keys on one master)")
    new = settings if settings.shards > 1 else settings.with_changes(shards=8)
    new = new.with_changes(layout="blocks")
    with Store(new.with_changes(shards=request.param)) as old, Store(new) as store:
        assert old.apply(TRAFFIC) == 0
        for sid in TRAFFIC:
            seal(redis_client, old, sid, SEALED_BEFORE)
        assert store.apply(NEW_TRAFFIC) == 0
        for sid in NEW_TRAFFIC:
            seal(redis_client, store, sid, T0)
        yield old, store


def block_totals(store: Store, precision: int) -> dict[str, int]:
    ids = store.series("jobs", precision)
    read = store.read(ids, precision, T0 - 500, T0)
    return {sid: sum(v or 0 for v in values) for sid, values in read.items()}


def assert_blocks_moved(old: Store, store: Store, extra: int = 0) -> None:
    want = {sid: sum(per.values()) for sid, per in TRAFFIC.items()}
    for sid, per in NEW_TRAFFIC.items():
        want[sid] += sum(per.values())
    want['jobs{kind="a",n="0"}'] += extra
    moved = [sid for sid in TRAFFIC if old.keys.open(sid) != store.keys.open(sid)]
    for precision in store.settings.precisions:
        assert block_totals(store, precision) == want, precision
        left = old.read(moved, precision, T0 - 500, T0)
        assert {n for values in left.values() for n in values} == {None}, precision
    for sid in moved:  # gone from its old registry, unless that one is the new layout's too
        registry, member = old.keys.known_for(sid), old.keys.series_member(sid)
        listed = old.client.zscore(registry, member) is not None
        assert listed == (registry == store.keys.known_for(sid)), sid


def test_a_blocks_layout_series_moves_whole_once(block_stores: tuple[Store, Store]) -> None:
    old, store = block_stores
    moving = [sid for sid in TRAFFIC if old.keys.open(sid) != store.keys.open(sid)]
    assert len(moving) > 0.5 * len(TRAFFIC)
    report = reshard(store, old.settings.shards)
    assert (report.counters, report.left) == (len(moving), 0)
    assert_blocks_moved(old, store)
    again = reshard(store, old.settings.shards)
    assert (again.counters, again.slices) == (0, 0)
    assert_blocks_moved(old, store)


def test_the_command_line_moves_blocks(block_stores: tuple[Store, Store]) -> None:
    old, store = block_stores
    settings = store.settings
    arguments = ["reshard", "--redis-url", settings.redis_url, "--layout", "blocks"]
    arguments += ["--shards", str(settings.shards), "--from", str(old.settings.shards)]
    done = CliRunner().invoke(main, arguments)
    assert done.exit_code == 0, done.output
    assert_blocks_moved(old, store)


def moving_series(old: Store, store: Store) -> str:
    """A series of NEW_TRAFFIC whose keys differ between the layouts."""
    return next(s for s in NEW_TRAFFIC if old.keys.open(s) != store.keys.open(s))


@pytest.mark.parametrize("steps", [2, 4])  # crashed after the claim; after the landing
def test_a_blocks_move_cut_short_is_finished_by_the_next_run_without_doubling(
    block_stores: tuple[Store, Store], steps: int
) -> None:
    old, store = block_stores
    layout = old_layout(store.context, old.settings.shards)
    series = moving_series(old, store)
    member = store.keys.series_member(series)
    store.run(cut_short(move_counter(store.context, layout, layout.shard(series), member), steps))
    reshard(store, old.settings.shards)
    assert_blocks_moved(old, store)


def test_blocks_written_to_the_old_layout_during_a_move_stay_for_the_next_run(
    block_stores: tuple[Store, Store],
) -> None:
    old, store = block_stores
    layout = old_layout(store.context, old.settings.shards)
    series = 'jobs{kind="a",n="0"}'
    if old.keys.open(series) == store.keys.open(series):
        pytest.skip("this series keeps its keys in both layouts")
    member = store.keys.series_member(series)
    store.run(cut_short(move_counter(store.context, layout, layout.shard(series), member), 4))
    old.apply({series: {T0 - 1: 5}})  # a writer still on the old layout
    assert reshard(store, old.settings.shards).left == 1  # its open field stays behind
    again = reshard(store, old.settings.shards)
    assert (again.counters, again.slices, again.left) == (1, 1, 0)
    assert_blocks_moved(old, store, extra=5)


def test_a_compaction_crossing_the_landing_merges_again(
    block_stores: tuple[Store, Store], redis_client: redis.Redis
) -> None:
    old, store = block_stores
    layout = old_layout(store.context, old.settings.shards)
    series = moving_series(old, store)
    store.apply({series: {T0 - 3: 4}})  # open in the new layout, sealed during the move
    member = store.keys.series_member(series)
    move = move_counter(store.context, layout, layout.shard(series), member)
    batch, sent = next(move), 0
    while True:
        if sent == 3:  # the merge has read the new block: the cleaner rewrites it now
            assert seal(redis_client, store, series, T0) == {T0 - 3: 4}
        try:
            batch = move.send(store.run(_one(batch)))
        except StopIteration as done:
            assert done.value is not None and done.value.landed
            break
        sent += 1
    assert sent == 6  # GET, claim, GET, land refused, GET again, land, release
    reshard(store, old.settings.shards)
    NEW_TRAFFIC[series][T0 - 3] = 4
    try:
        assert_blocks_moved(old, store)
    finally:
        del NEW_TRAFFIC[series][T0 - 3]


def _one(batch: Batch) -> Generator[Batch, list[Any], list[Any]]:
    replies = yield batch
    return replies
