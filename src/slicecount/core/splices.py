"""A block rewritten: what a cleaner's pass changes, spliced into the old bytes. Pure.

The cleaner (``operations/compacting.py``) decodes only the frames its moves add to, plans the
new block as byte ranges kept from the old one and the frames it encodes anew, and its script
applies that plan if the block's generation is still the one it read (``core/blocks.py``).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from slicecount.core.blocks import Header, Section
from slicecount.core.frames import FRAME_SLICES, encode_frame

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
    new_header = Header(next_generation(header.generation), new_sections)
    return Splice(header.generation, [new_header.pack(), *frame_pieces])


def next_generation(generation: int) -> int:
    """The generation of a block rewritten from one of ``generation``: the next, never 0 (0
    stands for "no block" in the cleaner's compare-and-set), and for a new block (0) a random
    one: a block trimmed away and written again must not take up its old generations, which a
    reader may hold frames of (``reads/sealed.py``)."""
    if generation == 0:
        return secrets.randbelow(0xFFFFFFFF) + 1
    return generation % 0xFFFFFFFF + 1


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


def add_counts(
    frames: dict[tuple[int, int], list[int]], precisions: Iterable[int], counts: Mapping[int, int]
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
