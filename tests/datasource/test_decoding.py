"""The datasource's numpy decoding of blocks agrees with the codec's own (core/frames.py)."""

from __future__ import annotations

import random
import zlib
from dataclasses import astuple

import pytest

from slicecount.core import blocks, splices
from slicecount.core.blocks import NOTHING_STORED, BlockError, Header
from slicecount.core.frames import FRAME_SLICES, SPARSE, decode_frame, encode_frame, varints
from slicecount.core.spans import Spans
from slicecount.reads import decoding
from slicecount.reads.decoding import decode_frames, slices_matrix

T0 = 1_700_000_000 - 1_700_000_000 % 3600
LADDER = (1, 5, 60)


def block_of(counts: dict[int, int]) -> bytes:
    frames: dict[tuple[int, int], list[int]] = {}
    splices.add_counts(frames, LADDER, counts)
    return splices.plan_splice(Header(), LADDER, frames, {}).apply(b"")


def by_slices(counts: dict[int, int], precision: int, start: int, end: int) -> list[int]:
    out = [0] * ((end - start) // precision)
    for t, n in counts.items():
        column = (t - t % precision - start) // precision
        if 0 <= column < len(out):
            out[column] += n
    return out


def test_frames_decode_as_the_codec_decodes_them() -> None:
    rng = random.Random(2)
    values = [
        [
            rng.choice((0, 0, 1, 2, 300, 70_000, -3, 2**40, 2**63 - 1, -(2**63)))
            for _ in range(FRAME_SLICES)
        ]
        for _ in range(40)
    ] + [[0] * FRAME_SLICES]
    few = [dict.fromkeys(rng.sample(range(FRAME_SLICES), k), 0) for k in (1, 2, 5, 30)]
    for extreme in (1, -1, 300, -(2**63), 2**63 - 1):
        for slices in few:  # a few counts, the first and last slices among them
            one = [0] * FRAME_SLICES
            for at in [*slices, 0, FRAME_SLICES - 1]:
                one[at] = rng.choice((extreme, 1, 2))
            values.append(one)
    frames = [encode_frame(v) for v in values]
    assert sum(f[:1] == bytes((SPARSE,)) for f in frames) >= 15  # the few counts are listed
    decoded = decode_frames(frames)
    assert decoded.tolist() == [decode_frame(f) for f in frames] == values


def test_a_frame_with_a_few_counts_lists_them() -> None:
    """A frame with a few counts is its nonzero slices listed, shorter than deflated planes
    (deflate's own block cost 16-18 bytes a frame of an hour or a day)."""
    values = [0] * FRAME_SLICES
    values[3], values[400], values[719] = 2, 1, 5
    listed = encode_frame(values)  # (gap, zigzagged value): 3 zeros then 2, 396 then 1 ...
    assert listed == bytes((SPARSE,)) + varints([3, 4, 396, 2, 318, 10])
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)  # its one byte plane, deflated
    planes = packer.compress(bytes(2 * n for n in values)) + packer.flush()
    assert len(listed) == 9 < 1 + len(planes)
    assert decode_frame(listed) == values
    values[:300] = [7] * 300  # dense: deflated planes again
    assert encode_frame(values)[0] == 1 and decode_frame(encode_frame(values)) == values


@pytest.mark.parametrize(
    "frame",
    [
        b"\x03abc",  # no such width
        b"\x01\x00\x00",  # planes that do not inflate
        bytes((SPARSE,)) + b"\x80",  # a varint cut short
        bytes((SPARSE,)) + varints([1, 2, 3]),  # a slice without its value
        bytes((SPARSE,)) + varints([FRAME_SLICES, 2]),  # a slice past the frame
        bytes((SPARSE,)) + varints([700, 2, 30, 2]),  # the second past it
        bytes((SPARSE,)) + varints([3]) + b"\xff" * 10 + b"\x01",  # a value past 64 bits
    ],
)
def test_a_bad_frame_is_a_block_error(frame: bytes) -> None:
    with pytest.raises(BlockError):
        decode_frames([frame])
    with pytest.raises(BlockError):
        decode_frame(frame)


@pytest.mark.parametrize("precision", LADDER)
def test_a_span_of_blocks_and_open_slices_reads_as_the_codec_and_the_hash_add_up(
    precision: int,
) -> None:
    rng = random.Random(precision)
    stored, truths = [], []
    start, end = T0 + 600, T0 + 600 + precision * 900
    for _ in range(6):
        sealed = {T0 + i: rng.randint(0, 4) for i in range(0, 9000, rng.choice((1, 3, 17)))}
        late = {T0 + rng.randrange(9000): rng.randint(1, 9) for _ in range(5)}
        found = blocks.span(block_of(sealed), precision, start, end)
        stored.append(found._replace(open=late))
        only_sealed = by_slices(sealed, precision, start, end)
        late_slices = by_slices(late, precision, start, end)
        by_slice = [a + b for a, b in zip(only_sealed, late_slices, strict=True)]
        truths.append(by_slice)
        assert blocks.slices_in(found, precision, start, end) == only_sealed
    stored.append(NOTHING_STORED._replace(open={start: 7}))
    truths.append([7] + [0] * ((end - start) // precision - 1))
    packed = Spans.of({f"s{i}": one for i, one in enumerate(stored)})
    assert Spans.joined(packed.ids, [astuple(packed)[1:]]) == packed
    assert Spans.joined([], []) == Spans.of({}) and Spans.of({}).each() == {}
    assert list(packed.each().values()) == [s._replace(lengths=list(s.lengths)) for s in stored]
    assert slices_matrix(packed, precision, start, end).tolist() == truths


@pytest.mark.slow
def test_any_range_and_sum_of_slices_reads_as_the_codec_adds_up() -> None:
    """Ranges inside one frame, across two and across many, at every precision and summed
    by every group that divides a frame: only the frames' slices in range are decoded."""
    rng = random.Random(11)
    history = 3 * 3600
    series = [
        {T0 + i: rng.choice((1, 2, 300, 70_000, -3)) for i in range(0, history, rng.choice((1, 7)))}
        for _ in range(5)
    ] + [{T0 + rng.randrange(history): rng.choice((1, 5, -2)) for _ in range(k)} for k in (3, 9)]
    stored_blocks = [block_of(counts) for counts in series]
    for _ in range(60):
        precision = rng.choice(LADDER)
        group = rng.choice([g for g in (1, 2, 3, 4, 5, 12, 15, 60) if FRAME_SLICES % g == 0])
        wide = precision * group
        first = T0 + rng.randrange(0, history, wide) // wide * wide
        end = first + wide * rng.choice((1, 2, 7, 59, 60, 61, 719, 720, 721, 1500))
        found = Spans.of({str(i): blocks.span(b, precision, first, end)
                          for i, b in enumerate(stored_blocks)})  # fmt: skip
        expected = [by_slices(counts, wide, first, end) for counts in series]
        assert slices_matrix(found, precision, first, end, group).tolist() == expected, (
            precision,
            group,
            first - T0,
            end - first,
        )


def test_decoded_frames_are_remembered_within_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(5)
    values = [[rng.randint(0, 300) for _ in range(FRAME_SLICES)] for _ in range(40)]
    for k in range(40):  # and listed ones
        values.append([0] * FRAME_SLICES)
        values[-1][k] = values[-1][-k] = k + 1
    frames = [encode_frame(v) for v in values]
    assert {f[0] for f in frames} == {2, SPARSE}
    monkeypatch.setattr(decoding, "_decoded_frames", {})
    monkeypatch.setattr(decoding, "_decoded_size", [0])
    monkeypatch.setattr(decoding, "DECODED_BYTES", 20 * 2 * FRAME_SLICES)  # half of them
    for _ in range(3):  # decoded, then remembered (or decoded again past the bound)
        assert decode_frames(frames).tolist() == values
        assert 0 < decoding._decoded_size[0] <= decoding.DECODED_BYTES
        assert len(decoding._decoded_frames) <= 60
    for remembered in decoding._decoded_frames:
        read = decoding._listed if remembered[0] == SPARSE else decoding._inflated
        assert read(remembered) is decoding._decoded_frames[remembered]
    with pytest.raises(BlockError, match="inflate"):  # a bad frame is never remembered
        decode_frames([b"\x01\xff\xff\xff"])
