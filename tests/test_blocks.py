"""The compact blocks (core/blocks.py): headers, spans, and splices (core/splices.py). Pure."""

from __future__ import annotations

import random

import pytest

from slicecount.core import blocks, splices
from slicecount.core.blocks import BlockError, Header
from slicecount.core.frames import FRAME_SLICES, decode_frame
from slicecount.operations import block_reading

T0 = 1_700_000_000
LADDER = (1, 5, 60)


def build(counts: dict[int, int], header: Header | None = None, old: bytes = b"",
          keep_from: dict[int, int] | None = None) -> bytes:  # fmt: skip
    """``counts`` (second -> n) added into a block, as a cleaner's pass would."""
    header = header or Header()
    frames: dict[tuple[int, int], list[int]] = {}
    for p in LADDER:
        for start in {t - t % (p * FRAME_SLICES) for t in counts}:
            _, n, offset, length = header.frames(p, start, start + 1)
            if n:
                frames[(p, start)] = decode_frame(old[offset : offset + length])
    splices.add_counts(frames, LADDER, counts)
    splice = splices.plan_splice(header, LADDER, frames, keep_from or {})
    assert splice.expected == header.generation
    return splice.apply(old)


def read_header(data: bytes) -> Header:
    size = blocks.header_size(data[:8])
    size = blocks.header_size(data[:size])
    return blocks.parse_header(data[:size])


def test_bad_bytes_are_a_block_error_not_a_crash() -> None:
    with pytest.raises(BlockError, match="not a slicecount block"):
        blocks.parse_header(b"hello world, not a block")
    assert blocks.parse_header(b"") == Header()


def test_every_precision_sums_the_same_counts_and_a_span_reads_exactly() -> None:
    rng = random.Random(1)
    counts = {T0 + i: rng.randint(0, 3) for i in range(7200)}
    data = build(counts)
    header = read_header(data)
    assert header.generation != 0
    everything = blocks.everything(data)
    for p in LADDER:
        assert sum(everything[p].values()) == sum(counts.values())
    start, end = T0 - T0 % 5 + 600, T0 + 5000
    got = blocks.slices_in(blocks.span(data, 5, start, end), 5, start, end)
    assert got == [sum(counts.get(s + k, 0) for k in range(5)) for s in range(start, end, 5)]


def test_a_splice_keeps_untouched_frames_adds_late_counts_and_drops_expired_ones() -> None:
    counts = {T0 + i: 1 for i in range(0, 7200, 7)}
    old = build(counts)
    header = read_header(old)
    late = {T0 + 10: 5, T0 + 7300: 2}  # one into a sealed frame, one past the end
    cutoff = T0 + 3600
    new = build(late, header, old, keep_from={1: cutoff})
    assert read_header(new).generation == header.generation % 0xFFFFFFFF + 1
    everything = blocks.everything(new)
    assert sum(everything[60].values()) == sum(counts.values()) + 7
    assert min(everything[1]) > cutoff - 1 * FRAME_SLICES  # expired frames of 1 s dropped
    assert all(t >= cutoff - FRAME_SLICES for t in everything[1])
    slice_ = T0 + 10 - (T0 + 10) % 5
    before = sum(1 for t in counts if slice_ <= t < slice_ + 5)
    assert everything[5][slice_] == before + 5


def test_an_empty_block_after_retention_has_no_frames() -> None:
    data = build({T0: 3})
    header = read_header(data)
    dropped = splices.plan_splice(header, LADDER, {}, {p: T0 + 10**7 for p in LADDER})
    assert blocks.is_empty(read_header(dropped.apply(data)))


def test_the_generation_wraps_around_past_zero() -> None:
    last = splices.plan_splice(Header(0xFFFFFFFF), LADDER, {(1, T0 - T0 % 720): [1] * 720}, {})
    assert read_header(last.apply(b"")).generation == 1


def test_a_new_block_starts_at_a_random_generation() -> None:
    """A block trimmed away and written again does not take up the generations of the old
    one, whose frames a datasource may hold (20 new blocks: 20 generations)."""
    fresh = [read_header(build({T0: 1})).generation for _ in range(20)]
    assert len(set(fresh)) == 20 and 0 not in fresh


def test_a_header_is_small_and_a_lying_one_is_a_block_error() -> None:
    data = build({T0 + i: 1 for i in range(0, 7200, 3)})
    header = read_header(data)
    assert header.size == blocks.header_size(data) < 64  # 3 sections, 16 frames
    assert blocks.parse_header(header.pack()) == header
    cut = bytearray(data[: header.size])
    cut[8] += 1  # the length field says one byte more than the sections take
    with pytest.raises(BlockError, match="says it has"):
        blocks.parse_header(bytes(cut) + b"\x00")
    with pytest.raises(BlockError, match="a block header needs"):
        blocks.parse_header(data[:13])
    with pytest.raises(BlockError, match="cut short"):  # a length field past the varints
        lying = bytearray(data[:10])
        lying[8:10] = (12).to_bytes(2, "little")
        blocks.parse_header(bytes(lying) + b"\x85\x85")


@pytest.mark.parametrize(
    "fields",
    [
        [],
        [b"1700000000", b"5"],
        [b"1" * 18, b"0", b"007", b"9"],
        [b"1" * 19, b"2"],
        [b"2", b"1" * 19],
        [b"", b"2"],
        [b"2", b""],
        [b"1", b"", b"3", b"4"],
        [b"1 2", b"3"],
        [b" 1", b"3"],
        [b"-1", b"2"],
        [b"+1", b"2"],
        [b"0x1", b"2"],
        [b"1e3", b"2"],
        [b"1.5", b"2"],
    ],
)
def test_open_fields_are_plain_as_the_script_joins_them(fields: list[bytes]) -> None:
    """The held reads pass an open hash's text on as it is only when every field is what
    ``read_blocks.lua`` joins as it is: 1 to 18 digits, nothing else."""
    plain = all(f.isdigit() and 1 <= len(f) <= 18 for f in fields)
    assert block_reading._plain(fields, b" ".join(fields)) == plain
