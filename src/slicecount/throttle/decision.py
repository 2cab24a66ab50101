"""The decision of a rate limit from the counts of its windows. Pure.

Windows are aligned to the epoch: window ``w`` of a limit of ``L`` seconds covers
``[w * L, (w + 1) * L)``, ``w = int(now // L)`` (the seed's ``int(time() / 60)``), so every
process agrees on them without talking.

**fixed**: a hit passes while the current window's count plus its cost stays within the amount.
Each window admits at most ``amount`` (exactly that when asked more) however many processes
ask; a burst at the end of one window and another at the start of the next admit up to
``2 * amount`` within ``L`` seconds.

**sliding** (the sliding-window counter): the previous window's count weighted by the part of
it the last ``L`` seconds still cover, ``1 - elapsed / L``, plus the current window's count::

    estimate = previous * (1 - elapsed / L) + current;   a hit passes if estimate + cost <= amount

The estimate assumes the previous window's hits were spread evenly. Its bound against an exact
sliding log (the hits of the last ``L`` seconds, remembered one by one): the part of the
previous window still covered holds between 0 and ``previous`` hits where the estimate counts
``previous * (1 - elapsed / L)``, so the estimate is off by at most ``previous * max(x, 1 - x)
<= amount`` (``x = elapsed / L``): it over-counts when the previous window's hits came early
(a client is refused sooner than an exact log would), under-counts when they came late. Since
the estimate includes the whole current count, a window never admits more than ``amount`` and
any ``L`` seconds admit fewer than ``2 * amount``; reaching that takes all of one window's hits
in its last instants and a flood through the next, while traffic spread evenly is counted
closely (a steady flood is held to ``amount`` per ``L`` seconds, give or take one hit).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from slicecount.errors import ConfigurationError
from slicecount.throttle.limits import Limit

Strategy = Literal["fixed", "sliding"]
STRATEGIES: tuple[Strategy, ...] = ("fixed", "sliding")


class Counts(NamedTuple):
    """A limit's hits before this request: in the previous window (read by the sliding
    strategy only, else 0) and in the current one."""

    previous: int
    current: int


@dataclass(frozen=True)
class Decision:
    """What the limits say about one request.

    ``limit`` decided it: the refusing one (the one that refuses longest when several do), or
    when allowed the one with the fewest hits remaining. ``remaining``: hits of cost 1 that
    limit would still admit now. ``reset``: seconds until its current window ends.
    ``retry_after``: whole seconds, rounded up, until this request could pass if nobody else
    hits meanwhile (0 when allowed): the window's end for the fixed window, the moment the
    estimate has fallen far enough for the sliding one."""

    allowed: bool
    limit: Limit
    remaining: int
    reset: float
    retry_after: int


def check_strategy(strategy: object) -> Strategy:
    """``strategy`` if it is "fixed" or "sliding", else ConfigurationError naming it."""
    for known in STRATEGIES:
        if strategy == known:
            return known
    raise ConfigurationError(f"unknown throttle strategy {strategy!r}: expected fixed or sliding")


def window_of(limit: Limit, now: float) -> int:
    """The index of the window of ``limit`` that holds ``now``."""
    return int(now // limit.seconds)


def weight(limit: Limit, now: float, strategy: Strategy) -> float:
    """How much of the previous window's count still counts at ``now`` (0 for fixed)."""
    if strategy == "fixed":
        return 0.0
    elapsed = now - window_of(limit, now) * limit.seconds
    return 1.0 - elapsed / limit.seconds


def admits(limit: Limit, counts: Counts, weight: float, cost: int) -> bool:
    """The test the Lua script makes, written the same way (the same doubles in the same
    order give the same answer in Lua and in Python)."""
    return counts.previous * weight + counts.current + cost <= limit.amount


def decide(
    limits: Sequence[Limit],
    strategy: Strategy,
    now: float,
    counts: Sequence[Counts],
    cost: int = 1,
    allowed: bool | None = None,
) -> Decision:
    """The decision for a request of ``cost`` at ``now`` from each limit's counts before it.
    ``allowed`` is the verdict Redis applied, when known (the same test, made there)."""
    weights = [weight(limit, now, strategy) for limit in limits]
    passes = [admits(*each, cost) for each in zip(limits, counts, weights, strict=True)]
    if allowed is None:
        allowed = all(passes)
    if allowed:
        left = [
            _remaining(limit, c.previous * w + c.current + cost)
            for limit, c, w in zip(limits, counts, weights, strict=True)
        ]
        i = min(range(len(limits)), key=left.__getitem__)
        return Decision(True, limits[i], left[i], _reset(limits[i], now), 0)
    at = [
        now if ok else passes_at(limit, c, cost, now, strategy)
        for limit, c, ok in zip(limits, counts, passes, strict=True)
    ]
    i = max(range(len(limits)), key=at.__getitem__)
    limit, c, w = limits[i], counts[i], weights[i]
    retry = max(1, math.ceil(at[i] - now))
    return Decision(
        False, limit, _remaining(limit, c.previous * w + c.current), _reset(limit, now), retry
    )


def passes_at(limit: Limit, counts: Counts, cost: int, now: float, strategy: Strategy) -> float:
    """The first moment from ``now`` at which a hit of ``cost`` passes, if nothing else is
    counted meanwhile (the estimate only falls as time passes: once true, the test stays
    true). Needs ``cost <= amount``, else no moment comes."""
    a, p, c, length = limit.amount, counts.previous, counts.current, limit.seconds
    start = window_of(limit, now) * length
    if strategy == "fixed":
        return now if c + cost <= a else start + length
    if admits(limit, counts, weight(limit, now, strategy), cost):
        return now
    if c + cost <= a:  # later in this window: p * (1 - x) + c + cost <= a (here p > 0)
        return max(now, start + length * (1.0 - (a - c - cost) / p))
    # in the next one, where c is the previous count: c * (1 - y) + cost <= a
    return start + length * (2.0 - (a - cost) / c)


def _remaining(limit: Limit, estimate: float) -> int:
    return max(0, math.floor(limit.amount - estimate))


def _reset(limit: Limit, now: float) -> float:
    return (window_of(limit, now) + 1) * limit.seconds - now
