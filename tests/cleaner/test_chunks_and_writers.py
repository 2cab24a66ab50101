"""The cleaner's chunk sizing, and quiet writers forgotten beside a writer that comes back."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import redis

from slicecount.cleaner.sizing import FIRST_CHUNK, TARGET_CALL_SECONDS, ChunkSizer
from slicecount.operations.batches import Batch, Operation
from slicecount.operations.trimming import forget_writers
from slicecount.store import Store

NOW = 1_700_006_400
T = TypeVar("T")


def test_chunks_are_sized_by_the_slowest_recent_call() -> None:
    sizes = ChunkSizer()
    per_hash = TARGET_CALL_SECONDS / 100  # 100 hashes fill a call
    sizes.observe(FIRST_CHUNK, FIRST_CHUNK * per_hash)
    assert sizes.size == 2 * FIRST_CHUNK  # grows at most 2x a call
    for _ in range(6):
        sizes.observe(sizes.size, sizes.size * per_hash)
    assert sizes.size == 100
    sizes.observe(100, 100 * per_hash * 4)  # one call 4x slower (Redis busy, a bigger hash)
    assert sizes.size == 25
    for _ in range(7):  # it is remembered for the next calls, fast as they are
        sizes.observe(sizes.size, sizes.size * per_hash / 2)
        assert sizes.size == 25
    sizes.observe(25, 25 * per_hash)  # then forgotten
    assert sizes.size == 50
    sizes.observe(3, 1.0)  # a walk's short tail says nothing
    assert sizes.size == 50


def interleaved(operation: Operation[T], between: Callable[[], object]) -> Operation[T]:
    """``operation`` with ``between()`` run after each of its round trips."""
    batch: Batch = next(operation)
    while True:
        replies = yield batch
        between()
        try:
            batch = operation.send(replies)
        except StopIteration as done:
            result: T = done.value
            return result


def test_a_writer_that_writes_while_quiet_writers_are_forgotten_is_kept(
    store: Store, redis_client: redis.Redis
) -> None:
    redis_client.zadd("writers:", {"gone": NOW - 100, "back": NOW - 100, "live": NOW})
    redis_client.mset({"writer:gone": 5, "writer:back": 7, "writer:live": 9})

    def back_writes() -> None:  # between the listing and the script: "back" flushes again
        if redis_client.zscore("writers:", "back") == NOW - 100:
            redis_client.zadd("writers:", {"back": NOW + 1})
            redis_client.set("writer:back", 8)

    forgotten = store.run(interleaved(forget_writers(store.context, NOW - 50), back_writes))
    assert forgotten == 1
    assert redis_client.zrange("writers:", 0, -1) == ["live", "back"]
    assert redis_client.mget("writer:gone", "writer:back", "writer:live") == [None, "8", "9"]
