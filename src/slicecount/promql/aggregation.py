"""``sum avg min max count group stddev stdvar topk bottomk quantile`` with ``by`` and
``without``, at each evaluation time over the series present then. Pure."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from slicecount.promql.ast import NAME_LABEL, Aggregate
from slicecount.promql.values import EvaluationError, Labels, Series, Value, key


def aggregate(node: Aggregate, param: list[float] | None, series: list[Series]) -> list[Series]:
    groups: dict[tuple[tuple[str, str], ...], tuple[Labels, list[Series]]] = {}
    for s in series:
        labels = grouped(s.labels, node.grouping, node.without)
        groups.setdefault(key(labels), (labels, []))[1].append(s)
    if node.op in ("topk", "bottomk"):
        assert param is not None
        if any(math.isnan(k) for k in param):
            raise EvaluationError("Parameter value is NaN")
        return [s for _, members in groups.values() for s in _top(node.op, param, members)]
    combine = COMBINE[node.op]
    out = []
    for labels, members in groups.values():
        values: list[Value] = []
        last: tuple[Value, ...] | None = None
        for index, column in enumerate(zip(*(m.values for m in members), strict=True)):
            if column == last and param is None:
                # a step finer than the slices repeats the same values: combine them once
                values.append(values[-1])
                continue
            last = column
            # most times every member has a value: skip the copy then
            present = [v for v in column if v is not None] if None in column else column
            if not present:
                values.append(None)
            elif param is not None:
                values.append(quantile(param[index], present))
            else:
                values.append(combine(present))
        out.append(Series(labels, values))
    return out


def grouped(labels: Labels, grouping: tuple[str, ...], without: bool) -> Labels:
    if without:
        return {k: v for k, v in labels.items() if k not in grouping and k != NAME_LABEL}
    return {k: labels[k] for k in grouping if labels.get(k, "") != ""}


def _top(op: str, ks: list[float], members: list[Series]) -> list[Series]:
    """The k largest (smallest) members at each time; a member keeps its labels and has
    values only where it was chosen. An instant query's come in rank order, as Prometheus'."""
    chosen = [Series(m.labels, [None] * len(ks)) for m in members]
    picked: list[int] = []
    for index, k in enumerate(ks):
        if k < 1:
            continue
        present = [(m.values[index], i) for i, m in enumerate(members)]
        ranked = sorted(
            ((v, i) for v, i in present if v is not None),
            key=lambda vi: _order(vi[0], op == "topk"),
        )
        for value, i in ranked[: int(min(k, len(ranked)))]:
            chosen[i].values[index] = value
            picked.append(i)
    if len(ks) == 1:
        return [chosen[i] for i in picked]
    return [c for c in chosen if any(v is not None for v in c.values)]


def _order(value: float, largest_first: bool) -> float:
    if math.isnan(value):
        return math.inf  # NaN last either way, as Prometheus' heap does
    return -value if largest_first else value


def quantile(q: float, values: Sequence[float]) -> float:
    """Prometheus' ``quantile``: linear interpolation between the closest ranks."""
    if math.isnan(q) or not values:
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    ordered = sorted(values, key=lambda v: (not math.isnan(v), v))  # NaN the smallest
    rank = q * (len(ordered) - 1)
    lower = max(0, math.floor(rank))
    upper = min(len(ordered) - 1, lower + 1)
    weight = rank - math.floor(rank)
    return ordered[lower] * (1 - weight) + ordered[upper] * weight


def _fsum(values: Sequence[float]) -> float:
    try:
        return math.fsum(values)
    except (OverflowError, ValueError):  # inf and -inf together, or an overflow
        return float(sum(values))


def _mean(values: Sequence[float]) -> float:
    """The sum over the count; when the sum overflows, the sum of the values over the count
    (Prometheus turns to an incremental mean then), so that avg of huge values stays finite."""
    try:
        return math.fsum(values) / len(values)
    except OverflowError:
        return _fsum([v / len(values) for v in values])
    except ValueError:  # inf and -inf
        return math.nan


def _variance(values: Sequence[float]) -> float:
    """Welford's running mean and sum of squares, as Prometheus (0 for equal values)."""
    first = values[0]
    mean, squares = first, math.nan if math.isnan(first) or math.isinf(first) else 0.0
    for count, v in enumerate(values[1:], start=2):
        delta = v - mean
        mean += delta / count
        squares += delta * (v - mean)
    return squares / len(values)


def _max(values: Sequence[float]) -> float:
    numbers = [v for v in values if not math.isnan(v)]
    return max(numbers) if numbers else math.nan


def _min(values: Sequence[float]) -> float:
    numbers = [v for v in values if not math.isnan(v)]
    return min(numbers) if numbers else math.nan


COMBINE: dict[str, Callable[[Sequence[float]], float]] = {
    "sum": _fsum,
    "avg": _mean,
    "max": _max,
    "min": _min,
    "count": lambda values: float(len(values)),
    "group": lambda values: 1.0,
    "stdvar": _variance,
    "stddev": lambda values: math.sqrt(_variance(values)),
    "quantile": lambda values: math.nan,  # computed with its parameter above
}
