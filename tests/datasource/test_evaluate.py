from __future__ import annotations

import math

import pytest

from slicecount.datasource.evaluate import Series, Timeline, evaluate, fetches, quantile
from slicecount.datasource.query import parse

T0 = 1_700_000_040  # a multiple of 60


def timeline(now: float = T0 + 250) -> Timeline:
    return Timeline(60, range(T0, T0 + 300, 60), now, oldest=T0 + 60)


def test_fill_zero_inside_retention_null_outside() -> None:
    assert timeline().fill([5, None, None, None, None]) == [5.0, 0.0, 0.0, 0.0, 0.0]
    assert timeline(now=T0 + 130).fill([None, None, None, 7, None]) == [
        None, 0.0, 0.0, 7.0, None,
    ]  # fmt: skip


def test_rate_divides_the_current_slice_by_its_elapsed_seconds() -> None:
    node = parse("rate(x)")
    data = {fetches(node)[0]: [Series("x", {}, [60.0, 120.0, 0.0, 30.0, 10.0])]}
    (out,) = evaluate(node, data, timeline(now=T0 + 250))  # 10 s into the last slice
    assert out.values == [1.0, 2.0, 0.0, 0.5, 1.0]


def test_aggregations_group_and_skip_nulls() -> None:
    series = [
        Series("x", {"status": "200", "route": "/a"}, [1.0, 2.0, None]),
        Series("x", {"status": "200", "route": "/b"}, [3.0, None, None]),
        Series("x", {"status": "500", "route": "/a"}, [5.0, 6.0, None]),
    ]
    tl = Timeline(60, range(T0, T0 + 180, 60), T0 + 500, T0)
    for op, expected in (
        ("sum", {"200": [4.0, 2.0, None], "500": [5.0, 6.0, None]}),
        ("avg", {"200": [2.0, 2.0, None], "500": [5.0, 6.0, None]}),
        ("max", {"200": [3.0, 2.0, None], "500": [5.0, 6.0, None]}),
        ("min", {"200": [1.0, 2.0, None], "500": [5.0, 6.0, None]}),
        ("count", {"200": [2.0, 1.0, None], "500": [1.0, 1.0, None]}),
    ):
        node = parse(f"{op} by (status) (x)")
        out = evaluate(node, {fetches(node)[0]: series}, tl)
        assert {s.labels["status"]: s.values for s in out} == expected, op
    total = evaluate(parse("sum(x)"), {fetches(parse("sum(x)"))[0]: series}, tl)
    assert [(s.legend(), s.values) for s in total] == [("x", [9.0, 8.0, None])]


def test_quantile_interpolates_like_prometheus() -> None:
    bounds = [0.1, 0.5, 1.0, math.inf]
    assert quantile(0.5, bounds, [10, 10, 0, 0]) == pytest.approx(0.1)
    assert quantile(0.75, bounds, [10, 10, 0, 0]) == pytest.approx(0.3)
    assert quantile(0.99, bounds, [0, 0, 0, 5]) == 1.0  # +Inf bucket: highest finite bound
    assert quantile(0.5, bounds, [0, 0, 0, 0]) is None
    assert quantile(0.5, bounds, [None, None, None, None]) is None
    assert quantile(0.0, bounds, [4, 0, 0, 0]) == 0.0


def test_histogram_quantile_groups_buckets_by_their_other_labels() -> None:
    node = parse("histogram_quantile(0.5, h)")
    (fetch,) = fetches(node)
    assert fetch.histogram is True  # reads the bucket series
    buckets = [
        Series("h.bucket", {"route": "/a", "le": "0.1"}, [10.0]),
        Series("h.bucket", {"route": "/a", "le": "1"}, [10.0]),
        Series("h.bucket", {"route": "/a", "le": "+Inf"}, [0.0]),
        Series("h.bucket", {"route": "/b", "le": "1"}, [4.0]),
        Series("h.bucket", {"route": "/b", "le": "+Inf"}, [0.0]),
    ]
    tl = Timeline(60, range(T0, T0 + 60, 60), T0 + 100, T0)
    out = evaluate(node, {fetch: buckets}, tl)
    assert [s.legend() for s in out] == ['p50 h.bucket{route="/a"}', 'p50 h.bucket{route="/b"}']
    assert out[0].values == [pytest.approx(0.1)]
    assert out[1].values == [pytest.approx(0.5)]
    summed = parse("histogram_quantile(0.5, sum(h))")
    (out_sum,) = evaluate(summed, {fetches(summed)[0]: buckets}, tl)
    assert out_sum.values == [pytest.approx(0.1 + 0.9 * (12 - 10) / 14)]


def test_fill_keeps_counts_as_ints_and_what_lies_outside_retention() -> None:
    filled = timeline(now=T0 + 130).fill([3, None, 4, None, 9])
    assert filled == [3, 0, 4, None, 9]  # before retention or after now, a count still shows
    assert all(isinstance(v, int) for v in filled if v is not None)
    assert timeline(now=T0 - 500).fill([None, 1, None, None, None]) == [None, 1, None, None, None]
    assert timeline(now=T0 + 1000).fill([None] * 5) == [None, 0, 0, 0, 0]
    with pytest.raises(ValueError, match="4 counts for 5 slices"):
        timeline().fill([1, 2, 3, 4])


@pytest.mark.parametrize(
    ("target", "counts", "expected"),
    [
        ("x * 1e308 * 10", [5, 0, -5], [math.inf, 0.0, -math.inf]),
        ("sum(x * 1e308 * 10)", [5, 0, -5], [math.nan]),  # inf + -inf: fsum refuses
        ("sum(x * 1e308)", [1, 1, 0], [math.inf]),  # fsum overflows: the plain sum is inf
        ("avg(x * 1e308)", [1, 1, 0], [math.inf]),
        ("x * x * x * x * x * x * x * x * x * x", [10**10, 0, 1], [1e100, 0.0, 1.0]),
        ("sum(x * 1e308 * 10) / sum(x * 1e308 * 10)", [5, 0, 1], [math.nan]),  # inf / inf
        ("x / 0", [5, 0, 1], [None, None, None]),
    ],
)
def test_overflow_yields_inf_or_nan_never_an_error(
    target: str, counts: list[int], expected: list[float | None]
) -> None:
    node = parse(target)
    tl = Timeline(60, range(T0, T0 + 60, 60), T0 + 100, T0)
    data = [Series("x", {"k": str(i)}, [count]) for i, count in enumerate(counts)]
    out = evaluate(node, {fetch: data for fetch in fetches(node)}, tl)
    values = [v for s in out for v in s.values]
    assert len(values) == len(expected)
    for value, want in zip(values, expected, strict=True):
        if want is None or value is None:
            assert value is want
            continue
        assert isinstance(value, float)
        assert (math.isnan(value) and math.isnan(want)) or value == want
