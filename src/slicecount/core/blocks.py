"""Compact blocks: a series' sealed slices, at every precision, in one Redis STRING. Pure.

The blocks layout keeps the slices still open to writers in a small hash per series (``open:``)
and moves the sealed ones here (the cleaner: ``operations/compacting.py``). One key per series
keeps the ~180 bytes Redis spends on a key paid once; frames keep a read to the bytes its range
needs (``GETRANGE``); deflated byte planes make a quiet slice cost next to nothing (measured on
the seeded traffic of a 40-route app: 0.25 byte a 5 s slice, 0.12 a 1 s slice).

Layout (little-endian; varint: LEB128, 7 bits a byte)::

    header    b"SB", version u8 (2), sections u8, generation u32,
              header length u16 (these 10 bytes, the sections and the lengths)
    section   precision, first // period, frames: 3 varints
    lengths   a varint per frame, section by section
    frames    section by section, oldest first

(The header of a 2 h old series is ~50 bytes: fixed-width fields took ~100, 8 % of the bytes
of a 40-route app's history.)

Section k holds the slices of one precision in frames of ``period`` seconds (``FRAME_SLICES``
slices), frame i covering ``[first + i * period, first + (i + 1) * period)``. A frame of length
0 is all zeros. A frame's first byte is its width w (1, 2, 4 or 8): the rest is a raw deflate
stream of w byte planes of the zigzagged values (byte 0 of every slice, then byte 1, ...), so a
run of small counts compresses like the zeros around it. ``generation`` changes with every
rewrite: the compare-and-set token of a cleaner's splice (``Splice``).
"""

from __future__ import annotations

import functools
import struct
import sys
import zlib
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

MAGIC = b"SB"
VERSION = 2
HEADER = struct.Struct("<2sBBIH")
FRAME_SLICES = 720
"""Slices in one frame: 1 h of 5 s slices, 12 h of 60 s. A read of a range decodes at most the
frames it overlaps; a cleaner's pass rewrites only the frames it adds to."""
MAX_FRAME = 0xFFFF
"""A frame's length is a u16: 720 values of 8 bytes, deflated, always fit."""
WIDTHS = (1, 2, 4, 8)
_MASK = (1 << 64) - 1


class BlockError(ValueError):
    """Bytes that are not a block of this format (a foreign value under a block key)."""


@dataclass
class Section:
    """The frames of one precision: where they start and each one's length in bytes."""

    precision: int
    first: int = 0
    lengths: list[int] = field(default_factory=list)

    @property
    def period(self) -> int:
        return self.precision * FRAME_SLICES

    def frame_start(self, index: int) -> int:
        return self.first + index * self.period

    def index_of(self, t: int) -> int:
        """The frame holding second ``t`` (negative or past the end: outside the section)."""
        return (t - self.first) // self.period


@dataclass
class Header:
    """What a block holds, read from its first bytes: enough to find any frame's bytes."""

    generation: int = 0
    sections: list[Section] = field(default_factory=list)

    @property
    def size(self) -> int:
        """Bytes of the header and the lengths: where the first frame starts."""
        return HEADER.size + len(self._body())

    def section(self, precision: int) -> Section | None:
        for section in self.sections:
            if section.precision == precision:
                return section
        return None

    def offset(self, precision: int, index: int) -> int:
        """Byte offset of frame ``index`` of ``precision``'s section in the block."""
        at = self.size
        for section in self.sections:
            if section.precision == precision:
                return at + sum(section.lengths[:index])
            at += sum(section.lengths)
        raise KeyError(precision)

    def frames(self, precision: int, start: int, end: int) -> tuple[int, int, int, int]:
        """``(first index, count, byte offset, byte length)`` of the frames of ``precision``
        that overlap ``[start, end)`` (count 0 when none is stored there)."""
        section = self.section(precision)
        if section is None or not section.lengths or end <= start:
            return 0, 0, 0, 0
        lo = max(0, section.index_of(start))
        hi = min(len(section.lengths), section.index_of(end - 1) + 1)
        if hi <= lo:
            return 0, 0, 0, 0
        offset = self.offset(precision, lo)
        return lo, hi - lo, offset, sum(section.lengths[lo:hi])

    def _body(self) -> bytes:
        numbers: list[int] = []
        for s in self.sections:
            numbers += (s.precision, s.first // s.period, len(s.lengths))
        for s in self.sections:
            numbers += s.lengths
        return _varints(numbers)

    def pack(self) -> bytes:
        body = self._body()
        generation, size = self.generation & 0xFFFFFFFF, HEADER.size + len(body)
        return HEADER.pack(MAGIC, VERSION, len(self.sections), generation, size) + body


def _varints(numbers: Iterable[int]) -> bytes:
    out = bytearray()
    for n in numbers:
        while n >= 0x80:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)
    return bytes(out)


def _read_varints(data: bytes, at: int, count: int) -> tuple[list[int], int]:
    """``count`` varints from ``data[at:]``, and where they end."""
    out = []
    try:
        for _ in range(count):
            n = shift = 0
            while True:
                byte = data[at]
                at += 1
                n |= (byte & 0x7F) << shift
                if byte < 0x80:
                    break
                shift += 7
            out.append(n)
    except IndexError:
        raise BlockError("a block header cut short") from None
    return out, at


def header_size(prefix: bytes) -> int:
    """Bytes needed to parse the header of a block starting with ``prefix``: ``HEADER.size``
    until those are in ``prefix``, then the whole header and lengths."""
    if len(prefix) < HEADER.size:
        return HEADER.size
    _check(prefix)
    return int(HEADER.unpack_from(prefix)[4])


def parse_header(prefix: bytes) -> Header:
    """The header of a block from its first ``header_size(prefix)`` bytes (or more); an empty
    value is an empty block. BlockError for anything else."""
    if not prefix:
        return Header()
    count = _check(prefix)
    if len(prefix) < header_size(prefix):
        raise BlockError(f"a block header needs {header_size(prefix)} bytes, got {len(prefix)}")
    _, _, _, generation, size = HEADER.unpack_from(prefix)
    triples, at = _read_varints(prefix, HEADER.size, 3 * count)
    sections = []
    for k in range(count):
        precision, first_index, frames = triples[3 * k : 3 * k + 3]
        if precision <= 0:
            raise BlockError(f"section {k} has precision {precision}")
        lengths, at = _read_varints(prefix, at, frames)
        if any(n > MAX_FRAME for n in lengths):
            raise BlockError(f"section {k} has a frame longer than {MAX_FRAME} bytes")
        sections.append(Section(precision, first_index * precision * FRAME_SLICES, lengths))
    if at != size:
        raise BlockError(f"a block header of {at} bytes says it has {size}")
    return Header(generation, sections)


def _check(prefix: bytes) -> int:
    if len(prefix) < HEADER.size:
        raise BlockError(f"not a slicecount block (starts {bytes(prefix[:4])!r})")
    magic, version, count, _, _ = HEADER.unpack_from(prefix)
    if magic != MAGIC or version != VERSION:
        raise BlockError(f"not a slicecount block (starts {bytes(prefix[:4])!r})")
    return int(count)


# -- frames -------------------------------------------------------------------------------


def encode_frame(values: Sequence[int]) -> bytes:
    """One frame's bytes (empty when every value is 0)."""
    if not any(values):
        return b""
    raw, top = _zigzag(values)
    width = next(w for w in WIDTHS if top < 1 << (8 * w))
    planes = b"".join(raw[i::8] for i in range(width))
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = bytes((width,)) + packer.compress(planes) + packer.flush()
    if len(data) > MAX_FRAME:
        raise BlockError(f"a frame of {len(values)} values took {len(data)} bytes")
    return data


def decode_frame(data: bytes, slices: int = FRAME_SLICES) -> list[int]:
    """The ``slices`` values of one frame."""
    if not data:
        return [0] * slices
    width = data[0]
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


# -- reading ------------------------------------------------------------------------------


class Stored(NamedTuple):
    """What a read found of one series at one precision: the bytes of the frames its range
    overlaps (``lengths``: each one's, the first starting at second ``start``) and its open
    slices in the range (second -> n). ``slices_in`` (here) or the datasource's numpy
    ``slices_matrix`` turns it into counts."""

    start: int
    lengths: Sequence[int]
    frames: bytes
    open: Mapping[int, int]


NOTHING_STORED = Stored(0, (), b"", {})


def span(data: bytes, precision: int, start: int, end: int) -> Stored:
    """What a whole block ``data`` holds for the slices of ``precision`` from ``start`` to
    ``end``: the frames over them, as the store's ``read_blocks`` script returns them (no
    open slices). BlockError for bytes that are not a block."""
    header = parse_header(data)
    lo, count, offset, length = header.frames(precision, start, end)
    section = header.section(precision)
    if not count or section is None:
        return NOTHING_STORED
    lengths = section.lengths[lo : lo + count]
    return Stored(section.frame_start(lo), lengths, data[offset : offset + length], {})


def slices_in(found: Stored, precision: int, start: int, end: int) -> list[int]:
    """Counts of the slices of ``precision`` from ``start`` to ``end`` (slice starts, ``end``
    excluded) held by ``found``'s frames (its open slices are not added). Slices outside
    them count 0."""
    out = [0] * max(0, (end - start) // precision)
    period = precision * FRAME_SLICES
    at, frame_start = 0, found.start
    for length in found.lengths:
        lo, hi = max(start, frame_start), min(end, frame_start + period)
        if length and lo < hi:
            values = decode_frame(found.frames[at : at + length])
            skip, first = (lo - frame_start) // precision, (lo - start) // precision
            count = (hi - lo) // precision
            out[first : first + count] = values[skip : skip + count]
        at += length
        frame_start += period
    return out


def everything(data: bytes) -> dict[int, dict[int, int]]:
    """Every nonzero slice of a whole block: precision -> slice start -> count."""
    header = parse_header(data)
    found: dict[int, dict[int, int]] = {}
    at = header.size
    for section in header.sections:
        slices = found.setdefault(section.precision, {})
        for index, length in enumerate(section.lengths):
            if length:
                start = section.frame_start(index)
                for k, n in enumerate(decode_frame(data[at : at + length])):
                    if n:
                        slices[start + k * section.precision] = n
            at += length
    return found


# -- rewriting: what a cleaner's pass changes, spliced into the block ------------------------


Piece = tuple[int, int] | bytes
"""A piece of a rewritten block: ``(offset, length)`` kept from the old one, or new bytes."""


@dataclass
class Splice:
    """A rewrite of a block as pieces of the old one and new bytes: what the cleaner's script
    applies if the block's generation is still ``expected`` (0: no block yet)."""

    expected: int
    pieces: list[Piece]

    def apply(self, old: bytes) -> bytes:
        """The new block (what the Lua script builds, in Python: for tests and the book)."""
        return b"".join(p if isinstance(p, bytes) else old[p[0] : p[0] + p[1]] for p in self.pieces)


def plan_splice(
    header: Header,
    precisions: Sequence[int],
    changed: Mapping[tuple[int, int], Sequence[int]],
    keep_from: Mapping[int, int],
) -> Splice:
    """The splice that writes ``changed`` frames (``(precision, frame start)`` -> its values,
    whole) into a block whose header is ``header``, drops each section's frames that end at
    or before ``keep_from[precision]`` (retention), and lays the sections out in the order of
    ``precisions`` (the ladder's; a precision no longer in it is dropped). Frames neither
    changed nor dropped are kept as byte ranges of the old block: nothing else is decoded."""
    new_sections: list[Section] = []
    frame_pieces: list[Piece] = []
    old_at = {s.precision: header.offset(s.precision, 0) for s in header.sections}
    for precision in precisions:
        old = header.section(precision) or Section(precision)
        period, cutoff = old.period, keep_from.get(precision, 0)
        stored = [old.frame_start(i) for i, n in enumerate(old.lengths) if n]
        fresh = [start for p, start in changed if p == precision]
        live = [start for start in stored + fresh if start + period > cutoff]
        if not live:
            new_sections.append(Section(precision))
            continue
        section = Section(precision, min(live))
        at = old_at.get(precision, 0)
        for start in range(min(live), max(live) + period, period):
            index = old.index_of(start) if old.lengths else -1
            if (precision, start) in changed:
                data = encode_frame(changed[(precision, start)])
                if data:
                    frame_pieces.append(data)
                section.lengths.append(len(data))
            elif 0 <= index < len(old.lengths) and old.lengths[index]:
                length = old.lengths[index]
                frame_pieces.append((at + sum(old.lengths[:index]), length))
                section.lengths.append(length)
            else:
                section.lengths.append(0)
        _trim_zero_ends(section)
        new_sections.append(section)
    # the next generation, never 0 (0 stands for "no block" in the cleaner's compare-and-set)
    new_header = Header(header.generation % 0xFFFFFFFF + 1, new_sections)
    return Splice(header.generation, [new_header.pack(), *frame_pieces])


def _trim_zero_ends(section: Section) -> None:
    """Empty frames at either end of a section cost two bytes each for nothing."""
    while section.lengths and not section.lengths[-1]:
        section.lengths.pop()
    lead = 0
    while lead < len(section.lengths) and not section.lengths[lead]:
        lead += 1
    if lead:
        del section.lengths[:lead]
        section.first += lead * section.period
    if not section.lengths:
        section.first = 0


def is_empty(header: Header) -> bool:
    return not any(any(s.lengths) for s in header.sections)


def add_counts(
    frames: dict[tuple[int, int], list[int]],
    precisions: Iterable[int],
    counts: Mapping[int, int],
) -> None:
    """Add open slices (``counts``: second -> n, at the finest precision) into ``frames``
    ((precision, frame start) -> values) of every precision. A frame the block already holds
    must be in ``frames`` decoded first; a missing one starts at zeros."""
    for precision in precisions:
        period = precision * FRAME_SLICES
        for second, n in counts.items():
            start = second - second % period
            values = frames.get((precision, start))
            if values is None:
                values = frames[(precision, start)] = [0] * FRAME_SLICES
            values[(second - start) // precision] += n
