"""The local quota's bookkeeping, pure: what to claim, spending, refusing without a round trip,
giving back at the window's end."""

from __future__ import annotations

import threading

from slicecount.throttle.decision import Decision
from slicecount.throttle.limits import parse_limits
from slicecount.throttle.quota import Claim, GiveBack, Quotas

T0 = 1_700_000_000
HOUR, SECOND = parse_limits("1000/hour; 5/second")
BOTH = (HOUR, SECOND)


def test_nothing_held_asks_for_claims_of_every_limit() -> None:
    quotas = Quotas(100)
    step = quotas.take(BOTH, "u", T0 + 0.5)
    assert step.decision is None and step.give_backs == []
    # never more than the limit's amount
    assert step.claims == [Claim(HOUR, T0 // 3600, 100), Claim(SECOND, T0, 5)]


def test_tokens_held_are_spent_without_asking() -> None:
    quotas = Quotas(3)
    now = T0 + 0.25
    for claim in quotas.take(BOTH, "u", now).claims:
        quotas.grant("u", claim, claim.want, now)
    first = quotas.take(BOTH, "u", now)
    assert first.claims == [] and first.decision == Decision(True, HOUR, 2, 3600 - 800.25, 0)
    assert quotas.take(BOTH, "u", now).decision is not None
    third = quotas.take(BOTH, "u", now).decision
    assert third is not None and third.allowed and third.remaining == 0
    assert [c.limit for c in quotas.take(BOTH, "u", now).claims] == [HOUR, SECOND]


def test_a_window_redis_has_spent_refuses_without_a_round_trip() -> None:
    quotas = Quotas(3)
    now = T0 + 0.25
    claim = quotas.take([SECOND], "u", now).claims[0]
    quotas.grant("u", claim, 2, now)  # less than asked: the window has nothing more
    assert [quotas.take([SECOND], "u", now).decision is not None for _ in range(2)] == [True] * 2
    refused = quotas.take([SECOND], "u", now)
    assert refused.claims == []
    assert refused.decision == Decision(False, SECOND, 0, 0.75, 1)
    # and the other limits are not claimed for a request that cannot pass
    both = quotas.take(BOTH, "u", now)
    assert both.claims == [] and both.decision is not None and not both.decision.allowed
    assert both.decision.limit == SECOND


def test_nothing_granted_refuses_at_once() -> None:
    quotas = Quotas(3)
    claim = quotas.take([SECOND], "u", T0).claims[0]
    quotas.grant("u", claim, 0, T0)
    decision = quotas.take([SECOND], "u", T0).decision
    assert decision is not None and not decision.allowed and decision.retry_after == 1


def test_a_new_window_gives_back_the_old_ones_tokens() -> None:
    quotas = Quotas(4)
    claim = quotas.take([SECOND], "u", T0).claims[0]
    quotas.grant("u", claim, 4, T0)
    quotas.take([SECOND], "u", T0)  # one spent, three held
    step = quotas.take([SECOND], "u", T0 + 1.1)
    assert step.give_backs == [GiveBack(SECOND, T0, 3)]
    assert step.claims == [Claim(SECOND, T0 + 1, 4)] and step.decision is None


def test_racing_claims_add_up() -> None:
    quotas = Quotas(2)
    claim = quotas.take([SECOND], "u", T0).claims[0]
    quotas.grant("u", claim, 2, T0)
    quotas.grant("u", claim, 2, T0)
    assert sum(quotas.take([SECOND], "u", T0).decision is not None for _ in range(4)) == 4
    assert quotas.take([SECOND], "u", T0).claims  # all four spent: ask again


def test_identities_are_apart_and_drain_returns_what_is_held() -> None:
    quotas = Quotas(5)
    for identity in ("a", "b"):
        claim = quotas.take([SECOND], identity, T0).claims[0]
        quotas.grant(identity, claim, 5, T0)
    quotas.take([SECOND], "a", T0)
    assert sorted(quotas.drain()) == [
        ("a", GiveBack(SECOND, T0, 4)),
        ("b", GiveBack(SECOND, T0, 5)),
    ]
    assert len(quotas) == 0 and quotas.drain() == []


def test_reset_forgets_without_giving_back() -> None:
    quotas = Quotas(5)
    claim = quotas.take([SECOND], "a", T0).claims[0]
    quotas.grant("a", claim, 5, T0)
    quotas.reset()
    assert quotas.drain() == [] and quotas.take([SECOND], "a", T0).claims


def test_buckets_are_bounded_past_windows_first() -> None:
    quotas = Quotas(5, max_buckets=3)
    for identity, now in (("old", T0), ("a", T0 + 5), ("b", T0 + 5), ("c", T0 + 5)):
        claim = quotas.take([SECOND], identity, now).claims[0]
        quotas.grant(identity, claim, 5, now)
    assert len(quotas) == 3 and "old" not in {identity for identity, _ in quotas.drain()}
    for identity in ("a", "b", "c", "d"):  # all current: they go, the newest stays
        claim = quotas.take([SECOND], identity, T0 + 5).claims[0]
        quotas.grant(identity, claim, 5, T0 + 5)
    assert len(quotas) == 1


def test_threads_never_spend_more_than_granted() -> None:
    quotas = Quotas(7)
    claim = quotas.take([SECOND], "u", T0).claims[0]
    for _ in range(3):
        quotas.grant("u", claim, 5, T0)  # 15 tokens held
    admitted: list[bool] = []

    def spend() -> None:
        for _ in range(50):
            decision = quotas.take([SECOND], "u", T0).decision
            admitted.append(decision is not None and decision.allowed)

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(admitted) == 15
