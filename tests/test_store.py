from __future__ import annotations

import pytest
import redis

from slicecount.config import Settings
from slicecount.embedded import EmbeddedRedis
from slicecount.errors import StoreError
from slicecount.store import Store

T0 = 1_700_000_000  # a multiple of 5; T0 - 20 is a multiple of 60


def keys_per_series(settings: Settings) -> int:
    """Keys (and registry members) a freshly written series has: the book's hash per
    precision, or the blocks layout's one open hash (its block comes when the cleaner seals)."""
    return len(settings.precisions) if settings.layout == "book" else 1


def counts_key(store: Store, series_id: str) -> str:
    """A key holding ``series_id``'s counts: the book's 60 s hash, or the open hash."""
    if store.settings.layout == "book":
        return store.keys.counter(60, series_id)
    return store.keys.open(series_id)


@pytest.mark.topologies
@pytest.mark.layouts("book", "blocks")
def test_incr_writes_every_precision_in_one_transaction(store: Store) -> None:
    store.incr("hits", 2, {"route": "/a"}, now=T0 + 61.5)
    for precision in store.settings.precisions:
        start = (T0 + 61) // precision * precision
        assert store.get("hits", precision, {"route": "/a"}) == [(start, 2)]
    assert store.series("hits", 3600) == ['hits{route="/a"}']


@pytest.mark.topologies
def test_incr_uses_the_injected_clock(settings: Settings) -> None:
    with Store(settings, clock=lambda: T0 + 0.9) as store:
        store.incr("tick")
        assert store.get("tick", 1) == [(T0, 1)]


@pytest.mark.topologies
@pytest.mark.layouts("book", "blocks")
def test_apply_aggregates_per_slice(store: Store, redis_client: redis.Redis) -> None:
    refused = store.apply(
        {
            "a": {T0: 1, T0 + 1: 2, T0 + 5: 4, T0 + 59: 8, T0 + 60: 16},
            'b{x="1"}': {T0 + 2: 3},
            "zero": {T0: 0},
        }
    )
    assert refused == 0
    assert store.get("a", 1) == [(T0, 1), (T0 + 1, 2), (T0 + 5, 4), (T0 + 59, 8), (T0 + 60, 16)]
    assert store.get("a", 5) == [(T0, 3), (T0 + 5, 4), (T0 + 55, 8), (T0 + 60, 16)]
    assert store.get("a", 60) == [(T0 - 20, 7), (T0 + 40, 24)]
    assert store.get("b", 1, {"x": 1}) == [(T0 + 2, 3)]
    # zero-count series write nothing at all, not even a registry member
    keys = store.keys
    for member in ("0:zero", "1:zero"):
        assert redis_client.zscore(keys.known_for("zero"), member) is None
    assert not redis_client.exists(keys.counter(1, "zero"), keys.open("zero"))
    registered = sum(redis_client.zcard(known) for known in keys.registries())
    assert registered == 2 * keys_per_series(store.settings)


@pytest.mark.topologies
@pytest.mark.layouts("book")  # one precision's hash refused, the others written
def test_apply_reports_commands_redis_refused_and_keeps_the_rest(
    store: Store, redis_client: redis.Redis
) -> None:
    clash = store.keys.counter(5, "clash")
    redis_client.set(clash, "not a hash")
    refused = store.apply({"clash": {T0: 1}, "fine": {T0: 1}})
    assert refused == 1
    assert store.get("clash", 1) == [(T0, 1)]
    assert store.get("fine", 5) == [(T0, 1)]
    assert redis_client.get(clash) == "not a hash"


@pytest.mark.topologies
@pytest.mark.layouts("book", "blocks")
def test_apply_splits_huge_batches_into_several_script_calls(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("slicecount.operations.chunking.CHUNK_INCREMENTS", 10)
    batch = {f"s{i}": {T0 + i: i + 1} for i in range(25)}
    assert store.apply(batch) == 0
    assert sum(n for sid in batch for _, n in store.get(sid, 86400)) == sum(range(1, 26))
    assert len(store.names(3600)) == 25


@pytest.mark.topologies
def test_series_and_names_discover_without_neighbours(store: Store) -> None:
    store.apply(
        {
            "hits": {T0: 1},
            'hits{route="/"}': {T0: 1},
            'hits{route="/a"}': {T0: 1},
            "hits.total": {T0: 1},
            'hitsz{a="1"}': {T0: 1},
            "other": {T0: 1},
        }
    )
    assert store.series("hits", 60) == ["hits", 'hits{route="/"}', 'hits{route="/a"}']
    assert store.series("nothing", 60) == []
    assert store.names(60) == ["hits", "hits.total", "hitsz", "other"]


@pytest.mark.topologies
def test_names_pages_through_a_large_registry(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("slicecount.operations.reading.PAGE", 7)
    store.apply({f"m{i:02d}": {T0: 1} for i in range(30)})
    assert store.names(1) == [f"m{i:02d}" for i in range(30)]


@pytest.mark.topologies
def test_read_returns_exactly_the_slices_in_range(store: Store) -> None:
    store.apply({"r": {T0: 1, T0 + 60: 2, T0 + 180: 3}})
    got = store.read(["r", "missing"], 60, T0 - 20 + 1, T0 + 200)
    # slices start at floor(start/60)*60 = T0-20 and run to the slice holding T0+200
    assert got == {"r": [1, 2, None, 3], "missing": [None, None, None, None]}
    assert store.read([], 60, T0, T0 + 60) == {}


@pytest.mark.topologies
@pytest.mark.layouts("book", "blocks")
def test_delete_removes_hashes_and_registry_members(
    store: Store, redis_client: redis.Redis
) -> None:
    each = keys_per_series(store.settings)
    store.apply({"d": {T0: 1}, 'd{k="1"}': {T0: 1}, 'd{k="2"}': {T0: 1}, "dd": {T0: 1}})
    assert store.delete("d", {"k": "1"}) == each
    assert store.series("d", 60) == ["d", 'd{k="2"}']
    assert store.delete("d") == 2 * each
    assert store.series("d", 60) == []
    assert store.series("dd", 60) == ["dd"]
    assert not redis_client.exists(counts_key(store, 'd{k="2"}'))
    assert not redis_client.exists(counts_key(store, "d"))
    assert sum(redis_client.zcard(known) for known in store.keys.registries()) == each


@pytest.mark.topologies
@pytest.mark.layouts("book")  # the blocks layout has one member for every precision
def test_delete_finds_precisions_no_longer_configured(
    settings: Settings, redis_client: redis.Redis
) -> None:
    with Store(settings.with_changes(precisions=(1, 7))) as old:
        old.incr("legacy", now=T0)
    with Store(settings) as store:
        assert store.delete("legacy") == 2
    assert redis_client.dbsize() == 0


@pytest.mark.topologies
@pytest.mark.layouts("book", "blocks")
def test_prefix_and_shards_are_honoured(settings: Settings, redis_client: redis.Redis) -> None:
    with Store(settings.with_changes(prefix="app:", shards=3)) as store:
        store.incr("s", 1, {"k": "v"}, now=T0)
        store.apply({f's{{k="{i}"}}': {T0: 1} for i in range(10)})
        assert len(store.series("s", 60)) == 11
        assert store.get("s", 60, {"k": "v"}) == [(T0 - 20, 1)]
        assert store.names(1) == ["s"]
        assert store.delete("s") == 11 * keys_per_series(settings)
    assert redis_client.dbsize() == 0


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda s: s.incr("bad name"), "'bad name'"),
        (lambda s: s.incr("ok", 1, {"bad-label": "x"}), "'bad-label'"),
        (lambda s: s.incr("ok", 1.5), "1.5"),
        (lambda s: s.incr("ok", 1, None, -5), "-5"),
        (lambda s: s.get("ok", 7), "unknown precision 7"),
        (lambda s: s.series("ok", 2), "unknown precision 2"),
        (lambda s: s.names(0), "unknown precision 0"),
        (lambda s: s.read(["ok"], 60, 10, 5), "10..5"),
        (lambda s: s.read("ok", 60, 0, 5), "'ok'"),
        (lambda s: s.apply({"ok": {1.5: 1}}), "1.5"),
        (lambda s: s.apply({"ok": {T0: "2"}}), "'2'"),
        (lambda s: s.delete("no good"), "'no good'"),
    ],
)
@pytest.mark.topologies
def test_bad_arguments_raise_value_error_and_write_nothing(
    store: Store, redis_client: redis.Redis, call: object, fragment: str
) -> None:
    with pytest.raises(ValueError) as info:
        call(store)  # type: ignore[operator]
    assert fragment in str(info.value)
    assert redis_client.dbsize() == 0


def test_from_url_rejects_unknown_schemes() -> None:
    with pytest.raises(ValueError, match="'http'"):
        Store.from_url("http://localhost:6379")


def test_unreachable_redis_is_a_store_error() -> None:
    with Store.from_url("redis://127.0.0.1:1/0", socket_timeout=0.5) as store:
        assert store.ping() is False
        with pytest.raises(StoreError, match=r"127\.0\.0\.1:1"):
            store.incr("x")
        with pytest.raises(StoreError):
            store.apply({"x": {T0: 1}})
        with pytest.raises(StoreError):
            store.get("x", 60)


@pytest.mark.layouts("book")  # the blocks layout's foreign values: test_blocks_layout.py
def test_foreign_fields_do_not_break_reads(store: Store, redis_client: redis.Redis) -> None:
    store.incr("f", now=T0)
    redis_client.hset("count:60:f", "note", "hello")
    redis_client.hset("count:60:f", str(T0 + 40), "NaN")
    assert store.get("f", 60) == [(T0 - 20, 1)]
    assert store.read(["f"], 60, T0 - 20, T0 + 40) == {"f": [1, None]}


def test_a_transaction_redis_aborts_raises_so_it_can_be_retried(
    store: Store, redis_client: redis.Redis
) -> None:
    redis_client.config_set("maxmemory", 1)  # noeviction: every write is refused with OOM
    try:
        with pytest.raises(StoreError, match="maxmemory"):
            store.apply({"full": {T0: 1}})
    finally:
        redis_client.config_set("maxmemory", 0)
    assert redis_client.dbsize() == 0
    assert store.apply({"full": {T0: 1}}) == 0
    assert store.get("full", 1) == [(T0, 1)]


def test_a_server_gone_between_calls_is_a_store_error_then_recovers(
    private_redis: EmbeddedRedis,
) -> None:
    with Store.from_url(private_redis.url, socket_timeout=1.0) as store:
        store.apply({"x": {T0: 1}})  # leaves a pooled connection behind
        private_redis.stop()
        with pytest.raises(StoreError):
            store.apply({"x": {T0: 1}})
        private_redis.start()
        assert store.apply({"x": {T0: 2}}) == 0
        assert store.get("x", 1) == [(T0, 2)]
