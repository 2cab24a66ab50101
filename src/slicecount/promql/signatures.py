"""What the parser accepts: the functions and aggregations of slicecount's PromQL subset, with
their argument and result types. Pure."""

from __future__ import annotations

from typing import NamedTuple

from slicecount.promql.ast import ValueType


class Signature(NamedTuple):
    args: tuple[ValueType, ...]
    optional: int  # how many trailing args may be left out
    returns: ValueType
    variadic: bool = False  # the last arg may repeat (label_join's source labels)


_MATH = ("abs", "ceil", "floor", "sqrt", "ln", "log2", "log10", "exp", "sgn")
RANGE_FUNCTIONS = (
    "rate",
    "increase",
    "irate",
    "sum_over_time",
    "avg_over_time",
    "max_over_time",
    "min_over_time",
    "count_over_time",
    "last_over_time",
)

FUNCTIONS: dict[str, Signature] = {
    **{name: Signature(("matrix",), 0, "vector") for name in RANGE_FUNCTIONS},
    **{name: Signature(("vector",), 0, "vector") for name in _MATH},
    "round": Signature(("vector", "scalar"), 1, "vector"),
    "clamp_min": Signature(("vector", "scalar"), 0, "vector"),
    "clamp_max": Signature(("vector", "scalar"), 0, "vector"),
    "clamp": Signature(("vector", "scalar", "scalar"), 0, "vector"),
    "histogram_quantile": Signature(("scalar", "vector"), 0, "vector"),
    "scalar": Signature(("vector",), 0, "scalar"),
    "vector": Signature(("scalar",), 0, "vector"),
    "time": Signature((), 0, "scalar"),
    "timestamp": Signature(("vector",), 0, "vector"),
    "absent": Signature(("vector",), 0, "vector"),
    "label_replace": Signature(("vector", "string", "string", "string", "string"), 0, "vector"),
    "label_join": Signature(("vector", "string", "string", "string"), 1, "vector", True),
    "sort": Signature(("vector",), 0, "vector"),
    "sort_desc": Signature(("vector",), 0, "vector"),
}

AGGREGATIONS = frozenset(
    {"sum", "avg", "min", "max", "count", "group", "stddev", "stdvar", "topk", "bottomk"}
    | {"quantile"}
)
PARAMETRIZED = frozenset({"topk", "bottomk", "quantile"})
"""Aggregations whose first argument is a scalar parameter."""

UNSUPPORTED = frozenset(
    {"count_values", "limitk", "limit_ratio"}
    | {"delta", "idelta", "deriv", "predict_linear", "holt_winters", "resets", "changes"}
    | {"quantile_over_time", "stddev_over_time", "stdvar_over_time", "absent_over_time"}
    | {"present_over_time", "mad_over_time", "label_values", "days_in_month", "day_of_month"}
    | {"day_of_week", "day_of_year", "hour", "minute", "month", "year", "pi", "atan2"}
    | {"histogram_count", "histogram_sum", "histogram_fraction", "histogram_avg"}
    | {"histogram_stddev", "histogram_stdvar", "sinh", "cosh", "tanh", "sin", "cos", "tan"}
    | {"asin", "acos", "atan", "asinh", "acosh", "atanh", "deg", "rad", "info"}
)
"""Prometheus functions outside the subset: named in the error, not called unknown."""
