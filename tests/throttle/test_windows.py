"""The decision math, pure: fixed and sliding windows, remaining, reset and an honest
Retry-After, and the sliding window's documented bound against an exact sliding log."""

from __future__ import annotations

import math
from bisect import bisect_right

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slicecount.errors import ConfigurationError
from slicecount.throttle.decision import (
    Counts,
    Decision,
    Strategy,
    admits,
    check_strategy,
    decide,
    passes_at,
    weight,
    window_of,
)
from slicecount.throttle.limits import Limit, parse_limits

T0 = 1_700_000_040  # a multiple of 60
TEN = Limit(10, 1, "10/second")
MINUTE = Limit(100, 60, "100/minute")


def test_windows_are_aligned_to_the_epoch() -> None:
    assert window_of(MINUTE, T0) == T0 // 60
    assert window_of(MINUTE, T0 + 59.999) == T0 // 60
    assert window_of(MINUTE, T0 + 60) == T0 // 60 + 1
    assert window_of(TEN, T0 + 0.5) == T0


def test_the_previous_window_weighs_its_remaining_overlap() -> None:
    assert weight(MINUTE, T0, "sliding") == 1.0
    assert weight(MINUTE, T0 + 15, "sliding") == 0.75
    assert weight(MINUTE, T0 + 45, "sliding") == 0.25
    assert weight(MINUTE, T0 + 45, "fixed") == 0.0


def test_strategies_are_named() -> None:
    assert check_strategy("fixed") == "fixed"
    assert check_strategy("sliding") == "sliding"
    for bad in ("moving", "", None, "FIXED"):
        with pytest.raises(ConfigurationError, match=f"unknown throttle strategy {bad!r}"):
            check_strategy(bad)


def test_fixed_window_admits_up_to_the_amount() -> None:
    allowed = decide([TEN], "fixed", T0 + 0.25, [Counts(0, 8)])
    assert allowed == Decision(True, TEN, 1, 0.75, 0)
    last = decide([TEN], "fixed", T0 + 0.25, [Counts(0, 9)])
    assert last == Decision(True, TEN, 0, 0.75, 0)
    refused = decide([TEN], "fixed", T0 + 0.25, [Counts(0, 10)])
    assert refused == Decision(False, TEN, 0, 0.75, 1)
    # a cost of 3 with 2 left: refused, and the 2 are still there
    assert decide([TEN], "fixed", T0, [Counts(0, 8)], cost=3) == Decision(False, TEN, 2, 1.0, 1)


def test_fixed_retry_after_reaches_the_window_end_rounded_up() -> None:
    for offset, reset, retry in [(0, 60, 60), (0.5, 59.5, 60), (59.99, 0.01, 1), (30, 30, 30)]:
        decision = decide([MINUTE], "fixed", T0 + offset, [Counts(0, 100)])
        assert not decision.allowed
        assert decision.reset == pytest.approx(reset)
        assert decision.retry_after == retry


def test_several_limits_refusing_one_decides_and_allowed_the_tightest() -> None:
    hour, second = parse_limits("1000/hour; 5/second")
    now = T0 + 0.5
    allowed = decide([hour, second], "fixed", now, [Counts(0, 10), Counts(0, 3)])
    assert allowed.allowed and allowed.limit == second and allowed.remaining == 1
    tight = decide([hour, second], "fixed", now, [Counts(0, 998), Counts(0, 0)])
    assert tight.allowed and tight.limit == hour and tight.remaining == 1
    by_second = decide([hour, second], "fixed", now, [Counts(0, 10), Counts(0, 5)])
    assert (by_second.allowed, by_second.limit, by_second.retry_after) == (False, second, 1)
    # both refuse: the one that refuses longest decides (the request passes after both)
    both = decide([hour, second], "fixed", now, [Counts(0, 1000), Counts(0, 5)])
    assert (both.limit, both.retry_after) == (hour, math.ceil((T0 // 3600 + 1) * 3600 - now))


def test_the_applied_verdict_wins() -> None:
    # Redis's test decides what was counted; the decision reports it
    assert not decide([TEN], "fixed", T0, [Counts(0, 0)], allowed=False).allowed


def test_sliding_window_weighs_the_previous_count() -> None:
    # 15 s into the minute: 80 * 0.75 + 30 = 90 counted, 10 left before this request
    decision = decide([MINUTE], "sliding", T0 + 15, [Counts(80, 30)])
    assert decision == Decision(True, MINUTE, 9, 45.0, 0)
    refused = decide([MINUTE], "sliding", T0 + 15, [Counts(80, 40)])
    assert not refused.allowed and refused.remaining == 0
    # 80 * (1 - x) + 40 + 1 <= 100 from x = 0.2625: 15.75 s into the minute
    assert refused.retry_after == math.ceil(15.75 - 15) == 1
    late = decide([MINUTE], "sliding", T0 + 15, [Counts(100, 60)])
    assert late.retry_after == math.ceil(T0 + 60 * 0.61 - (T0 + 15)) == 22


def test_sliding_retry_after_may_reach_into_the_next_window() -> None:
    # 100 in this window already: at the next window's start that is its previous count,
    # weighted 1; a hit passes once 100 * (1 - y) + 1 <= 100: y = 0.01, 0.6 s in
    decision = decide([MINUTE], "sliding", T0 + 30, [Counts(0, 100)])
    assert not decision.allowed
    assert decision.retry_after == math.ceil(30 + 0.6) == 31
    assert passes_at(MINUTE, Counts(0, 100), 1, T0 + 30, "sliding") == pytest.approx(T0 + 60.6)


def future_counts(limit: Limit, counts: Counts, now: float, later: float) -> Counts:
    """The counts at ``later`` if nothing is counted after ``now``."""
    shift = window_of(limit, later) - window_of(limit, now)
    if shift == 0:
        return counts
    return Counts(counts.current, 0) if shift == 1 else Counts(0, 0)


@given(
    amount=st.integers(1, 200),
    seconds=st.sampled_from([1, 2, 10, 60, 3600]),
    previous=st.integers(0, 200),
    current=st.integers(0, 200),
    offset=st.floats(0, 0.999),
    cost=st.integers(1, 5),
    strategy=st.sampled_from(["fixed", "sliding"]),
)
def test_retry_after_is_the_first_moment_the_request_passes(
    amount: int,
    seconds: int,
    previous: int,
    current: int,
    offset: float,
    cost: int,
    strategy: Strategy,
) -> None:
    limit = Limit(amount, seconds, "x")
    cost = min(cost, amount)
    current = min(current, amount)  # a window never holds more than its amount
    previous = min(previous, amount) if strategy == "sliding" else 0
    now = T0 + offset * seconds
    counts = Counts(previous, current)
    at = passes_at(limit, counts, cost, now, strategy)
    assert at >= now
    decision = decide([limit], strategy, now, [counts], cost)
    if decision.allowed:
        assert at == now and decision.retry_after == 0
        return
    assert decision.retry_after == max(1, math.ceil(at - now))
    slack = 1e-6 * seconds
    just_after = at + slack
    assert admits(limit, future_counts(limit, counts, now, just_after),
                  weight(limit, just_after, strategy), cost)  # fmt: skip
    just_before = at - slack
    if just_before > now:
        assert not admits(limit, future_counts(limit, counts, now, just_before),
                          weight(limit, just_before, strategy), cost)  # fmt: skip


def simulate(strategy: Strategy, limit: Limit, times: list[float]) -> list[float]:
    """The admitted times of hits at ``times`` (ascending), decided by ``decide``."""
    counts: dict[int, int] = {}
    admitted = []
    for now in times:
        w = window_of(limit, now)
        seen = Counts(counts.get(w - 1, 0) if strategy == "sliding" else 0, counts.get(w, 0))
        if decide([limit], strategy, now, [seen]).allowed:
            counts[w] = counts.get(w, 0) + 1
            admitted.append(now)
    return admitted


def most_in_any_span(admitted: list[float], span: float) -> int:
    """The largest count of admitted hits in any half-open interval of ``span`` seconds."""
    return max(bisect_right(admitted, t + span - 1e-9) - i for i, t in enumerate(admitted))


def per_window(admitted: list[float], limit: Limit) -> dict[int, int]:
    found: dict[int, int] = {}
    for t in admitted:
        found[window_of(limit, t)] = found.get(window_of(limit, t), 0) + 1
    return found


@pytest.mark.parametrize("strategy", ["fixed", "sliding"])
def test_no_window_admits_more_than_the_amount(strategy: Strategy) -> None:
    limit = Limit(10, 1, "10/second")
    flood = [T0 + i / 200 for i in range(200 * 10)]  # 200 a second for 10 s
    admitted = simulate(strategy, limit, flood)
    assert max(per_window(admitted, limit).values()) <= 10
    if strategy == "fixed":
        assert set(per_window(admitted, limit).values()) == {10}


def test_a_steady_flood_is_held_to_the_amount_in_every_sliding_span() -> None:
    limit = Limit(10, 1, "10/second")
    flood = [T0 + i / 200 for i in range(200 * 10)]
    sliding = simulate("sliding", limit, flood)
    warm = [t for t in sliding if t >= T0 + 1]  # the first window has no previous one
    assert most_in_any_span(warm, 1.0) <= 10 + 1


def test_the_sliding_bound_is_reached_only_by_hits_late_in_a_window() -> None:
    # the documented worst case: a window's hits all in its last instants, then a flood
    limit = Limit(10, 1, "10/second")
    burst = [T0 + 0.999] * 10
    flood = [T0 + 1 + i / 1000 for i in range(1000)]
    admitted = simulate("sliding", limit, burst + flood)
    most = most_in_any_span(admitted, 1.0)
    assert 10 < most < 2 * 10  # over the amount, under twice the amount
    assert max(per_window(admitted, limit).values()) <= 10
    # the fixed window lets all 20 through within 11 ms
    assert most_in_any_span(simulate("fixed", limit, burst + flood), 0.011) == 20
