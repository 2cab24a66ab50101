"""What many series hold for one range, packed as the store's ``read_blocks`` script returns it.

A dashboard's read names thousands of series; a reply of four items a series (nested
arrays, a list of lengths, a list of open pairs) cost more to parse in Python than Redis took
to make it. The script packs each call's answer into four strings instead: per series its
first frame's start, how many frames and open pairs it has and its block's generation
(``META``; frames -1: not read, the reader holds them, ``reads/sealed.py``); every frame's byte
length (``LENGTH``); the frames' bytes end to end (all little-endian); the open (second,
count) pairs as decimal text, space-separated (the hash's own strings joined, which is what
a script does fastest). The datasource reads them as arrays (``reads/decoding.py``); ``each``
unpacks them into one ``Stored`` a series for Python. Pure.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from slicecount.core.blocks import Stored

META = struct.Struct("<qiiI")
"""Per series: the start (second) of its first frame returned, its frames (-1: not read, the
block is the generation the reader said it holds), its open pairs, its block's generation (0:
no block)."""
HELD = -1
"""``META``'s frames of a series whose frames were not read: the reader holds them."""
LENGTH = struct.Struct("<i")


@dataclass(frozen=True)
class Spans:
    """The series ``ids`` in reply order and what each holds, packed (see the module)."""

    ids: list[str]
    meta: bytes
    lengths: bytes
    frames: bytes
    opened: bytes

    @classmethod
    def joined(cls, ids: list[str], replies: Iterable[Sequence[bytes]]) -> Spans:
        """The packed replies of several script calls (their series ``ids``, end to end)."""
        columns = list(zip(*replies, strict=True)) or [()] * 4  # no call: no series
        meta, lengths, frames = (b"".join(parts) for parts in columns[:3])
        return cls(ids, meta, lengths, frames, b" ".join(p for p in columns[3] if p))

    @classmethod
    def of(cls, found: Mapping[str, Stored]) -> Spans:
        """``found`` packed as the script packs it."""
        meta, lengths, frames, opened = [], [], [], []
        for one in found.values():
            meta.append(META.pack(one.start, len(one.lengths), len(one.open), 0))
            lengths += [LENGTH.pack(n) for n in one.lengths]
            frames.append(one.frames)
            opened += [f"{s} {n}".encode() for s, n in one.open.items()]
        joined = b"".join
        return cls(list(found), joined(meta), joined(lengths), joined(frames), b" ".join(opened))

    def each(self) -> dict[str, Stored]:
        """One ``Stored`` a series (ValueError for a series whose frames were held, not read:
        a reader that holds frames puts them back first)."""
        lengths = [n for (n,) in LENGTH.iter_unpack(self.lengths)]
        numbers = [int(n) for n in self.opened.split()]
        pairs = list(zip(numbers[::2], numbers[1::2], strict=True))
        out: dict[str, Stored] = {}
        frame, pair, at = 0, 0, 0
        for series_id, (start, frames, opened, _) in zip(
            self.ids, META.iter_unpack(self.meta), strict=True
        ):
            if frames == HELD:
                raise ValueError(f"the frames of {series_id!r} were held, not read")
            mine = lengths[frame : frame + frames]
            size = sum(mine)
            data = self.frames[at : at + size]
            out[series_id] = Stored(start, mine, data, dict(pairs[pair : pair + opened]))
            frame, pair, at = frame + frames, pair + opened, at + size
        return out
