"""A frame's codec (core/frames.py): values to deflated byte planes and back. Pure."""

from __future__ import annotations

import random

import pytest

from slicecount.core.frames import FRAME_SLICES, BlockError, decode_frame, encode_frame


@pytest.mark.parametrize(
    "values",
    [
        [0] * FRAME_SLICES,
        [1] * FRAME_SLICES,
        [(-1) ** i * i for i in range(FRAME_SLICES)],
        [2**63 - 1, -(2**63)] + [0] * (FRAME_SLICES - 2),
        [random.Random(3).randint(0, 300) for _ in range(FRAME_SLICES)],
    ],
)
def test_a_frame_decodes_to_its_values(values: list[int]) -> None:
    data = encode_frame(values)
    assert decode_frame(data) == values
    assert (data == b"") == (not any(values))


def test_quiet_slices_cost_next_to_nothing() -> None:
    rng = random.Random(5)
    sparse = [rng.choice((0, 0, 0, 0, 0, 0, 1, 2)) for _ in range(FRAME_SLICES)]
    # 720 slices of 8 bytes each stored raw would be 5 760 bytes
    assert len(encode_frame(sparse)) < 0.5 * FRAME_SLICES


def test_a_bad_frame_is_a_block_error_not_a_crash() -> None:
    with pytest.raises(BlockError, match="width"):
        decode_frame(b"\x03abc")
    with pytest.raises(BlockError, match="inflate"):
        decode_frame(b"\x01\xff\xff\xff")
