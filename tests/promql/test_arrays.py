"""The array kernels give what the loops give, value for value (bit for bit: ``repr``):
aggregations against ``aggregation.aggregate``, ``histogram_quantile`` against
``bucket_quantile`` per label set and time, the range functions against their definitions
over lists, arithmetic against ``binary``. Values include None (no sample), NaN, infinities,
-0, huge numbers and fractions whose float sum depends on the order."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slicecount.promql import aggregation, binary, buckets, groups, pointwise
from slicecount.promql.arrays import Block, Table
from slicecount.promql.ast import Aggregate, Binary
from slicecount.promql.functions import bucket_quantile
from slicecount.promql.parser import parse
from slicecount.promql.values import EvaluationError, Labels, Raw, Series, Value, key
from slicecount.promql.windows import KERNELS, over_windows

STEPS = 4
NUMBERS = st.one_of(
    st.integers(-1000, 1000).map(float),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(1, 600).map(lambda n: n / 60),  # rates: sums that fsum and a loop round apart
    st.sampled_from([1e308, -1e308, 0.1, 0.2, 0.3, -0.0, 1e16, 2.0**53]),
)
VALUES = st.one_of(st.none(), NUMBERS)
LABELS = st.fixed_dictionaries(
    {"__name__": st.sampled_from(["x", "y"]), "a": st.sampled_from(["1", "2", "3", ""])}
)


def same(got: Sequence[Value], want: Sequence[Value]) -> bool:
    return [repr(v) for v in got] == [repr(v) for v in want]


def as_dict(series: Sequence[Series]) -> dict[tuple[tuple[str, str], ...], list[Value]]:
    return {key(s.labels): list(s.values) for s in series}


def outcome(compute: Callable[[], Sequence[Series]]) -> list[tuple[Labels, list[str]]] | str:
    """The series (values as repr) or the error computing them raises."""
    try:
        return [(s.labels, [repr(v) for v in s.values]) for s in compute()]
    except EvaluationError as exc:
        return str(exc)


def assert_same(got: Sequence[Series], want: Sequence[Series]) -> None:
    assert [s.labels for s in got] == [s.labels for s in want]
    for g, w in zip(got, want, strict=True):
        assert same(g.values, w.values), (g, w)


series_lists = st.lists(
    st.tuples(LABELS, st.lists(VALUES, min_size=STEPS, max_size=STEPS)), max_size=12
).map(lambda items: [Series(labels, values) for labels, values in items])


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(series_lists, st.sampled_from(sorted(groups.VECTORISED)), st.booleans())
def test_grouped_reductions_are_the_loops(series: list[Series], op: str, without: bool) -> None:
    node = parse(f"{op} {'without' if without else 'by'} (a) (x)")
    assert isinstance(node, Aggregate)
    want = aggregation.aggregate(node, None, [Series(s.labels, list(s.values)) for s in series])
    got = groups.aggregate(node, Block.of(series, STEPS)).series()
    if op in ("max", "min"):  # the loop repeats a time's result when its column == the last
        got, want = _unsigned_zeros(got), _unsigned_zeros(want)  # one's: 0.0 == -0.0
    assert_same(got, want)


def _unsigned_zeros(series: list[Series]) -> list[Series]:
    return [Series(s.labels, [0.0 if v == 0 else v for v in s.values]) for s in series]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 600).map(lambda n: n / 60), min_size=1, max_size=300))
def test_a_sum_of_many_rates_is_fsum(rates: list[float]) -> None:
    """Many members in one group (the pairwise sums) and uneven groups (one by one)."""
    series = [Series({"a": "1"}, [r] * STEPS) for r in rates]
    series += [Series({"a": str(i + 2)}, [1.5] * STEPS) for i in range(len(rates) // 2)]
    node = parse("sum by (a) (x)")
    assert isinstance(node, Aggregate)
    got = groups.aggregate(node, Block.of(series, STEPS))
    assert got.series()[0].values == [math.fsum(rates)] * STEPS


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(0, 600).map(lambda n: n / 60), min_size=3, max_size=40),
    st.integers(0, 2**20),
)
def test_sums_of_mostly_quiet_times_are_fsum(rates: list[float], quiet: int) -> None:
    """Times where every member is 0 (most of a long panel's) and busy ones, summed apart."""
    steps = 21
    zero = [bool(quiet >> t & 1) or t % 3 > 0 for t in range(steps)]  # 2 in 3 at least
    series = [
        Series({"a": str(i % 2)}, [0.0 if zero[t] else r * (t + 1) for t in range(steps)])
        for i, r in enumerate(rates)
    ]
    node = parse("sum by (a) (x)")
    assert isinstance(node, Aggregate)
    got = groups.aggregate(node, Block.of(series, steps)).series()
    for group in got:
        mine = [r for i, r in enumerate(rates) if str(i % 2) == group.labels["a"]]
        want = [math.fsum(0.0 if zero[t] else r * (t + 1) for r in mine) for t in range(steps)]
        assert group.values == want


def bucket_loop(qs: list[float], series: Sequence[Series]) -> dict[object, list[Value]]:
    """histogram_quantile as a loop over label sets and times (the definition)."""
    members: dict[tuple[tuple[str, str], ...], list[tuple[float, Series]]] = {}
    for s in series:
        try:
            bound = float(s.labels.get("le", ""))
        except ValueError:
            continue
        signature = key({k: v for k, v in s.labels.items() if k != "le"})
        members.setdefault(signature, []).append((bound, s))
    out: dict[object, list[Value]] = {}
    for signature, found in members.items():
        labels = {k: v for k, v in dict(signature).items() if k != "__name__"}
        values: list[Value] = []
        for t, q in enumerate(qs):
            present = [(b, float(s.values[t])) for b, s in found if s.values[t] is not None]  # type: ignore[arg-type]
            values.append(bucket_quantile(q, present) if present else None)
        out[key(labels)] = values
    return out


BUCKETS = st.lists(
    st.tuples(
        st.sampled_from(["1", "2", "3"]),
        st.sampled_from(["0.1", "0.5", "1", "1.0", "+Inf", "-1", "0", "NaN", "x"]),
        st.lists(st.one_of(st.none(), st.integers(0, 20).map(float), NUMBERS), min_size=STEPS,
                 max_size=STEPS),
    ),
    max_size=20,
)  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(BUCKETS, st.lists(st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0, -1.0, 2.0, math.nan]),
                         min_size=STEPS, max_size=STEPS))  # fmt: skip
@pytest.mark.slow
def test_histogram_quantile_is_the_loop(items: list[tuple[str, str, list[Value]]],
                                        qs: list[float]) -> None:  # fmt: skip
    seen: dict[tuple[str, str], Series] = {}
    for route, le, values in items:
        seen.setdefault((route, le), Series({"__name__": "h", "r": route, "le": le}, values))
    series = list(seen.values())
    got = buckets.histogram_quantile(qs, Block.of(series, STEPS))
    want = bucket_loop(qs, series)
    assert {k: [repr(v) for v in vs] for k, vs in as_dict(got.series()).items()} == {
        k: [repr(v) for v in vs] for k, vs in want.items()
    }


def window_loop(name: str, t: Sequence[float], b: int, a: int, span: int, p: int) -> float:
    """The range functions over one window of a list of totals (their definitions)."""
    inside = t[b + 1 : a + 1]
    definitions: dict[str, Callable[[], float]] = {
        "increase": lambda: t[a] - t[b],
        "rate": lambda: (t[a] - t[b]) / span,
        "irate": lambda: (t[a] - t[a - 1]) / p,
        "sum_over_time": lambda: sum(inside),
        "avg_over_time": lambda: math.fsum(inside) / (a - b),
        "max_over_time": lambda: max(inside),
        "min_over_time": lambda: min(inside),
        "count_over_time": lambda: float(a - b),
        "last_over_time": lambda: t[a],
    }
    return float(definitions[name]())


TOTALS = st.one_of(
    st.lists(st.integers(0, 10**12), min_size=2, max_size=12),  # running totals: exact ints
    st.lists(st.floats(-1e6, 1e6).filter(lambda v: v == 0 or abs(v) > 1e-300), min_size=2,
             max_size=12),  # a test's gauges
)  # fmt: skip


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(TOTALS, st.sampled_from(sorted(KERNELS)), st.integers(1, 4), st.data())
def test_range_functions_are_their_definitions(totals: list[float], name: str, width: int,
                                               data: st.DataObject) -> None:  # fmt: skip
    ends = data.draw(st.lists(st.integers(width, len(totals) + 2), min_size=1, max_size=6))
    table = Table.of_raws([Raw({"__name__": "x"}, totals)])  # type: ignore[arg-type]  # floats
    starts = np.array([e - width for e in ends], dtype=np.int64)
    valid = np.ones(len(ends), dtype=bool)
    values, present = over_windows(
        table, KERNELS[name], starts, np.array(ends), valid, width * 5, 5
    )
    for i, (b, a) in enumerate(zip(starts.tolist(), ends, strict=True)):
        assert present[0, i] == (a < len(totals))
        if a < len(totals):
            want = window_loop(name, totals, b, a, width * 5, 5)
            assert repr(float(values[0, i])) == repr(want), (b, a)


@settings(max_examples=100, deadline=None)
@given(series_lists, st.sampled_from(["+", "-", "*", "/", "==", "<", ">="]), st.booleans(),
       st.lists(NUMBERS, min_size=STEPS, max_size=STEPS), st.booleans())  # fmt: skip
@pytest.mark.slow
def test_arithmetic_with_a_scalar_is_the_loop(
    series: list[Series], op: str, swap: bool, number: list[float], as_bool: bool
) -> None:
    distinct = list({key(s.labels): s for s in series}.values())
    want = outcome(lambda: binary.with_scalar(op, distinct, number, swap, as_bool))
    block = Block.of(distinct, STEPS)
    assert outcome(lambda: pointwise.with_scalar(op, block, number, swap, as_bool)) == want


@settings(max_examples=100, deadline=None)
@given(series_lists, series_lists, st.sampled_from(["+", "/", "*", ">", "=="]), st.booleans(),
       st.sampled_from(["on (a)", "ignoring (a)", ""]))  # fmt: skip
@pytest.mark.slow
def test_one_to_one_matching_is_the_loop(lhs: list[Series], rhs: list[Series], op: str,
                                         as_bool: bool, matching: str) -> None:  # fmt: skip
    text = f"x {op} {'bool ' if as_bool and op in ('>', '==') else ''}{matching} y"
    node = parse(text)
    assert isinstance(node, Binary)
    left = list({key(s.labels): s for s in lhs}.values())
    right = list({key(s.labels): s for s in rhs}.values())
    got = pointwise.vectors(node, Block.of(left, STEPS), Block.of(right, STEPS))
    if got is None:
        return  # not unique on a side: the loop decides (errors included)
    assert outcome(lambda: got) == outcome(lambda: binary.vectors(node, left, right))


def test_labels_of_a_block_are_its_series() -> None:
    series = [Series({"a": "1"}, [1.0, None, math.nan, -0.0])]
    block = Block.of(series, STEPS)
    assert len(block) == 1 and block[0].labels == {"a": "1"}
    assert same(block[0].values, [1.0, None, math.nan, -0.0])
    assert block[:1][0].labels == {"a": "1"}
