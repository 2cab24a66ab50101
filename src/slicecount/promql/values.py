"""What evaluation works on: the grid of evaluation times, exact running totals read from the
slices of one precision, and the series a node yields. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from itertools import accumulate

from slicecount.core.memo import remembered
from slicecount.errors import QueryError
from slicecount.promql.ast import NAME_LABEL

Labels = dict[str, str]
Value = float | None  # None: no sample at that evaluation time


class EvaluationError(QueryError):
    """The query is well formed but cannot be computed (Prometheus' ``execution`` error)."""


@dataclass(frozen=True)
class Grid:
    """Where a query is evaluated (``times``) and what the totals hold.

    The data are counts per slice of ``precision`` seconds. A total at a slice boundary ``b``
    is the sum of the slices that start before ``b``; a time ``t`` reads the boundary that
    ends its slice (``ceil(t / p) * p``: the slice holding t counted as it stands). Boundaries
    from ``oldest`` (start of the oldest slice inside retention) to ``newest`` (end of the
    slice holding now) have data; a window reaching outside them, or a time after ``now``
    (plus ``CLOCK_SKEW``), has no sample.

    ``partial`` (the simPod targets: a point per slice, dated by its start, evaluated at its
    end): a time after now still reads, a window holding now counts what it holds so far, and
    ``rate`` over one slice (``x[0]``) divides the unfinished slice by its elapsed seconds: a
    panel's last point shows no dip."""

    times: tuple[float, ...]
    precision: int
    first: int  # boundary of totals[0]
    oldest: int
    newest: int
    now: float = math.inf
    partial: bool = False
    point: int = 0  # the span of a window written without a range (x[0]): a point's slices

    def boundary(self, t: float, offset: float) -> int:
        return boundary(t - offset, self.precision)

    def window(self, span: float) -> int:
        return window(span or self.point, self.precision)

    def read_at(self, t: float, offset: float) -> int | None:
        """The boundary a time reads, or None when it lies after now."""
        if t - offset > self.now + CLOCK_SKEW and not self.partial:
            return None
        return self.boundary(t, offset)

    def reads(self, offset: float) -> list[int | None]:
        """``read_at`` of every time, in one pass (evaluated for each selector)."""
        p = self.precision
        last = math.inf if self.partial else self.now + CLOCK_SKEW
        return [None if t - offset > last else -int((offset - t) // p) * p for t in self.times]


CLOCK_SKEW = 5.0
"""Seconds past now a time may lie and still read what is counted so far (the slices after now
hold nothing yet), as Prometheus answers from the samples it has: Grafana sets a range's end
and an instant query's time from its own clock, rounded up to the second, and its host's
clock may be a little ahead of the datasource's. A time further ahead has no sample."""


def boundary(t: float, precision: int) -> int:
    """The end of the slice holding ``t`` (``t`` itself on a boundary)."""
    return -int(-t // precision) * precision


def window(span: float, precision: int) -> int:
    """A range rounded (half up) to whole slices, at least one."""
    return max(precision, math.floor(span / precision + 0.5) * precision)


class Raw:
    """One series as PromQL sees it: exposed labels and the running totals at each boundary
    from ``Grid.first`` (ints, exact; ``scale`` turns micro-units into base units). Given the
    slice counts of one stored series (``counts``) instead, the totals are summed when first
    asked for: the counts of one slice each (a panel's points) are read from them directly."""

    __slots__ = ("_totals", "counts", "labels", "scale")

    def __init__(
        self,
        labels: Labels,
        totals: Sequence[int] | None = None,
        scale: float = 1.0,
        counts: Sequence[int] | None = None,
    ) -> None:
        if totals is None and counts is None:
            raise ValueError("Raw needs totals or counts")
        self.labels = labels
        self.scale = scale
        self.counts = counts
        self._totals = totals

    @property
    def totals(self) -> Sequence[int]:
        if self._totals is None:
            self._totals = list(accumulate(self.counts or (), initial=0))
        return self._totals

    def __repr__(self) -> str:
        return f"Raw({self.labels!r}, {self.totals!r}, {self.scale!r})"


class Series:
    """One labelled line of a result: a value (or None) per evaluation time."""

    __slots__ = ("labels", "values")

    def __init__(self, labels: Labels, values: list[Value]) -> None:
        self.labels = labels
        self.values = values

    def __repr__(self) -> str:
        return f"Series({self.labels!r}, {self.values!r})"


LabelKey = tuple[tuple[str, str], ...]
REMEMBERED = 50_000
"""Label sets whose key (``remembered_key``) and nameless copy are remembered, by identity:
a series' labels come from the discovery cache as the same dict at every request while the
cache holds, and label dicts are never changed once made (whoever changes labels copies them
first), so a dashboard's series are sorted and copied once, not at every refresh."""
_keys: dict[int, tuple[Labels, LabelKey]] = {}
_nameless: dict[int, tuple[Labels, Labels]] = {}


def key(labels: Labels) -> LabelKey:
    return tuple(sorted(labels.items()))


def remembered_key(labels: Labels) -> LabelKey:
    """``key(labels)``, remembered for a label set met again (a selector's series, at every
    request); a set made for one answer would only push the others out."""
    hit = _keys.get(id(labels))
    if hit is not None and hit[0] is labels:
        return hit[1]
    found = tuple(sorted(labels.items()))
    if len(_keys) >= REMEMBERED:
        _keys.clear()
    _keys[id(labels)] = (labels, found)  # holding ``labels``: its id stays its own
    return found


def without_name(labels: Labels) -> Labels:
    if NAME_LABEL not in labels:
        return labels
    hit = _nameless.get(id(labels))
    if hit is not None and hit[0] is labels:
        return hit[1]
    found = {k: v for k, v in labels.items() if k != NAME_LABEL}
    if len(_nameless) >= REMEMBERED:
        _nameless.clear()
    _nameless[id(labels)] = (labels, found)
    return found


def nameless(labels: list[Labels]) -> list[Labels]:
    """``without_name`` of each label set, remembered with the list (a table's labels are one
    list at every request of a dashboard: ``query/tables``)."""
    return remembered("nameless", [labels], lambda: [without_name(one) for one in labels])


def check_unique(series: list[Series]) -> list[Series]:
    """Prometheus refuses a vector holding two samples with the same labels at one time."""
    seen: dict[tuple[tuple[str, str], ...], Series] = {}
    for s in series:
        other = seen.setdefault(key(s.labels), s)
        if other is not s:
            pairs = list(zip(other.values, s.values, strict=True))
            if any(a is not None and b is not None for a, b in pairs):
                raise EvaluationError(
                    "vector cannot contain metrics with the same labelset "
                    + format_labels(s.labels)
                )
            other.values = [a if a is not None else b for a, b in pairs]
    return list(seen.values())


def format_labels(labels: Labels) -> str:
    body = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != NAME_LABEL)
    return labels.get(NAME_LABEL, "") + "{" + body + "}"


def format_value(value: float) -> str:
    """A sample value as Prometheus writes it (Go's ``FormatFloat(v, 'f', -1, 64)``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e16:
        return "-0" if value == 0 and math.copysign(1, value) < 0 else str(int(value))
    text = repr(value)  # the shortest digits that read back, as Go's -1 precision
    return format(Decimal(text), "f") if "e" in text else text


def format_time(t: float) -> float | int:
    """Seconds as Prometheus writes them: milliseconds at most, an int when whole."""
    millis = round(t * 1000)
    return millis // 1000 if millis % 1000 == 0 else millis / 1000
