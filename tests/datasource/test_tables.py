"""Read slices as arrays (``counts``) and numbers as JSON text in bulk (``numbers``): the same
tables whichever shape the read takes (lists with None, an array per series, one 2-D array),
derived series the sums of their parts, and every text what the one-value function writes."""

from __future__ import annotations

import math
from itertools import accumulate

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slicecount.core import memo
from slicecount.datasource import numbers
from slicecount.datasource.numbers import datapoint_items, sample_texts
from slicecount.datasource.render import ENCODER
from slicecount.datasource.simpod.shapes import number
from slicecount.promql.values import format_value
from slicecount.query.catalogue import Derived
from slicecount.query.tables import rows, tables
from slicecount.reads.chunks import Slices

SLICES = 6
COUNTS = st.lists(st.one_of(st.none(), st.integers(0, 2**40)), min_size=SLICES, max_size=SLICES)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(st.lists(COUNTS, min_size=1, max_size=8), st.data())
def test_lists_arrays_and_one_array_read_as_the_same_tables(
    read: list[list[int | None]], data: st.DataObject
) -> None:
    ids = [f"s{i}" for i in range(len(read))]
    as_lists = dict(zip(ids, read, strict=True))
    zeroed = [[c or 0 for c in counts] for counts in read]
    as_arrays = {i: np.array(c, dtype=np.int64) for i, c in zip(ids, zeroed, strict=True)}
    as_one = Slices({i: n for n, i in enumerate(ids)}, np.array(zeroed, dtype=np.int64))
    # cumulative buckets: each the parts of the one below plus one; a bucket with no part
    cuts = data.draw(st.lists(st.integers(0, len(ids)), min_size=1, max_size=4))
    derived = [Derived({"le": str(c)}, tuple(ids[:c]), 1.0) for c in cuts]
    found = {"selector": derived}
    results = [
        tables(found, rows(r, ids, SLICES))["selector"] for r in (as_lists, as_arrays, as_one)
    ]
    for table in results:
        assert table.totals.dtype == np.int64
        for d, totals, size in zip(
            derived, table.totals.tolist(), table.sizes.tolist(), strict=True
        ):
            summed = [sum(zeroed[ids.index(p)][k] for p in d.parts) for k in range(SLICES)]
            assert totals == list(accumulate(summed, initial=0))
            assert size == SLICES + 1


def test_buckets_are_walked_once_and_read_in_any_row_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memo, "_entries", {})

    def tries() -> int:
        return sum(what == "prefixes" for what, _ in memo._entries)

    ids = ["b1", "b2", "b3"]
    derived = [Derived({"le": str(c)}, tuple(ids[:c]), 1.0) for c in (1, 2, 3, 0)]
    counts = {"b1": [1, 2], "b2": [10, 20], "b3": [100, 200]}
    expected = [[0, 1, 3], [0, 11, 33], [0, 111, 333], [0, 0, 0]]
    for order in (ids, ids[::-1], ["x", *ids]):  # other reads, other rows for the same parts
        read = rows({i: counts.get(i, [5, 5]) for i in order}, order, 2)
        assert tables({"s": derived}, read)["s"].totals.tolist() == expected
    assert tries() == 1  # the trie of prefixes, made once
    other = [Derived(d.labels, d.parts, d.scale) for d in derived]  # rediscovered: made again
    assert tables({"s": other}, read)["s"].totals.tolist() == expected
    assert tries() == 2


def test_a_series_never_read_or_read_short() -> None:
    read = rows({"a": [1, 2], "b": []}, ["a", "b", "c"], 4)
    assert read.counts.tolist() == [[1, 2, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    assert read.sizes.tolist() == [2, 4, 4]  # "a" has no sample past what was read
    (table,) = tables({"x": [Derived({}, ("a",), 1.0)]}, read).values()
    assert table.sizes.tolist() == [3]


def test_counts_past_what_a_float_holds_stay_exact() -> None:
    big = 2**60 + 1
    read = rows({"a": [big, None, 1]}, ["a"], 3)
    assert read.counts.tolist() == [[big, 0, 1]]


FLOATS = st.one_of(
    st.floats(),
    st.integers(-(10**17), 10**17).map(float),
    st.sampled_from([-0.0, 0.0, 1e16, 1e-4, 9.99e-5, 1e21, 2.0**63, -(2.0**64), 0.1]),
)


VALUES = st.one_of(
    st.lists(FLOATS, min_size=1, max_size=20),  # each written
    st.lists(FLOATS, min_size=1, max_size=8).flatmap(  # repeats: the distinct ones written
        lambda pool: st.lists(st.sampled_from(pool), min_size=64, max_size=200)
    ),
)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(VALUES)
def test_sample_texts_are_format_value(values: list[float]) -> None:
    assert sample_texts(np.array(values)) == [format_value(v) for v in values]


def test_sample_texts_remembered_across_answers_are_each_values_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Texts are remembered by the float's bits: -0 and 0, a NaN and tiny or huge values
    keep their own text when asked again, among new values and past the bound."""
    monkeypatch.setattr(numbers, "TEXTS_KEPT", 20)
    monkeypatch.setattr(numbers, "_TEXTS", {})
    first = np.array([0.1, -0.0, 0.0, math.nan, 1e-7, 2.5e20, 3.0, 1 / 3, -math.inf] * 8)
    again = np.concatenate([first[::-1], [0.2, -1 / 3, 0.1 + 0.2]])
    for values in (first, again, first[:5], again):
        assert sample_texts(values) == [format_value(v) for v in values.tolist()]
        assert len(numbers._TEXTS) <= 20
    assert numbers._TEXTS  # (remembered: the cache is in use)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(VALUES)
def test_datapoint_items_are_the_json_of_number(values: list[float]) -> None:
    got = ["%s" % item for item in datapoint_items(np.array(values))]  # noqa: UP031  # frames'
    assert got == [ENCODER.encode(number(v)) for v in values]
