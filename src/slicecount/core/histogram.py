"""Histograms stored as plain counters (docs/architecture.md). Pure.

A histogram ``h`` with labels L is written as ``h.bucket{L,le="<bound>"}`` (the count of
observations that fell in that bucket, not cumulative) and ``h.sum_us{L}`` (the integer sum of
the observed values in micro-units: microseconds for seconds). Every tool that works on
counters therefore works on histograms too; quantiles are estimated when reading.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import NamedTuple

from slicecount.core.series import Labels, LabelValue, validate_name
from slicecount.errors import ConfigurationError

BUCKET_SUFFIX = ".bucket"
"""Suffix of the metric holding a histogram's per-bucket counts."""
SUM_SUFFIX = ".sum_us"
"""Suffix of the metric holding a histogram's sum, in micro-units."""
LE_LABEL = "le"
"""Label naming a bucket's upper bound (inclusive), ``+Inf`` for the last one."""
MICRO = 1_000_000

DEFAULT_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Request/query duration bounds in seconds (+Inf is always added)."""
DEFAULT_COUNT_BUCKETS: tuple[float, ...] = (0, 1, 2, 3, 5, 10, 20, 50, 100)
"""Bounds for small counts such as queries per request (+Inf is always added)."""


def format_bound(bound: float) -> str:
    """``0.005`` -> ``"0.005"``, ``1.0`` -> ``"1"``, ``inf`` -> ``"+Inf"``."""
    if math.isinf(bound):
        return "+Inf"
    if bound == int(bound):
        return str(int(bound))
    return repr(float(bound))


def parse_bound(text: str) -> float:
    """Inverse of ``format_bound``; ValueError for anything else."""
    if text == "+Inf":
        return math.inf
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"invalid bucket bound {text!r}")
    return value


def check_buckets(buckets: Sequence[float]) -> tuple[float, ...]:
    """Finite, strictly increasing, non-negative bounds (a trailing +Inf is dropped)."""
    bounds = [float(b) for b in buckets]
    if bounds and math.isinf(bounds[-1]):
        bounds.pop()
    if not bounds:
        raise ConfigurationError(f"histogram needs at least one finite bucket, got {buckets!r}")
    for low, high in pairwise(bounds):
        if not high > low:
            raise ConfigurationError(f"bucket bounds must increase, got {buckets!r}")
    if bounds[0] < 0 or not all(math.isfinite(b) for b in bounds):
        raise ConfigurationError(f"bucket bounds must be finite and >= 0, got {buckets!r}")
    return tuple(bounds)


class HistogramIds(NamedTuple):
    """The series ids of one label set of a histogram: each bucket's, in ``les`` order, and
    the sum's."""

    buckets: tuple[str, ...]
    total: str


class HistogramLayout:
    """The series names and bucket lookup of one histogram metric."""

    __slots__ = ("bounds", "bucket_name", "les", "name", "sum_name")

    def __init__(self, name: str, buckets: Sequence[float] = DEFAULT_DURATION_BUCKETS) -> None:
        self.name = validate_name(name)
        self.bounds = check_buckets(buckets)
        self.les = (*(format_bound(b) for b in self.bounds), "+Inf")
        self.bucket_name = name + BUCKET_SUFFIX
        self.sum_name = name + SUM_SUFFIX

    def series_ids(
        self, series_id: Callable[[str, dict[str, LabelValue]], str], labels: Labels
    ) -> HistogramIds:
        """The ids of every bucket (in ``les`` order) and of the sum, for one label set,
        through ``series_id`` (a Recorder's: validated and cardinality-guarded)."""
        buckets = tuple(series_id(self.bucket_name, {**labels, LE_LABEL: le}) for le in self.les)
        return HistogramIds(buckets, series_id(self.sum_name, dict(labels)))

    def bucket_index(self, value: float) -> int:
        """Index into ``les`` of the bucket that holds ``value`` (bounds are inclusive)."""
        return bisect_left(self.bounds, value)
