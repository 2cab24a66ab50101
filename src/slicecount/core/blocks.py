"""Compact blocks: a series' sealed slices, at every precision, in one Redis STRING. Pure.

The blocks layout keeps the slices still open to writers in a small hash per series (``open:``)
and moves the sealed ones here (the cleaner: ``operations/compacting.py``). One key per series
keeps the ~180 bytes Redis spends on a key paid once; frames keep a read to the bytes its range
needs (``GETRANGE``); deflated byte planes, or a frame's few counts listed, make a quiet slice
cost next to nothing (``core/frames.py``; the seeded traffic of a 40-route app's 2 h history
took 694 kB of blocks, 860 kB before frames could be listed).

Layout (little-endian; varint: LEB128, 7 bits a byte)::

    header    b"SB", version u8 (2), sections u8, generation u32,
              header length u16 (these 10 bytes, the sections and the lengths)
    section   precision, first // period, frames: 3 varints
    lengths   a varint per frame, section by section
    frames    section by section, oldest first

(The header of a 2 h old series is ~50 bytes: fixed-width fields took ~100, 8 % of the bytes
of a 40-route app's history.)

Section k holds the slices of one precision in frames of ``period`` seconds (``FRAME_SLICES``
slices), frame i covering ``[first + i * period, first + (i + 1) * period)``; a frame's bytes
are ``core/frames.py``'s (length 0: all zeros). ``generation`` changes with every rewrite: the
compare-and-set token of a cleaner's splice (``core/splices.py``).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

# BlockError re-exported: what a reader of blocks catches, whichever part found the bytes bad
from slicecount.core.frames import FRAME_SLICES, MAX_FRAME, decode_frame, read_varints, varints
from slicecount.core.frames import BlockError as BlockError

MAGIC = b"SB"
VERSION = 2
HEADER = struct.Struct("<2sBBIH")


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
        return varints(numbers)

    def pack(self) -> bytes:
        body = self._body()
        generation, size = self.generation & 0xFFFFFFFF, HEADER.size + len(body)
        return HEADER.pack(MAGIC, VERSION, len(self.sections), generation, size) + body


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
    triples, at = read_varints(prefix, HEADER.size, 3 * count)
    sections = []
    for k in range(count):
        precision, first_index, frames = triples[3 * k : 3 * k + 3]
        if precision <= 0:
            raise BlockError(f"section {k} has precision {precision}")
        lengths, at = read_varints(prefix, at, frames)
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


# -- reading ------------------------------------------------------------------------------


class Stored(NamedTuple):
    """What a read found of one series at one precision: the bytes of the frames its range
    overlaps (``lengths``: each one's, the first starting at second ``start``) and its open
    fields (second -> n: a reader keeps those whose slice is in its range). ``slices_in``
    (here) or the datasource's numpy ``slices_matrix`` turns it into counts."""

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


def is_empty(header: Header) -> bool:
    return not any(any(s.lengths) for s in header.sections)
