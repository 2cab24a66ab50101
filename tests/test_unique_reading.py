"""Reading unique series (unique_reading.py) on real Redis, every topology: the count rule,
exact lists, the registries, unions across slices, series and shards, the retention window."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from slicecount.config import DEFAULT_PRECISIONS, Settings
from slicecount.errors import ConfigurationError
from slicecount.operations.batches import Batch, Operation
from slicecount.operations.unique_reading import CARRY_AS_THEY_ARE, SliceMembers, count_unions
from slicecount.store import Store
from slicecount.store.asyncio import AsyncStore
from tests.unique_data import current, expiry, write_slice

pytestmark = pytest.mark.topologies

NOW = current(60) + 30  # 30 s into the current minute: keys written for it live on
M = NOW // 60 * 60  # the current 60 s slice


@pytest.fixture
def small_cap(redis_url: str, layout: str) -> Settings:
    """The book's ladder (unique counts at 60 s, 300 s...), in the test's layout."""
    return Settings(
        redis_url=redis_url, layout=layout, precisions=DEFAULT_PRECISIONS, unique_exact_cap=10
    )


@pytest.fixture
def frozen(small_cap: Settings) -> Iterator[Store]:
    with Store(small_cap, clock=lambda: NOW) as store:
        yield store


def values(prefix: str, count: int, first: int = 0) -> list[str]:
    return [f"{prefix}{i}" for i in range(first, first + count)]


def test_get_unique_follows_the_count_rule(frozen: Store, redis_client: Any) -> None:
    settings = frozen.settings
    # exact and under the cap: the SET's size, even where the HLL says otherwise
    write_slice(redis_client, settings, "u", 60, M - 120, values("a", 3), exact=True)
    write_slice(redis_client, settings, "u", 60, M - 120, ["only-in-the-hll"])
    # over the cap (the SET holds cap + 1): the HLL's estimate
    write_slice(redis_client, settings, "u", 60, M - 60, values("b", 40), exact=True)
    # written without exact mode: the HLL's
    write_slice(redis_client, settings, "u", 60, M, values("c", 7))
    assert frozen.get_unique("u", 60) == [(M - 120, 3), (M - 60, 40), (M, 7)]
    keys = frozen.keys
    slot = keys.unique_layout("u", (60,)).slots[0]
    assert redis_client.scard(slot.members(M - 60)) == 11
    labelled = 'u{route="/a"}'
    write_slice(redis_client, settings, labelled, 60, M, values("d", 2))
    assert frozen.get_unique("u", 60, {"route": "/a"}) == [(M, 2)]
    assert frozen.get_unique("u", 300) == []


def test_get_unique_reads_the_retention_window_only(small_cap: Settings, redis_client: Any) -> None:
    old = M - 60 * 120  # one slice before the window (retention 120: M and 119 before it)
    write_slice(redis_client, small_cap, "w", 60, old, ["x"])
    write_slice(redis_client, small_cap, "w", 60, M - 60 * 119, ["x", "y"])
    write_slice(redis_client, small_cap, "w", 60, M + 240, ["future"])  # within max_future
    slot = KeysOf(small_cap).slot("w", 60)
    for start in (old, M - 60 * 119):  # kept on: the window, not Redis, leaves them out
        redis_client.pfadd(slot.hll(start), *["x", "y"][: 1 + (start > old)])
        redis_client.expire(slot.hll(start), 3600)
    with Store(small_cap, clock=lambda: NOW) as store:
        assert store.get_unique("w", 60) == [(M - 60 * 119, 2), (M + 240, 1)]
    with Store(small_cap, clock=lambda: NOW + 60 * 122) as later:
        assert later.get_unique("w", 60) == [(M + 240, 1)]
    # the keys expire by themselves, a retention after their slice
    assert redis_client.ttl(slot.hll(M)) == -2  # never written
    left = expiry(small_cap, 60, M + 240) - time.time()
    assert left - 2 <= redis_client.ttl(slot.hll(M + 240)) <= left + 1  # TTL: Redis 6.2 has it


class KeysOf:
    def __init__(self, settings: Settings) -> None:
        from slicecount.core.keys import KeySpace

        self.keys = KeySpace(settings.prefix, settings.shards)

    def slot(self, series_id: str, precision: int) -> Any:
        return self.keys.unique_layout(series_id, (precision,)).slots[0]


def test_members_lists_each_slice_with_data(frozen: Store, redis_client: Any) -> None:
    settings = frozen.settings
    labels = {"plan": "pro"}
    series_id = 'visits{plan="pro"}'
    write_slice(redis_client, settings, series_id, 60, M - 180, ["u2", "u1", "u3"], exact=True)
    write_slice(redis_client, settings, series_id, 60, M - 120, values("v", 25), exact=True)
    write_slice(redis_client, settings, series_id, 60, M, ["hll-only"])
    found = frozen.members("visits", 60, labels, M - 600, NOW)
    assert found[0] == SliceMembers(M - 180, ["u1", "u2", "u3"], True)
    assert found[1].start == M - 120 and not found[1].complete
    assert len(found[1].values) == 11 and set(found[1].values) <= set(values("v", 25))
    assert found[2] == SliceMembers(M, [], False)
    assert len(found) == 3
    assert frozen.members("visits", 60, labels, M - 180, M - 180) == [found[0]]
    assert frozen.members("visits", 60, labels, 0, 1000) == []  # long expired: not asked for


def test_registries_list_live_series_only(frozen: Store, redis_client: Any) -> None:
    settings = frozen.settings
    for series_id in ("api", 'api{key="k1"}', 'api{key="k2"}', "apix", 'other{a="1"}'):
        write_slice(redis_client, settings, series_id, 60, M, ["v"])
    write_slice(redis_client, settings, 'api{key="k3"}', 300, M // 300 * 300, ["v"])
    # a stale member (its newest slice expired): skipped, though still in the registry
    stale = 'api{key="gone"}'
    registry = frozen.keys.unique_layout(stale, (60,)).registry
    redis_client.zadd(registry, {f"60:{stale}": NOW})
    assert frozen.unique_series("api", 60) == ["api", 'api{key="k1"}', 'api{key="k2"}']
    assert frozen.unique_series("api", 300) == ['api{key="k3"}']
    assert frozen.all_unique_series(60) == [
        "api", "apix", 'api{key="k1"}', 'api{key="k2"}', 'other{a="1"}'
    ]  # fmt: skip
    assert frozen.unique_series("nothing", 60) == []


def counted(operation: Operation[Any], batches: list[Batch]) -> Generator[Batch, Any, Any]:
    """``operation``, noting every batch it sends."""
    batch = next(operation)
    while True:
        batches.append(batch)
        try:
            batch = operation.send((yield batch))
        except StopIteration as done:
            return done.value


def test_count_unions_within_2_percent_of_the_truth(frozen: Store, redis_client: Any) -> None:
    """~20 000 distinct values over 4 series and 3 slices, with known duplicates."""
    rng = random.Random(15)
    series = [f'visits{{route="/{r}"}}' for r in "abcd"]
    starts = [M - 120, M - 60, M]
    truth: dict[tuple[str, int], set[str]] = {}
    for s in series:
        for start in starts:
            # a shared pool makes the same user show up in several series and slices
            chosen = {f"user{rng.randrange(20_000)}" for _ in range(2500)}
            truth[(s, start)] = chosen
            write_slice(redis_client, frozen.settings, s, 60, start, chosen)
    everything = set().union(*truth.values())
    assert 15_000 < len(everything) < 20_000
    groups = [
        [(s, starts) for s in series],  # everything
        [(series[0], starts)],  # one series, every slice
        [(s, [M]) for s in series],  # every series, one slice (sum by () at one point)
        [(series[1], [M - 60])],  # one slice: the rule
        [],  # nothing
        [("visits", [M])],  # never written
    ]
    wanted = [
        len(everything),
        len(set().union(*(truth[(series[0], t)] for t in starts))),
        len(set().union(*(truth[(s, M)] for s in series))),
        len(truth[(series[1], M - 60)]),
        0,
        0,
    ]
    batches: list[Batch] = []
    got = frozen.run(counted(count_unions(frozen.context, 60, groups), batches))
    for count, true in zip(got, wanted, strict=True):
        assert abs(count - true) <= 0.02 * true, (got, wanted)
    spans_shards = len({frozen.keys.shard(s) for s in series}) > 1
    assert len(batches) == (2 if spans_shards else 1)  # every group in one round trip
    assert spans_shards == (frozen.settings.shards > 1)
    assert not _scratch_left(redis_client, frozen)


def _scratch_left(client: Any, store: Store) -> list[str]:
    keys = [store.keys.scratch(s, "*") for s in range(store.settings.shards)]
    return [k for pattern in keys for k in client.scan_iter(match=pattern)]


def test_count_unions_exact_for_one_slice_and_unions_over_the_cap(
    frozen: Store, redis_client: Any
) -> None:
    settings = frozen.settings
    write_slice(redis_client, settings, "e", 60, M, values("x", 5), exact=True)
    write_slice(redis_client, settings, "e", 60, M, ["hll-only"])  # the SET wins: 5
    write_slice(redis_client, settings, "e", 60, M - 60, values("x", 30), exact=True)
    assert frozen.count_unions(60, [[("e", [M])], [("e", [M - 60])], [("e", [M, M - 60])]]) == [
        5,
        30,
        31,  # a union is the HLLs': x0..x29 and hll-only
    ]
    # the same slice twice is one slice (the rule applies)
    assert frozen.count_unions(60, [[("e", [M]), ("e", [M])]]) == [5]


@pytest.mark.parametrize("shards", [3])
def test_count_unions_across_shards_on_one_server(
    redis_url: str, redis_client: Any, topology: str, shards: int
) -> None:
    """The cross-shard combine also works off a cluster: a shard's few HLLs carried as they
    are, a shard's many merged first (CARRY_AS_THEY_ARE), then counted in one slot."""
    if topology == "cluster":
        pytest.skip("the cluster's own shards are tested above")
    settings = Settings(redis_url=redis_url, shards=shards)
    keys = KeysOf(settings).keys
    ids = [f"s{i}" for i in range(12)]
    assert len({keys.shard(s) for s in ids}) == shards
    starts = [M - 60 * m for m in range(4)]
    for i, s in enumerate(ids):
        for m, start in enumerate(starts):
            write_slice(redis_client, settings, s, 60, start, values("v", 200, i * 400 + m * 100))
    per_shard = Counter(keys.shard(s) for s in ids)
    assert min(per_shard.values()) * 4 <= CARRY_AS_THEY_ARE < max(per_shard.values()) * 4
    with Store(settings, clock=lambda: NOW) as store:
        got = store.count_unions(
            60, [[(s, starts) for s in ids], [(s, [M]) for s in ids], [(ids[0], [M - 60])]]
        )
        true = [len({f"v{i * 400 + j}" for i in range(12) for j in range(500)}), 12 * 200, 200]
        for count, wanted in zip(got, true, strict=True):
            assert abs(count - wanted) <= 0.02 * wanted, (got, true)
        assert not _scratch_left(redis_client, store)


def test_count_unions_refuses_bad_arguments(frozen: Store) -> None:
    cases: list[tuple[Any, Any, str]] = [
        (1, [], "precision 1 keeps no unique counts"),
        (7, [], "7"),
        (60, "abc", "'abc'"),
        (60, [[("bad id{", [M])]], "bad id{"),
        (60, [[("ok", [M + 1])]], f"slice start {M + 1} is not a multiple"),
        (60, [[("ok", [-60])]], "-60"),
        (60, [[("ok", M)]], str(M)),
        (60, [["ok"]], "'ok'"),
    ]
    for precision, groups, message in cases:
        with pytest.raises(ConfigurationError, match=message.replace("{", r"\{")):
            frozen.count_unions(precision, groups)
    with pytest.raises(ValueError, match="precision 5 keeps no unique counts"):
        frozen.get_unique("u", 5)
    with pytest.raises(ValueError, match="invalid metric name"):
        frozen.members("no good", 60, None, 0, 1)
    with pytest.raises(ValueError, match="start <= end"):
        frozen.members("u", 60, None, NOW, NOW - 1)


def test_async_store_reads_alike(small_cap: Settings, redis_client: Any) -> None:
    write_slice(redis_client, small_cap, "a", 60, M, values("v", 4), exact=True)
    write_slice(redis_client, small_cap, "b", 60, M, values("v", 6, first=2))

    async def read() -> tuple[Any, ...]:
        async with AsyncStore(small_cap, clock=lambda: NOW) as store:
            return (
                await store.get_unique("a", 60),
                await store.members("a", 60, None, M, M),
                await store.count_unions(60, [[("a", [M]), ("b", [M])]]),
                await store.all_unique_series(60),
            )

    assert asyncio.run(read()) == (
        [(M, 4)],
        [SliceMembers(M, values("v", 4), True)],
        [8],
        ["a", "b"],
    )


@pytest.mark.layouts("book", "blocks")
def test_the_write_path_and_the_contract_layout_read_alike(
    frozen: Store, redis_client: Any
) -> None:
    """``Store.add_unique`` (the lead's write path) against the layout these tests write."""
    settings = frozen.settings
    batches = [values("x", 5), values("x", 30, first=3), ["y"]]
    for when, chosen in zip((NOW - 100, NOW - 40, NOW), batches, strict=True):
        frozen.add_unique("viaapi", chosen, {"k": "1"}, exact=True, now=when)
        frozen.add_unique("viaapi", chosen, {"k": "2"}, now=when)
        for p in (60, 300):
            start = int(when) // p * p
            write_slice(redis_client, settings, 'direct{k="1"}', p, start, chosen, exact=True)
            write_slice(redis_client, settings, 'direct{k="2"}', p, start, chosen)
    for p in (60, 300):
        for k in ("1", "2"):
            got = frozen.get_unique("viaapi", p, {"k": k})
            assert got == frozen.get_unique("direct", p, {"k": k}) and got
            listed = [
                [(m.start, m.complete, m.values if m.complete else len(m.values)) for m in found]
                for found in (
                    frozen.members(name, p, {"k": k}, NOW - 600, NOW)
                    for name in ("viaapi", "direct")
                )
            ]  # over the cap, which values the SET kept is arbitrary: only their number
            assert listed[0] == listed[1]
        assert frozen.unique_series("viaapi", p) == ['viaapi{k="1"}', 'viaapi{k="2"}']
        ids = [f'{name}{{k="{k}"}}' for name in ("viaapi", "direct") for k in "12"]
        scores = {
            redis_client.zscore(frozen.keys.unique_layout(i, (p,)).registry, f"{p}:{i}")
            for i in ids
        }
        assert len(scores) == 1  # the same expiry
    assert frozen.get_unique("viaapi", 60, {"k": "1"}) == [(M - 120, 5), (M - 60, 30), (M, 1)]
