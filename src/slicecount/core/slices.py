"""Time slice arithmetic shared by the writer, the reader and the cleaner. Pure."""

from __future__ import annotations


def slice_start(t: float, precision: int) -> int:
    """Start (epoch seconds) of the slice of length ``precision`` that holds time ``t``."""
    return int(t // precision) * precision


def slice_starts(precision: int, start: float, end: float) -> range:
    """Every slice start from the slice holding ``start`` up to the one holding ``end``."""
    first = slice_start(start, precision)
    return range(first, slice_start(end, precision) + 1, precision)


def oldest_kept(precision: int, retention: int, now: float) -> int:
    """Start of the oldest slice inside retention at ``now``: the current slice and the
    ``retention - 1`` before it are kept."""
    return slice_start(now, precision) - (retention - 1) * precision
