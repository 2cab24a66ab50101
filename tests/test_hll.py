"""slicecount.core.hll against a real redis-server: a sketch built in the process, SET as a string,
reads back like the HLL that PFADD builds from the same values, register for register."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
import redis

from slicecount.core.hll import (
    DENSE,
    DENSE_SIZE,
    SPARSE,
    SPARSE_MAX_BYTES,
    Sketch,
    murmurhash64a,
    position,
)


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis.Redis]:
    """A client that returns bytes (the HLL strings are binary)."""
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def values(count: int, seed: int = 0) -> list[str]:
    """Distinct values of mixed lengths (tails of 0-7 bytes, 1 to 70 eight-byte blocks) and a
    few non-ASCII ones: every branch of the hash."""
    rng = random.Random(seed)
    shapes = ["{}", "user-{}", "{}@example.org", "é{}ü", "k{}" + "x" * rng.randrange(8, 600)]
    return [rng.choice(shapes).format(f"{seed}-{i}") for i in range(count)]


def pfadd(raw: redis.Redis, key: str, items: list[str]) -> None:
    raw.delete(key)
    raw.pfadd(key)  # an empty HLL, as a key with no values would be
    for i in range(0, len(items), 10_000):
        raw.pfadd(key, *items[i : i + 10_000])


def registers(raw: redis.Redis, key: str) -> bytearray:
    blob = raw.get(key)
    assert isinstance(blob, bytes)
    return Sketch.decode(blob).registers


@pytest.mark.parametrize(
    "count", [0, 1, 100, 10_000, pytest.param(200_000, marks=pytest.mark.slow)]
)
def test_set_blob_counts_and_registers_as_pfadd(raw: redis.Redis, count: int) -> None:
    items = values(count, seed=count)
    pfadd(raw, "added", items)
    sketch = Sketch(items)
    blob = sketch.encode()
    raw.set("built", blob)
    assert raw.pfcount("built") == raw.pfcount("added")
    assert registers(raw, "built") == registers(raw, "added") == sketch.registers
    if count <= 100:
        assert blob[4] == SPARSE and len(blob) < 400
    if count >= 10_000:
        assert blob[4] == DENSE and len(blob) == DENSE_SIZE
        # GETRANGE reads a dense key's packed registers directly: byte for byte the same
        body = raw.getrange("added", 16, DENSE_SIZE - 1)
        assert body == blob[16:]


@pytest.mark.parametrize("count", [1, 100, 1_000])
def test_dense_packing_matches_redis_at_small_counts(raw: redis.Redis, count: int) -> None:
    """With hll-sparse-max-bytes 0 Redis keeps even a small HLL dense: its bytes are ours."""
    items = values(count, seed=7 + count)
    old = str(raw.config_get("hll-sparse-max-bytes")["hll-sparse-max-bytes"])
    raw.config_set("hll-sparse-max-bytes", 0)
    try:
        pfadd(raw, "added", items)
        raw.pfadd("added", items[0])  # the conversion happens on the first PFADD that grows it
    finally:
        raw.config_set("hll-sparse-max-bytes", old)
    assert raw.getrange("added", 4, 4) == bytes((DENSE,))
    assert raw.getrange("added", 16, DENSE_SIZE - 1) == Sketch(items).dense()[16:]


@pytest.mark.slow
@pytest.mark.parametrize(("old", "new"), [(0, 500), (300, 700), (5_000, 1_000), (2_000, 50_000)])
def test_pfmerge_of_the_blob_is_pfadd_of_the_union(raw: redis.Redis, old: int, new: int) -> None:
    before, after = values(old, seed=1), values(new, seed=2)
    shared = before[: old // 3]  # values seen before and again: a union, not a sum
    pfadd(raw, "union", before + after + shared)
    pfadd(raw, "merged", before)
    raw.set("scratch", Sketch(after + shared).encode())
    raw.pfmerge("merged", "scratch")
    assert raw.pfcount("merged") == raw.pfcount("union")
    assert registers(raw, "merged") == registers(raw, "union")


@pytest.fixture(scope="module")
def rank_one() -> dict[int, str]:
    """A value of rank 1 for (nearly) every register: runs of equal VALs where wanted."""
    found: dict[int, str] = {}
    for i in range(200_000):
        index, rank = position(f"v{i}")
        if rank == 1:
            found.setdefault(index, f"v{i}")
    return found


@pytest.mark.parametrize(
    "indexes",
    [
        [0],
        [0, 1],
        [0, 1, 2, 3, 4],
        [1, 2, 3, 4, 5, 6, 7, 8, 9],
        [16383],
        [16378, 16383],
        list(range(16376, 16384)),
        [63, 64, 129, 194, 16383],
    ],
)
def test_edge_registers_and_runs(
    raw: redis.Redis, rank_one: dict[int, str], indexes: list[int]
) -> None:
    """The first and last registers, runs of one rank longer than a VAL's 4, gaps of exactly
    64/65 zeros: SET, and PFMERGE into a key that holds other values (a register-0 VAL once
    overwrote the header's last byte: Redis refused the merge as corrupted)."""
    items = [rank_one[i] for i in indexes]
    sketch = Sketch(items)
    raw.set("built", sketch.encode())
    pfadd(raw, "added", items)
    assert registers(raw, "built") == registers(raw, "added") == sketch.registers
    earlier = values(10, seed=11)
    pfadd(raw, "merged", earlier)
    raw.pfmerge("merged", "built")
    pfadd(raw, "union", earlier + items)
    assert registers(raw, "merged") == registers(raw, "union")


def test_pfmerge_of_sparse_blobs_keeps_a_small_key_sparse(raw: redis.Redis) -> None:
    """Why encode() prefers sparse: merged into a sparse key, a dense blob would turn it into
    12 kB; a sparse one leaves it as small as PFADD would."""
    first, second = values(200, seed=3), values(200, seed=4)
    pfadd(raw, "merged", first)
    raw.set("scratch", Sketch(second).encode())
    raw.pfmerge("merged", "scratch")
    assert raw.getrange("merged", 4, 4) == bytes((SPARSE,))
    pfadd(raw, "added", first + second)
    assert raw.pfcount("merged") == raw.pfcount("added")


def test_a_register_over_32_is_dense_even_when_small(raw: redis.Redis) -> None:
    """Sparse VAL opcodes hold ranks 1..32: a rank of 33+ (one value in 2**32) forces the dense
    encoding. No value that rare can be found quickly, so the register is set by hand."""
    sketch = Sketch(["a", "b"])
    assert sketch.touched is not None
    sketch.registers[123] = 40
    sketch.touched.append(123)
    assert sketch.sparse() is None and sketch.encode()[4] == DENSE
    raw.set("built", sketch.encode())
    assert registers(raw, "built") == sketch.registers
    pfadd(raw, "added", ["a", "b"])
    raw.pfmerge("added", "built")
    assert registers(raw, "added") == sketch.registers


def test_sparse_stops_at_redis_limit() -> None:
    sketch = Sketch(values(2_500, seed=6))
    blob = sketch.encode()
    assert blob[4] == DENSE  # ~2 500 non-zero registers: past 3 000 bytes sparse
    small = Sketch(values(1_200, seed=6)).encode()
    assert small[4] == SPARSE and len(small) <= 16 + SPARSE_MAX_BYTES


@pytest.mark.slow
def test_merge_in_process_is_the_union() -> None:
    a, b = values(1_000, seed=8), values(20_000, seed=9)
    merged = Sketch(a)
    merged.merge(Sketch(b))
    assert merged.registers == Sketch(a + b).registers
    assert merged.encode() == Sketch(a + b).encode()
    small = Sketch(a[:10])
    small.merge(Sketch(a[10:20]))
    assert small.encode() == Sketch(a[:20]).encode()  # still sparse, same bytes


def test_add_hashes_is_update() -> None:
    items = values(3_000, seed=10)
    by_hash = Sketch()
    by_hash.add_hashes(murmurhash64a(v.encode()) for v in items[:1_000])
    assert by_hash.encode() == Sketch(items[:1_000]).encode()
    by_hash.add_hashes(murmurhash64a(v.encode()) for v in items[1_000:])
    assert by_hash.encode() == Sketch(items).encode()


def test_decode_round_trips_and_rejects_garbage() -> None:
    for count in (0, 50, 3_000):
        sketch = Sketch(values(count, seed=count))
        assert Sketch.decode(sketch.encode()).registers == sketch.registers
        assert Sketch.decode(sketch.dense()).registers == sketch.registers
    with pytest.raises(ValueError, match="magic"):
        Sketch.decode(b"nope" + bytes(20))
    with pytest.raises(ValueError, match="dense"):
        Sketch.decode(Sketch().dense()[:-1])
    with pytest.raises(ValueError, match="registers"):
        Sketch.decode(Sketch().encode()[:-2] + b"\x00")


@pytest.mark.parametrize(
    ("value", "seeded", "unseeded"),
    [
        ("", 0xD8DFEA6585BC9732, 0x0),
        ("a", 0x53D2470A9B43B1A7, 0x71717D2D36B6B11),
        ("hello", 0xF656F01EECFE400, 0x1E68D17C457BF117),
        ("12345678", 0x95EBB86389132953, 0x758F67D162B2D202),
        ("192.168.1.100", 0xEA0721442AADD6A4, 0x2B18E72759082A1D),
        ("é" * 9, 0x8921320B2E35DBB, 0x938D1AD2590FA9C6),
    ],
)
def test_hash_matches_an_independent_murmurhash64a(value: str, seeded: int, unseeded: int) -> None:
    """Reference hashes from a C MurmurHash64A (PyPI's mmhash2), one per branch: empty, tail
    only, one block, block and tail, multi-byte UTF-8."""
    assert murmurhash64a(value.encode()) == seeded
    assert murmurhash64a(value.encode(), seed=0) == unseeded
