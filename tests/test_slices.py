"""Slice arithmetic (pure)."""

from __future__ import annotations

from slicecount.core.slices import oldest_kept, slice_start, slice_starts


def test_slices_start_on_multiples_of_their_precision() -> None:
    assert slice_start(119.9, 60) == 60 and slice_start(120, 60) == 120
    assert list(slice_starts(60, 59, 121)) == [0, 60, 120]
    assert list(slice_starts(5, 10, 10)) == [10]


def test_retention_keeps_the_current_slice_and_the_ones_before() -> None:
    assert oldest_kept(60, 120, 7230) == 7200 - 119 * 60
    assert oldest_kept(1, 1, 10.5) == 10
