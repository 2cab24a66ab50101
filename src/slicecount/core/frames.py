"""A frame's codec: the values of ``FRAME_SLICES`` slices of one precision as bytes. Pure.

A frame of all zeros is empty (0 bytes). Otherwise its first byte says how the rest holds
the values, whichever is shorter:

- a width w (1, 2, 4 or 8): a raw deflate stream of w byte planes of the zigzagged values
  (byte 0 of every slice, then byte 1, ...), so a run of small counts compresses like the
  zeros around it;
- ``SPARSE`` (0): the nonzero slices listed, a (gap, zigzagged value) pair of varints each,
  the gap the zero slices before it since the previous one. A frame with a few counts (a
  quiet series, an hour or a day of a coarse precision) took 16-18 bytes deflated: deflate's
  own block costs more than the values.

A block (``core/blocks.py``) is a header locating its frames, then the frames.
"""

from __future__ import annotations

import functools
import sys
import zlib
from array import array
from collections.abc import Iterable, Sequence
from itertools import compress

FRAME_SLICES = 720
"""Slices in one frame: 1 h of 5 s slices, 12 h of 60 s. A read of a range decodes at most the
frames it overlaps; a cleaner's pass rewrites only the frames it adds to."""
MAX_FRAME = 0xFFFF
"""A frame's length is a u16: 720 values of 8 bytes, deflated, always fit."""
WIDTHS = (1, 2, 4, 8)
SPARSE = 0
"""The first byte of a frame that lists its nonzero slices (see the module)."""
_MASK = (1 << 64) - 1


class BlockError(ValueError):
    """Bytes that are not a block of this format (a foreign value under a block key)."""


def encode_frame(values: Sequence[int]) -> bytes:
    """One frame's bytes (empty when every value is 0): its planes deflated, or its nonzero
    slices listed when that is shorter."""
    if not any(values):
        return b""
    raw, top = _zigzag(values)
    width = next(w for w in WIDTHS if top < 1 << (8 * w))
    planes = b"".join(raw[i::8] for i in range(width))
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = bytes((width,)) + packer.compress(planes) + packer.flush()
    if 2 * (len(values) - values.count(0)) < len(data):  # a listing may be shorter
        listed = _listed(values)
        if len(listed) < len(data):
            data = listed
    if len(data) > MAX_FRAME:
        raise BlockError(f"a frame of {len(values)} values took {len(data)} bytes")
    return data


def decode_frame(data: bytes, slices: int = FRAME_SLICES) -> list[int]:
    """The ``slices`` values of one frame."""
    if not data:
        return [0] * slices
    width = data[0]
    if width == SPARSE:
        out = [0] * slices
        for at, value in zip(*listed_slices(data, slices), strict=True):
            out[at] = value
        return out
    if width not in WIDTHS:
        raise BlockError(f"a frame of width {width}")
    try:
        planes = zlib.decompress(data[1:], -15)
    except zlib.error as exc:
        raise BlockError(f"a frame that does not inflate: {exc}") from None
    if len(planes) != width * slices:
        raise BlockError(f"a frame of {len(planes)} bytes for {slices} values of width {width}")
    raw = bytearray(8 * slices)
    for i in range(width):
        raw[i::8] = planes[i * slices : (i + 1) * slices]
    return _unzigzag(bytes(raw), slices)


def _listed(values: Sequence[int]) -> bytes:
    """A ``SPARSE`` frame of ``values``."""
    numbers: list[int] = []
    last = -1
    for at in compress(range(len(values)), values):
        value = values[at]
        numbers += (at - last - 1, 2 * value if value >= 0 else -2 * value - 1)
        last = at
    return bytes((SPARSE,)) + varints(numbers)


def listed_slices(data: bytes, slices: int = FRAME_SLICES) -> tuple[list[int], list[int]]:
    """The nonzero slices of a ``SPARSE`` frame: their indices and their values."""
    numbers, _ = read_varints(data, 1, -1)
    if len(numbers) % 2:
        raise BlockError("a listed frame with a slice but no value")
    at, indices, values = -1, [], []
    for gap, zigzag in zip(numbers[::2], numbers[1::2], strict=True):
        at += gap + 1
        indices.append(at)
        values.append((zigzag >> 1) ^ -(zigzag & 1))
    if at >= slices:
        raise BlockError(f"a listed frame with slice {at} of {slices}")
    return indices, values


def varints(numbers: Iterable[int]) -> bytes:
    """Non-negative integers as LEB128 varints, 7 bits a byte."""
    out = bytearray()
    for n in numbers:
        while n >= 0x80:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)
    return bytes(out)


def read_varints(data: bytes, at: int, count: int) -> tuple[list[int], int]:
    """``count`` varints from ``data[at:]`` (-1: up to the end), and where they end."""
    out: list[int] = []
    end = len(data)
    try:
        while (count < 0 and at < end) or len(out) < count:
            n = shift = 0
            while True:
                byte = data[at]
                at += 1
                n |= (byte & 0x7F) << shift
                if byte < 0x80:
                    break
                shift += 7
                if shift > 63:
                    raise BlockError("a varint of more than 64 bits")
            out.append(n)
    except IndexError:
        raise BlockError("varints cut short") from None
    return out, at


def _zigzag(values: Sequence[int]) -> tuple[bytes, int]:
    """The zigzagged values as little-endian u64s, and the largest. Counts are never
    negative in practice: then zigzag is 2v, every lane shifted left at once as one big
    integer (no lane's top bit is set, so nothing carries into the next): ~30x faster than
    per value in Python."""
    low, high = min(values), max(values)
    if low >= 0 and high < 1 << 63:
        plain = array("Q", values)
        if sys.byteorder == "big":
            plain.byteswap()
        shifted = int.from_bytes(plain.tobytes(), "little") << 1
        return shifted.to_bytes(8 * len(values), "little"), 2 * high
    zigzag = array("Q", [((v << 1) ^ (v >> 63)) & _MASK for v in values])
    top = max(zigzag)
    if sys.byteorder == "big":  # the planes are little-endian bytes
        zigzag.byteswap()
    return zigzag.tobytes(), top


def _unzigzag(raw: bytes, slices: int) -> list[int]:
    """The values of ``slices`` little-endian zigzagged u64s; all even (no negative value):
    every lane shifted right at once (no lane's low bit is set, so nothing leaks)."""
    whole = int.from_bytes(raw, "little")
    if not whole & _low_bits(slices):
        values = array("Q")
        values.frombytes((whole >> 1).to_bytes(8 * slices, "little"))
        if sys.byteorder == "big":
            values.byteswap()
        return values.tolist()
    zigzag = array("Q")
    zigzag.frombytes(raw)
    if sys.byteorder == "big":
        zigzag.byteswap()
    return [(z >> 1) ^ -(z & 1) for z in zigzag]


@functools.cache
def _low_bits(slices: int) -> int:
    """The integer with bit 0 of each of ``slices`` 64-bit lanes set."""
    return sum(1 << (64 * k) for k in range(slices))
