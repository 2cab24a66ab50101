"""Blocks decoded with numpy: every frame a read touches, in a few array operations.

``core/blocks.py`` decodes a frame in Python (the cleaner and ``Store.get`` need no numpy);
a dashboard's read touches thousands of frames (a 24 h panel of 2 000 series at 5 s: 48 000),
so the datasource inflates them one by one (zlib, in C) and rebuilds their values for all of
them at once: the byte planes of every frame of one width are one array.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from slicecount.core.blocks import FRAME_SLICES, WIDTHS, BlockError, Stored
from slicecount.errors import MissingExtra

try:
    import numpy as np
    import numpy.typing as npt
except ModuleNotFoundError as exc:
    raise MissingExtra("datasource", exc, "the datasource") from exc

Matrix = npt.NDArray[np.int64]


def decode_frames(frames: Sequence[bytes]) -> Matrix:
    """The values of each frame, one row each (an empty frame: zeros)."""
    out = np.zeros((len(frames), FRAME_SLICES), dtype=np.uint64)
    by_width: dict[int, list[int]] = {}
    for row, data in enumerate(frames):
        if data:
            by_width.setdefault(data[0], []).append(row)
    for width, rows in by_width.items():
        if width not in WIDTHS:
            raise BlockError(f"a frame of width {width}")
        try:
            raw = b"".join(zlib.decompress(frames[r][1:], -15) for r in rows)
        except zlib.error as exc:
            raise BlockError(f"a frame that does not inflate: {exc}") from None
        if len(raw) != len(rows) * width * FRAME_SLICES:
            raise BlockError("a frame that does not hold its slices")
        planes = np.frombuffer(raw, dtype=np.uint8).reshape(len(rows), width, FRAME_SLICES)
        values = planes[:, 0, :].astype(np.uint64)
        for b in range(1, width):
            values |= planes[:, b, :].astype(np.uint64) << np.uint64(8 * b)
        out[rows] = values
    # zigzag back: (z >> 1) ^ -(z & 1)
    signs: Matrix = -(out & np.uint64(1)).view(np.int64)
    halves: Matrix = (out >> np.uint64(1)).view(np.int64)
    return halves ^ signs


def slices_matrix(stored: Sequence[Stored], precision: int, start: int, end: int) -> Matrix:
    """Counts per series (rows, in ``stored``'s order) and slice of ``precision`` from
    ``start`` to ``end`` (slice starts, ``end`` excluded): their blocks' frames plus their
    open slices."""
    slices = max(0, (end - start) // precision)
    out = np.zeros((len(stored), slices), dtype=np.int64)
    if not slices:
        return out
    wanted: list[bytes] = []
    where: list[tuple[int, int]] = []  # (row, frame start) of each frame in ``wanted``
    period = precision * FRAME_SLICES
    for row, found in enumerate(stored):
        at, frame_start = 0, found.start
        for length in found.lengths:
            if length:
                wanted.append(found.frames[at : at + length])
                where.append((row, frame_start))
            at += length
            frame_start += period
    if wanted:
        values = decode_frames(wanted)
        for k, (row, frame_start) in enumerate(where):
            lo, hi = max(start, frame_start), min(end, frame_start + period)
            if lo < hi:
                a, b = (lo - frame_start) // precision, (hi - frame_start) // precision
                c = (lo - start) // precision
                out[row, c : c + b - a] = values[k, a:b]
    for row, found in enumerate(stored):
        for second, n in found.open.items():
            column = (second - second % precision - start) // precision
            if 0 <= column < slices:
                out[row, column] += n
    return out
