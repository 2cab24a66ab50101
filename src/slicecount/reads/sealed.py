"""Sealed frames held between refreshes, so that a refresh reads from Redis only what changed.

A block's frames change only with its generation (``core/blocks.py``: every rewrite, by a
cleaner's pass or a late count it seals, writes a new one; a new block starts at a random
one, so a block trimmed away and written again does not take up an old one's). A read tells
``read_blocks.lua`` the generation it holds for each series; the script checks it against the
block's first bytes in the same call that reads the open hash, and leaves the frames of a
block still of that generation unread (``spans.HELD``): what the reader adds to the held
frames is the open hash of that same moment, so the counts are exact, never stale.

An entry holds the frames a read of one series at one precision got for a span of whole
frames (the frames its range overlaps, whether the block had them or not): a later read of a
range within that span, a window moved by the refresh interval, can use them. Entries are the
frames' compressed bytes (``decoding`` inflates them once, by those bytes), least recently
used first out past ``max_bytes``.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slicecount.core.frames import FRAME_SLICES
from slicecount.core.spans import HELD, LENGTH, META, Spans

ENTRY_BYTES = 200
"""What an entry costs besides its frames' bytes (its key, the record, the dict's slot)."""


@dataclass(frozen=True)
class Held:
    """The frames of one series' block of ``generation`` over the frames ``[lo, hi)`` (their
    starts, seconds): ``lengths`` packed ``<i4`` each, the first frame starting at
    ``start``, their bytes end to end."""

    generation: int
    lo: int
    hi: int
    start: int
    lengths: bytes
    frames: bytes

    @property
    def size(self) -> int:
        return len(self.lengths) + len(self.frames) + ENTRY_BYTES


def frame_span(precision: int, first: int, end: int) -> tuple[int, int]:
    """The starts of the first frame over ``[first, end)`` and of the frame after the last."""
    period = precision * FRAME_SLICES
    return first - first % period, end + (-end) % period


class SealedFrames:
    """The frames held, by series id and precision read, within ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.reused = 0
        """Series whose frames a read did not fetch (what the tests and benchmarks count)."""
        self.fetched = 0
        """Series whose frames a read fetched."""
        self._held: OrderedDict[tuple[str, int], Held] = OrderedDict()

    def __len__(self) -> int:
        return len(self._held)

    def lookup(self, ids: Sequence[str], precision: int, first: int, end: int) -> dict[str, Held]:
        """The entries a read of ``ids`` over ``[first, end)`` can use (its span within
        theirs). The read gets these themselves: an entry evicted while it waits for Redis is
        still the one it said it holds."""
        lo, hi = frame_span(precision, first, end)
        found = {}
        for series_id in ids:
            entry = self._held.get((series_id, precision))
            if entry is not None and entry.lo <= lo and hi <= entry.hi:
                found[series_id] = entry
        return found

    def completed(
        self, spans: Spans, held: Mapping[str, Held], precision: int, first: int, end: int
    ) -> Spans:
        """``spans`` with the frames of the series it did not read put back from ``held``,
        and the frames it read held for the next reads (the series with a block)."""
        lo, hi = frame_span(precision, first, end)
        meta, lengths, frames = [], [], []
        frame = at = 0
        for series_id, (start, count, opened, generation) in zip(
            spans.ids, META.iter_unpack(spans.meta), strict=True
        ):
            key = (series_id, precision)
            if count == HELD:
                entry = held[series_id]
                self.reused += 1
                if key in self._held:
                    self._held.move_to_end(key)
                count = len(entry.lengths) // LENGTH.size
                meta.append(META.pack(entry.start, count, opened, generation))
                lengths.append(entry.lengths)
                frames.append(entry.frames)
                continue
            mine = spans.lengths[frame * LENGTH.size : (frame + count) * LENGTH.size]
            size = sum(struct.unpack(f"<{count}i", mine))
            data = spans.frames[at : at + size]
            frame, at = frame + count, at + size
            meta.append(META.pack(start, count, opened, generation))
            lengths.append(mine)
            frames.append(data)
            self.fetched += 1
            kept = self._held.get(key)
            if (
                kept is not None
                and kept.generation == generation
                and kept.lo <= lo <= hi <= kept.hi
            ):
                self._held.move_to_end(key)  # what it holds covers this read's span too
            elif generation:
                self._hold(key, Held(generation, lo, hi, start, mine, data))
        joined = b"".join
        return Spans(spans.ids, joined(meta), joined(lengths), joined(frames), spans.opened)

    def _hold(self, key: tuple[str, int], entry: Held) -> None:
        old = self._held.pop(key, None)
        if old is not None:
            self.size -= old.size
        if entry.size > self.max_bytes:
            return
        self._held[key] = entry
        self.size += entry.size
        while self.size > self.max_bytes:
            _, dropped = self._held.popitem(last=False)
            self.size -= dropped.size
