"""Blocks decoded with numpy: every frame a read touches, in a few array operations.

``core/frames.py`` decodes a frame in Python (the cleaner and ``Store.get`` need no numpy);
a dashboard's read touches thousands of frames (a 24 h panel of 2 000 series at 5 s: 48 000),
so the datasource inflates them one by one (zlib, in C) and rebuilds their values for all of
them at once: the byte planes of every frame of one width are one array, and frames start at
multiples of their period, so a read's matrix is (series x frames x slices) filled in one
assignment, then cut to the range.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

from slicecount.core.frames import FRAME_SLICES, SPARSE, WIDTHS, BlockError, listed_slices
from slicecount.core.spans import Spans
from slicecount.errors import extra_imports

with extra_imports("datasource", "the datasource"):
    import numpy as np
    import numpy.typing as npt

Matrix = npt.NDArray[np.int64]
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_SIGNED = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
_META = np.dtype([("start", "<i8"), ("frames", "<i4"), ("open", "<i4"), ("generation", "<u4")])
"""``spans.META`` as a numpy record."""
WHOLE = (0, FRAME_SLICES)
"""The cut of a frame read whole (``_by_width``)."""


def decode_frames(frames: Sequence[bytes]) -> Matrix:
    """The values of each frame, one row each (an empty frame: zeros)."""
    out = np.zeros((len(frames), FRAME_SLICES), dtype=np.int64)
    for rows, _, values in _by_width(frames, [WHOLE] * len(frames)):
        out[rows] = values
    return out


def _by_width(
    frames: Sequence[bytes], cuts: Sequence[tuple[int, int]]
) -> list[tuple[list[int], tuple[int, int], Matrix]]:
    """The nonempty frames grouped by width (or listed, ``SPARSE``) and cut: their indices
    in ``frames``, the cut (the slices ``lo:hi`` of each) and those slices' values. Only the
    cut is rebuilt: a 5-minute read needs a tenth of an hour's frame, and the arithmetic was
    most of its time."""
    groups: dict[tuple[int, tuple[int, int]], list[int]] = {}
    for row, data in enumerate(frames):
        if data:
            groups.setdefault((data[0], cuts[row]), []).append(row)
    decoded = []
    for (width, (lo, hi)), rows in groups.items():
        if width == SPARSE:
            decoded.append((rows, (lo, hi), _spread(frames, rows, lo, hi)))
            continue
        if width not in WIDTHS:
            raise BlockError(f"a frame of width {width}")
        try:
            raw = b"".join([_inflated(frames[r]) for r in rows])
        except zlib.error as exc:
            raise BlockError(f"a frame that does not inflate: {exc}") from None
        if len(raw) != len(rows) * width * FRAME_SLICES:
            raise BlockError("a frame that does not hold its slices")
        planes = np.frombuffer(raw, dtype=np.uint8).reshape(len(rows), width, FRAME_SLICES)
        # byte planes back to little-endian integers of the frame's width, unzigzagged in
        # that width (a fraction of the memory traffic of doing it in 64 bits), then widened
        cut = np.ascontiguousarray(planes[:, :, lo:hi].transpose(0, 2, 1))
        z = cut.view(_UNSIGNED[width]).reshape(len(rows), hi - lo)
        signed = (z >> 1) ^ (-(z & 1))
        decoded.append((rows, (lo, hi), signed.view(_SIGNED[width]).astype(np.int64)))
    return decoded


def _spread(frames: Sequence[bytes], rows: list[int], lo: int, hi: int) -> Matrix:
    """The slices ``lo:hi`` of the listed frames ``rows``, one row each."""
    out = np.zeros((len(rows), hi - lo), dtype=np.int64)
    listed = [_listed(frames[r]) for r in rows]
    at = np.concatenate([indices for indices, _ in listed])
    values = np.concatenate([values for _, values in listed])
    row = np.repeat(np.arange(len(rows)), [len(indices) for indices, _ in listed])
    inside = (at >= lo) & (at < hi)
    out[row[inside], at[inside] - lo] = values[inside]
    return out


DECODED_BYTES = 32 << 20
"""Bytes of decoded frames kept (by their bytes: the same bytes always decode the same). A
sealed frame is read again by every refresh until a late count changes it: a dashboard's
frames are decoded once, not at every refresh (zlib was a tenth of a 5-minute refresh's
time)."""
LISTED_BYTES = 400
"""What a listed frame's entry costs the cache besides its values: two small arrays, a
tuple, the key's bytes."""
_decoded_frames: dict[bytes, Any] = {}
_decoded_size = [0]


def _inflated(frame: bytes) -> bytes:
    """A frame's byte planes (its bytes after the width, inflated), remembered."""
    found: bytes | None = _decoded_frames.get(frame)
    if found is None:
        found = zlib.decompress(frame[1:], -15)
        _remember(frame, found, len(found))
    return found


def _listed(frame: bytes) -> tuple[Matrix, Matrix]:
    """A listed frame's nonzero slices (their indices and values), remembered."""
    found: tuple[Matrix, Matrix] | None = _decoded_frames.get(frame)
    if found is None:
        indices, values = listed_slices(frame)
        found = (np.array(indices, dtype=np.int64), np.array(values, dtype=np.int64))
        _remember(frame, found, LISTED_BYTES + 16 * len(indices))
    return found


def _remember(frame: bytes, decoded: Any, size: int) -> None:
    if _decoded_size[0] + size > DECODED_BYTES:
        _decoded_frames.clear()  # threads may race here: at worst one decoded again
        _decoded_size[0] = 0
    _decoded_frames[frame] = decoded
    _decoded_size[0] += size + len(frame)


def _summed(values: Matrix, group: int) -> Matrix:
    """Each run of ``group`` columns added up (numpy's sum over a short last axis is slow:
    a few strided additions are not)."""
    if group > 8:
        out: Matrix = values.reshape(values.shape[0], -1, group).sum(axis=2)
        return out
    out = values[:, 0::group].copy()
    for k in range(1, group):
        out += values[:, k::group]
    return out


def slices_matrix(stored: Spans, precision: int, start: int, end: int, group: int = 1) -> Matrix:
    """Counts per series (rows, in ``stored.ids`` order) and slice from ``start`` to ``end``
    (slice starts, ``end`` excluded): their blocks' frames plus their open slices. The
    slices are those of ``precision`` (as read), or sums of ``group`` of them: slices of
    ``precision * group`` seconds (``start`` a multiple of it, ``group`` dividing a frame)."""
    out = frames_matrix(stored, precision, start, end, group)
    add_open(out, stored, start, precision * group)
    return out


def frames_matrix(stored: Spans, precision: int, start: int, end: int, group: int = 1) -> Matrix:
    """``slices_matrix`` without the open slices: the blocks' frames alone."""
    wide = precision * group
    if FRAME_SLICES % group or start % wide:
        raise ValueError(f"{wide} s slices from {start} are not sums of whole {precision} s ones")
    series = len(stored.ids)
    slices = max(0, (end - start) // wide)
    out = np.zeros((series, slices), dtype=np.int64)
    if not slices or not series:
        return out
    stop = start + slices * wide
    period, width = precision * FRAME_SLICES, FRAME_SLICES // group
    base = start - start % period  # frames start at multiples of their period
    frames = -(-(stop - base) // period)
    skip = (start - base) // wide  # the first wanted column of the frames laid end to end
    # the first frame is needed from ``start`` on, the last up to ``stop``, others whole
    first, last = (start - base) // precision, (stop - base - (frames - 1) * period) // precision
    meta = np.frombuffer(stored.meta, dtype=_META)
    if (meta["frames"] < 0).any():
        raise ValueError("frames held by the reader, not read: put them back first")
    lengths = np.frombuffer(stored.lengths, dtype="<i4").astype(np.int64)
    if len(lengths):
        per_series = meta["frames"].astype(np.int64)
        row = np.repeat(np.arange(series), per_series)
        nth = np.arange(len(lengths)) - np.repeat(np.cumsum(per_series) - per_series, per_series)
        place = (meta["start"][row] - base) // period + nth
        ends = np.cumsum(lengths)
        kept = np.flatnonzero((lengths > 0) & (place >= 0) & (place < frames))
        data, froms, tos = stored.frames, (ends - lengths)[kept].tolist(), ends[kept].tolist()
        wanted = [data[a:b] for a, b in zip(froms, tos, strict=True)]
        lo = np.where(place[kept] == 0, first, 0).tolist()
        hi = np.where(place[kept] == frames - 1, last, FRAME_SLICES).tolist()
        row_of, place_of = row[kept], place[kept]
        for picked, (cut_lo, _), values in _by_width(wanted, list(zip(lo, hi, strict=True))):
            if group > 1:
                values = _summed(values, group)
            columns = place_of[picked] * width + cut_lo // group - skip
            out[row_of[picked, None], columns[:, None] + np.arange(values.shape[1])] = values
    return out


def add_open(out: Matrix, stored: Spans, start: int, wide: int) -> None:
    """Add the open slices of ``stored`` to ``out`` (its rows, slices of ``wide`` seconds
    from ``start``)."""
    if not stored.opened or not out.size:
        return
    meta = np.frombuffer(stored.meta, dtype=_META)
    pairs = open_pairs(stored.opened, int(meta["open"].sum()))
    at_row = np.repeat(np.arange(len(meta)), meta["open"].astype(np.int64))
    seconds, counts = pairs[:, 0], pairs[:, 1]
    columns = (seconds - seconds % wide - start) // wide
    inside = (columns >= 0) & (columns < out.shape[1])
    np.add.at(out, (at_row[inside], columns[inside]), counts[inside])


def open_pairs(text: bytes, pairs: int) -> Matrix:
    """The open (second, count) pairs of a read, parsed from their text at once."""
    try:
        numbers = np.fromstring(text, dtype=np.int64, sep=" ")
    except ValueError:  # (numpy warns before it raises): anything but integers
        numbers = np.zeros(0, dtype=np.int64)
    if len(numbers) != 2 * pairs:
        raise BlockError(f"open fields that are not {pairs} pairs of integers")
    found: Matrix = numbers.reshape(-1, 2)
    return found
