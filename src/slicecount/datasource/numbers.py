"""Numbers of evaluated arrays as JSON text, in bulk: the Prometheus API's sample strings
(``values.format_value``, Go's shortest 'f' format) and the simPod datapoints (whole values
as integers, what is not finite as ``null``). Pure.

Each text is what the one-value function writes; the arrays only sort the values into the
kinds whose text a C routine writes (``str`` of an int, ``repr`` of a float without an
exponent) and leave the rest (NaN, infinities, -0, exponents) to that function.
"""

from __future__ import annotations

from slicecount.promql.arrays import Floats
from slicecount.promql.values import format_value

try:
    import numpy as np
except ModuleNotFoundError as exc:  # pragma: no cover - the engine's import says it first
    from slicecount.errors import MissingExtra

    raise MissingExtra("datasource", exc, "the datasource") from exc

PLAIN_INTEGERS = 1e16
"""``format_value`` writes a whole value below this as an integer (above, in 'f' digits)."""
PLAIN_FLOATS = 1e-4
"""``repr`` writes a fraction at or above this without an exponent."""


def sample_texts(values: Floats) -> list[str]:
    """``format_value`` of every value (flattened, row after row)."""
    flat = values.ravel()
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


def datapoint_numbers(values: Floats) -> list[int | float | None]:
    """``frames.number`` of every value (NaN: no sample, as a value that is not finite)."""
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(values)
        whole = finite & (values == np.trunc(values))
        small = whole & (np.abs(values) < 2.0**63)
    if small.all():
        ints: list[int | float | None] = values.astype(np.int64).tolist()
        return ints
    out = np.array(values.tolist(), dtype=object)
    _fill(out, small, values[small].astype(np.int64).tolist())
    _fill(out, whole & ~small, [int(v) for v in values[whole & ~small].tolist()])
    out[~finite] = None
    numbers: list[int | float | None] = out.tolist()
    return numbers


def _fill(out: np.ndarray, where: np.ndarray, items: list[object]) -> None:
    if items:
        holder = np.empty(len(items), dtype=object)
        holder[:] = items
        out[where] = holder
