"""The rate-limit operations: one request against an identity's limits, and the local quota's
claims of tokens. Pure (the Lua scripts in ``lua/throttle*.lua`` do the counting).

Every operation is one round trip and one script, atomic on Redis: ``hit`` reads the counts of
every limit and counts the request in all of them only if all admit it (a refused request
counts nowhere). Counters are plain strings, one per (identity, limit, window), in the
identity's hash slot; each expires by itself at its window's end (the next window's end for the
sliding strategy, which reads it as "previous" then) plus ``GRACE`` seconds, so no cleaner
visits them.

**Local quota** (``claim`` / ``give_back``, fixed windows only): a process takes up to ``N``
tokens of the current window at once and spends them without asking Redis again: one round
trip per ``N`` requests (and per limit). A claim never takes past the limit, so a window still
admits at most ``amount`` in all: no overshoot (given hosts whose clocks agree: a process whose
clock lags spends its tokens of window ``w`` a little into ``w + 1``). The price is undershoot:
tokens a process holds are refused to the others until it spends them, so with ``P``
processes up to ``P * (N - 1)`` hits of a window may be refused while tokens lie unspent
elsewhere. A process gives back what it holds when it sees the next window (too late for the
old one: that only keeps the counter true) and when it closes (then others may use them);
one that found a window spent asks no more until the window ends; a claim whose reply came
too late may have been applied, its tokens lost to everyone. With demand enough, one process
alone admits exactly ``amount``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from slicecount.core.series import shown
from slicecount.errors import ConfigurationError
from slicecount.operations.batches import Batch, Context, Operation, ScriptCall, pairs
from slicecount.operations.checks import check_epoch
from slicecount.throttle.decision import Counts, Decision, check_strategy, decide, weight, window_of
from slicecount.throttle.limits import Limit, same_window
from slicecount.throttle.quota import Quotas

GRACE = 1.0
"""Seconds a counter outlives its window: a process whose clock lags a little behind still
finds the count of the window it is in."""


def check_limits(limits: object) -> tuple[Limit, ...]:
    """``limits`` as a tuple of distinct Limits, else ConfigurationError naming what is wrong
    (two limits of the same amount and window would count every hit twice)."""
    if isinstance(limits, Limit):
        return (limits,)
    if isinstance(limits, str) or not isinstance(limits, Sequence) or not limits:
        raise ConfigurationError(
            f"limits must be a non-empty sequence of Limit (see parse_limits), got {limits!r}"
        )
    for i, limit in enumerate(limits):
        if not isinstance(limit, Limit):
            raise ConfigurationError(f"limits must be Limit objects, got {limit!r}")
        twin = next((seen for seen in limits[:i] if same_window(seen, limit)), None)
        if twin is not None:
            raise ConfigurationError(f"limit {limit.text!r} is given twice (as {twin.text!r})")
    return tuple(limits)


def check_identity(identity: object) -> str:
    """The identity a limit counts for (any string), else ConfigurationError naming it."""
    if not isinstance(identity, str):
        raise ConfigurationError(f"a throttle identity must be a string, got {shown(identity)}")
    return identity


def check_cost(cost: object, limits: Sequence[Limit]) -> int:
    """A cost is a whole number of hits that some window could admit."""
    smallest = min(limit.amount for limit in limits)
    if isinstance(cost, bool) or not isinstance(cost, int) or not 1 <= cost <= smallest:
        raise ConfigurationError(
            f"a request's cost must be an integer 1 .. {smallest} (the smallest limit's "
            f"amount: more could never pass), got {shown(cost)}"
        )
    return cost


def ttl_ms(limit: Limit, now: float, windows: int = 1) -> int:
    """Milliseconds a counter written at ``now`` must live: to the end of its window (and
    ``windows - 1`` more), plus the grace."""
    end = (window_of(limit, now) + windows) * limit.seconds
    return math.ceil((end - now + GRACE) * 1000)


def hit(
    ctx: Context,
    limits: Sequence[Limit],
    identity: str,
    strategy: str = "fixed",
    cost: int = 1,
    now: float | None = None,
) -> Operation[Decision]:
    """Count one request of ``cost`` against every limit of ``identity`` at ``now`` (default:
    the clock), if and only if all of them admit it; the decision, from the counts Redis
    read. One round trip, atomic."""
    limits = check_limits(limits)
    identity = check_identity(identity)
    chosen = check_strategy(strategy)
    cost = check_cost(cost, limits)
    at = ctx.clock() if now is None else check_epoch(now, "now")
    spans = 1 if chosen == "fixed" else 2  # windows a counter is read in
    keys: list[str] = []
    args: list[int | str] = [cost, spans]
    for limit in limits:
        window = window_of(limit, at)
        keys.append(ctx.keys.throttle(identity, limit.amount, limit.seconds, window))
        if chosen == "sliding":
            keys.append(ctx.keys.throttle(identity, limit.amount, limit.seconds, window - 1))
        # repr(): the shortest text Lua reads back as the very same double
        args += [limit.amount, repr(weight(limit, at, chosen)), ttl_ms(limit, at, spans)]
    (reply,) = yield Batch([ScriptCall("throttle", tuple(keys), tuple(args))])
    counted, *flat = reply
    counts = [Counts(int(previous), int(current)) for previous, current in pairs(flat)]
    return decide(limits, chosen, at, counts, cost, allowed=counted == 1)


def claim(
    ctx: Context, limit: Limit, identity: str, want: int, now: float | None = None
) -> Operation[int]:
    """Take up to ``want`` tokens of the current fixed window of ``limit`` for ``identity``
    (never past the limit); how many were granted (0: the window is spent)."""
    (limit,) = check_limits(limit)
    identity = check_identity(identity)
    if want.__class__ is not int or want < 1:
        raise ConfigurationError(f"tokens wanted must be an integer >= 1, got {shown(want)}")
    at = ctx.clock() if now is None else check_epoch(now, "now")
    key = ctx.keys.throttle(identity, limit.amount, limit.seconds, window_of(limit, at))
    call = ScriptCall("throttle_claim", (key,), (limit.amount, want, ttl_ms(limit, at)))
    (granted,) = yield Batch([call])
    return int(granted)


def give_back(ctx: Context, limit: Limit, identity: str, window: int, n: int) -> Operation[int]:
    """Return ``n`` claimed and unspent tokens to ``window`` of ``limit`` (if its counter still
    exists; never below zero); how many went back."""
    (limit,) = check_limits(limit)
    identity = check_identity(identity)
    if window.__class__ is not int or n.__class__ is not int or n < 0:
        raise ConfigurationError(
            f"give_back needs a window index and a count >= 0, got {shown(window)}, {shown(n)}"
        )
    if n == 0:
        return 0
    key = ctx.keys.throttle(identity, limit.amount, limit.seconds, window)
    (back,) = yield Batch([ScriptCall("throttle_give_back", (key,), (n,))])
    return int(back)


def spend(
    ctx: Context, quotas: Quotas, limits: Sequence[Limit], identity: str
) -> Operation[Decision]:
    """One request against the local quota: spent from the tokens this process holds, or
    after the claims (and the give-backs of past windows) ``quotas`` asks for. No round trip
    while tokens last."""
    limits, identity = check_limits(limits), check_identity(identity)
    now = ctx.clock()
    while True:
        step = quotas.take(limits, identity, now)
        for back in step.give_backs:
            yield from give_back(ctx, back.limit, identity, back.window, back.tokens)
        if step.decision is not None:
            return step.decision
        for wanted in step.claims:
            granted = yield from claim(ctx, wanted.limit, identity, wanted.want, now)
            quotas.grant(identity, wanted, granted, now)
