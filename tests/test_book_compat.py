"""Data written by the book's code reads back through slicecount, and the reverse: with
``layout="book"`` (the default layout, blocks, keeps other keys)."""

from __future__ import annotations

import pytest
import redis

from slicecount.store import Store
from tests import book

pytestmark = pytest.mark.layouts("book")


def test_store_reads_what_the_book_wrote(store: Store, redis_client: redis.Redis) -> None:
    for t, n in (
        (1_700_000_000.2, 1),
        (1_700_000_000.9, 2),
        (1_700_000_004.5, 4),
        (1_700_000_061, 8),
    ):
        book.update_counter(redis_client, "hits", n, now=t)
    assert store.get("hits", 1) == [(1_700_000_000, 3), (1_700_000_004, 4), (1_700_000_061, 8)]
    assert store.get("hits", 5) == [(1_700_000_000, 7), (1_700_000_060, 8)]
    assert store.get("hits", 60) == [(1_699_999_980, 7), (1_700_000_040, 8)]
    assert store.get("hits", 86400) == [(1_699_920_000, 15)]
    assert store.series("hits", 60) == ["hits"]
    assert store.names(60) == ["hits"]
    assert store.read(["hits"], 60, 1_699_999_980, 1_700_000_100) == {"hits": [7, 8, None]}


def test_book_reads_what_the_store_wrote(store: Store, redis_client: redis.Redis) -> None:
    store.incr("sales", 3, now=1_700_000_000.5)
    store.apply({"sales": {1_700_000_001: 2, 1_700_000_070: 5}})
    for precision in book.PRECISION:
        assert book.get_counter(redis_client, "sales", precision) == store.get("sales", precision)
    assert book.get_counter(redis_client, "sales", 1) == [
        (1_700_000_000, 3),
        (1_700_000_001, 2),
        (1_700_000_070, 5),
    ]
    assert book.get_counter(redis_client, "sales", 60) == [(1_699_999_980, 5), (1_700_000_040, 5)]
    known = redis_client.zrange("known:", 0, -1, withscores=True)
    assert sorted(known) == sorted((f"{p}:sales", 0.0) for p in book.PRECISION)


def test_both_writers_add_up(store: Store, redis_client: redis.Redis) -> None:
    book.update_counter(redis_client, "mixed", 1, now=1_700_000_000)
    store.incr("mixed", 2, now=1_700_000_000)
    store.apply({"mixed": {1_700_000_000: 4}})
    assert book.get_counter(redis_client, "mixed", 5) == [(1_700_000_000, 7)]
    assert store.get("mixed", 5) == [(1_700_000_000, 7)]
