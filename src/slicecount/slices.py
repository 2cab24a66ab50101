"""Time slice arithmetic shared by the writer, the reader and the cleaner. Pure."""

from __future__ import annotations


def slice_start(t: float, precision: int) -> int:
    """Start (epoch seconds) of the slice of length ``precision`` that holds time ``t``."""
    return int(t // precision) * precision


def slice_starts(precision: int, start: float, end: float) -> range:
    """Every slice start from the slice holding ``start`` up to the one holding ``end``."""
    first = slice_start(start, precision)
    return range(first, slice_start(end, precision) + 1, precision)
