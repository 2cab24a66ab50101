"""Functions of instant vectors: math, clamps, ``absent``, ``scalar``, ``timestamp``,
``label_replace``/``label_join``, ``sort``, and one label set's ``histogram_quantile`` (the
loop ``buckets`` computes on arrays and falls back to). Pure."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from slicecount.core.series import is_label_name
from slicecount.promql.ast import NAME_LABEL, Node, VectorSelector, compile_regex
from slicecount.promql.binary import divide
from slicecount.promql.values import (
    EvaluationError,
    Labels,
    Series,
    Value,
    check_unique,
    without_name,
)

LE = "le"


def _log(base: Callable[[float], float]) -> Callable[[float], float]:
    def log(v: float) -> float:
        if v == 0:
            return -math.inf
        return math.nan if v < 0 or math.isnan(v) else base(v)

    return log


def _exp(v: float) -> float:
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


def _rounding(step: Callable[[float], float]) -> Callable[[float], float]:
    return lambda v: v if math.isinf(v) or math.isnan(v) else float(step(v))


MATH: dict[str, Callable[[float], float]] = {
    "abs": abs,
    "ceil": _rounding(math.ceil),
    "floor": _rounding(math.floor),
    "sqrt": lambda v: math.sqrt(v) if v >= 0 else math.nan,
    "ln": _log(math.log),
    "log2": _log(math.log2),
    "log10": _log(math.log10),
    "exp": _exp,
    "sgn": lambda v: v if math.isnan(v) else float((v > 0) - (v < 0)),
}


def _pointwise(series: list[Series], fn: Callable[[float, int], Value]) -> list[Series]:
    return check_unique(
        [
            Series(
                without_name(s.labels),
                [None if v is None else fn(v, i) for i, v in enumerate(s.values)],
            )
            for s in series
        ]
    )


def _max(a: float, b: float) -> float:
    return math.nan if math.isnan(a) or math.isnan(b) else max(a, b)


def _min(a: float, b: float) -> float:
    return math.nan if math.isnan(a) or math.isnan(b) else min(a, b)


def call(name: str, series: list[Series], args: Sequence[object]) -> list[Series]:
    """The functions whose first argument is an instant vector and whose other arguments
    (scalars per time, strings) are already evaluated."""
    if name in MATH:
        fn = MATH[name]
        return _pointwise(series, lambda v, i: fn(v))
    scalars = [a for a in args if isinstance(a, list)]
    if name == "round":
        nearest = scalars[0] if scalars else [1.0] * _steps(series)
        return _pointwise(series, lambda v, i: _round(v, nearest[i]))
    if name == "clamp_min":
        return _pointwise(series, lambda v, i: _max(v, scalars[0][i]))
    if name == "clamp_max":
        return _pointwise(series, lambda v, i: _min(v, scalars[0][i]))
    if name == "clamp":
        low, high = scalars
        return _pointwise(
            series, lambda v, i: None if high[i] < low[i] else _min(_max(v, low[i]), high[i])
        )
    if name in ("sort", "sort_desc"):
        return _sorted(series, name == "sort_desc")
    strings = [str(a) for a in args]
    if name == "label_replace":
        return label_replace(series, *strings)
    if name == "label_join":
        return label_join(series, strings[0], strings[1], strings[2:])
    raise EvaluationError(f"function {name}() is not implemented")  # the parser allows no other


def _steps(series: list[Series]) -> int:
    return len(series[0].values) if series else 0


def _round(v: float, nearest: float) -> float:
    """Prometheus' ``floor(v / nearest + 0.5) * nearest``, with Go's float division."""
    inverse = divide(1.0, nearest)
    scaled = v * inverse + 0.5 if not math.isnan(inverse) else math.nan
    floored = math.floor(scaled) if math.isfinite(scaled) else scaled
    return divide(floored, inverse)


def _sorted(series: list[Series], descending: bool) -> list[Series]:
    """Sorted by value (instant queries; a range query keeps the order, as Prometheus)."""
    if _steps(series) != 1:
        return series

    def order(s: Series) -> float:
        v = s.values[0]
        if v is None or math.isnan(v):
            return math.inf
        return -v if descending else v

    return sorted(series, key=order)


def scalar(series: list[Series], steps: int) -> list[float]:
    """The value of the only series present at each time, else NaN."""
    out = []
    for index in range(steps):
        present = [s.values[index] for s in series if s.values[index] is not None]
        out.append(float(present[0]) if len(present) == 1 else math.nan)  # type: ignore[arg-type]
    return out


def timestamp(series: list[Series], times: Sequence[float]) -> list[Series]:
    """The evaluation time of every sample (the data are exact at any time)."""
    return _pointwise(series, lambda v, i: float(times[i]))


def absent(arg: Node, series: list[Series], steps: int) -> list[Series]:
    """1 at the times where ``arg`` has no sample, with the labels its equality matchers name
    (a label also named by another matcher is left out, as Prometheus does)."""
    labels: Labels = {}
    if isinstance(arg, VectorSelector):
        seen: set[str] = set()
        for m in arg.matchers:
            if m.label == NAME_LABEL:
                continue
            if m.op == "=" and m.label not in seen:
                if m.value:  # an empty value means no such label
                    labels[m.label] = m.value
                seen.add(m.label)
            else:
                labels.pop(m.label, None)
    values: list[Value] = [
        None if any(s.values[i] is not None for s in series) else 1.0 for i in range(steps)
    ]
    return [Series(labels, values)] if any(v is not None for v in values) else []


_TEMPLATE = re.compile(r"\$(?:\$|\{([^}]*)\}|([A-Za-z0-9_]+))")


def _expand(template: str, match: object) -> str:
    """Go's ``Regexp.Expand``: ``$1``, ``${1}``, ``$name``, ``${name}``, ``$$``; an unknown
    group is empty."""
    groups = match.groups()  # type: ignore[attr-defined]
    named = match.groupdict()  # type: ignore[attr-defined]

    def one(m: re.Match[str]) -> str:
        name = m.group(1) if m.group(1) is not None else m.group(2)
        if name is None:
            return "$"
        if name.isdigit():
            index = int(name)
            if index == 0:
                return str(match.group(0))  # type: ignore[attr-defined]
            return (groups[index - 1] or "") if index <= len(groups) else ""
        return named.get(name) or ""

    return _TEMPLATE.sub(one, template)


def label_replace(
    series: list[Series], dst: str, replacement: str, src: str, pattern: str
) -> list[Series]:
    if not is_label_name(dst) and dst != NAME_LABEL:
        raise EvaluationError(f"invalid destination label name in label_replace(): {dst!r}")
    regex = compile_regex(pattern)
    out = []
    for s in series:
        match = regex.fullmatch(s.labels.get(src, ""))
        labels = s.labels
        if match is not None:
            value = _expand(replacement, match)
            labels = {k: v for k, v in s.labels.items() if k != dst}
            if value:
                labels[dst] = value
        out.append(Series(labels, list(s.values)))
    return check_unique(out)


def label_join(series: list[Series], dst: str, separator: str, sources: list[str]) -> list[Series]:
    if not is_label_name(dst) and dst != NAME_LABEL:
        raise EvaluationError(f"invalid destination label name in label_join(): {dst!r}")
    out = []
    for s in series:
        value = separator.join(s.labels.get(src, "") for src in sources)
        labels = {k: v for k, v in s.labels.items() if k != dst}
        if value:
            labels[dst] = value
        out.append(Series(labels, list(s.values)))
    return check_unique(out)


def bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """promql/quantile.go's bucketQuantile on (upper bound, cumulative count) pairs."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    ordered = sorted(buckets, key=lambda b: b[0])
    if not ordered or not math.isinf(ordered[-1][0]):
        return math.nan
    merged: list[list[float]] = []
    for bound, count in ordered:  # coalesce equal bounds
        if merged and merged[-1][0] == bound:
            merged[-1][1] += count
        else:
            merged.append([bound, count])
    highest = -math.inf
    for bucket in merged:  # ensure monotonic counts
        highest = bucket[1] = max(highest, bucket[1])
    if len(merged) < 2:
        return math.nan
    observations = merged[-1][1]
    if observations == 0:
        return math.nan
    rank = q * observations
    b = next(i for i, (_, c) in enumerate(merged) if i == len(merged) - 1 or c >= rank)
    if b == len(merged) - 1:
        return merged[-2][0]
    if b == 0 and merged[0][0] <= 0:
        return merged[0][0]
    start, end, count = 0.0, merged[b][0], merged[b][1]
    if b > 0:
        start = merged[b - 1][0]
        count -= merged[b - 1][1]
        rank -= merged[b - 1][1]
    return start + (end - start) * divide(rank, count)
