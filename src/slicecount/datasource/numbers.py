"""Numbers of evaluated arrays as JSON text, in bulk: the Prometheus API's sample strings
(``values.format_value``, Go's shortest 'f' format) and the simPod datapoints (whole values
as integers, what is not finite as ``null``). Pure.

Each text is what the one-value function writes; the arrays only sort the (distinct) values
into the kinds whose text a C routine writes (``str`` of an int, ``repr`` of a float without
an exponent) and leave the rest (NaN, infinities, -0, exponents) to that function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from slicecount.errors import extra_imports
from slicecount.promql.arrays import Floats
from slicecount.promql.values import format_value

with extra_imports("datasource", "the datasource"):
    import numpy as np

PLAIN_INTEGERS = 1e16
"""``format_value`` writes a whole value below this as an integer (above, in 'f' digits)."""
PLAIN_FLOATS = 1e-4
"""``repr`` writes a fraction at or above this without an exponent."""
TEXTS_KEPT = 50_000
"""Sample texts remembered, by their value's bits, across answers (~7 MB at most): a live
panel answers the times it answered at the last refresh with the same floats, and writing a
float's shortest digits (0.7 µs) is most of what encoding an answer costs."""
_TEXTS: dict[int, str] = {}


def sample_texts(values: Floats) -> list[str]:
    """``format_value`` of every value (flattened, row after row)."""
    return _each_distinct(values.ravel(), _remembered_sample_texts)


def datapoint_items(values: Floats) -> list[int | str]:
    """What ``%s`` writes as the JSON of ``frames.number`` of every value (flattened): whole
    values as integers, what is not finite (NaN: no sample) as ``null``."""
    flat = values.ravel()
    with np.errstate(invalid="ignore"):
        if np.all(np.abs(flat) < 2.0**63) and np.array_equal(flat, np.trunc(flat)):
            ints: list[int | str] = flat.astype(np.int64).tolist()  # counts: the usual case
            return ints
    texts: list[int | str] = _each_distinct(flat, _datapoint_texts)  # type: ignore[assignment]
    return texts


def _each_distinct(flat: Floats, texts: Callable[[Floats], list[str]]) -> list[str]:
    """``texts`` of the distinct values only, spread back: a panel's values repeat (rates of
    a few counts over one window), and writing a float's shortest digits is what costs."""
    if flat.size < 64 or ((flat == 0) & np.signbit(flat)).any():  # -0 sorts as 0
        return texts(flat)
    distinct, where = np.unique(flat, return_inverse=True)
    if len(distinct) > flat.size // 2:
        return texts(flat)
    found = np.empty(len(distinct), dtype=object)
    found[:] = texts(distinct)
    spread: list[str] = found[where.ravel()].tolist()
    return spread


def _remembered_sample_texts(flat: Floats) -> list[str]:
    """``_sample_texts``, those written before taken from ``_TEXTS`` (by the float's bits:
    -0 and 0 are two values, as are NaNs of other payloads; a text is never wrong, only
    missing, so threads may share it without a lock)."""
    bits: list[int] = np.ascontiguousarray(flat, dtype=np.float64).view(np.int64).tolist()
    get = _TEXTS.get
    found = [get(b) for b in bits]
    missing = [i for i, text in enumerate(found) if text is None]
    if missing:
        written = _sample_texts(flat[missing])
        if len(_TEXTS) + len(missing) > TEXTS_KEPT:
            _TEXTS.clear()  # a new dashboard's values: writing them all again costs one answer
        for i, text in zip(missing, written, strict=True):
            found[i] = _TEXTS[bits[i]] = text
    return cast("list[str]", found)  # every None filled


def _sample_texts(flat: Floats) -> list[str]:
    out = np.empty(flat.size, dtype=object)
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(flat)
        magnitude = np.abs(flat)
        whole = finite & (flat == np.trunc(flat)) & (magnitude < PLAIN_INTEGERS)
        whole &= ~((flat == 0) & np.signbit(flat))  # -0
        fraction = finite & ~whole & (magnitude >= PLAIN_FLOATS) & (magnitude < PLAIN_INTEGERS)
    _fill(out, whole, list(map(str, flat[whole].astype(np.int64).tolist())))
    _fill(out, fraction, list(map(float.__repr__, flat[fraction].tolist())))
    rest = ~(whole | fraction)
    _fill(out, rest, [format_value(v) for v in flat[rest].tolist()])
    texts: list[str] = out.tolist()
    return texts


def _datapoint_texts(flat: Floats) -> list[str]:
    out = np.full(flat.size, "null", dtype=object)
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(flat)
        whole = finite & (flat == np.trunc(flat))
        small = whole & (np.abs(flat) < 2.0**63)
    _fill(out, small, list(map(str, flat[small].astype(np.int64).tolist())))
    _fill(out, whole & ~small, [str(int(v)) for v in flat[whole & ~small].tolist()])
    fraction = finite & ~whole
    _fill(out, fraction, list(map(float.__repr__, flat[fraction].tolist())))
    texts: list[str] = out.tolist()
    return texts


def _fill(out: np.ndarray, where: np.ndarray, items: list[str]) -> None:
    if items:
        holder = np.empty(len(items), dtype=object)
        holder[:] = items
        out[where] = holder
