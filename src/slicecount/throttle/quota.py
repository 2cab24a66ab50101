"""The local quota's bookkeeping: tokens of fixed windows claimed from Redis and spent in this
process (the claims themselves are ``operations.claim``; the bound is documented there). Pure.

``take()`` spends a token of every limit when this process holds them all, refuses at once when
a limit's window is known to be spent, and otherwise says which claims to make (and which
tokens of past windows to give back); the limiter makes them, reports each with ``grant()``
and asks again. Thread-safe: every method holds one short lock and does no I/O.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from slicecount.throttle.decision import Decision, window_of
from slicecount.throttle.limits import Limit

MAX_BUCKETS = 100_000
"""(identity, limit) buckets kept; past this, buckets of windows already over are dropped
(their tokens can no longer admit anyone), then if need be all of them."""

BucketKey = tuple[str, int, int]  # identity, amount, seconds


@dataclass
class Bucket:
    """This process's tokens of one limit's window for one identity."""

    limit: Limit
    window: int
    tokens: int = 0
    spent: bool = False  # Redis granted less than asked: the window has nothing more


class Claim(NamedTuple):
    """Tokens to ask Redis for (``operations.claim``)."""

    limit: Limit
    window: int
    want: int


class GiveBack(NamedTuple):
    """Unspent tokens of a window to return (``operations.give_back``)."""

    limit: Limit
    window: int
    tokens: int


@dataclass
class Step:
    """What ``take()`` decided: a decision, or the claims to make first; and the tokens of
    past windows to give back either way."""

    decision: Decision | None = None
    claims: list[Claim] = field(default_factory=list)
    give_backs: list[GiveBack] = field(default_factory=list)


class Quotas:
    """Tokens claimed ``size`` at a time per (identity, limit), spent locally."""

    def __init__(self, size: int, max_buckets: int = MAX_BUCKETS) -> None:
        self.size = size
        self.max_buckets = max_buckets
        self._lock = threading.Lock()
        self._buckets: dict[BucketKey, Bucket] = {}

    def take(self, limits: Sequence[Limit], identity: str, now: float) -> Step:
        """Spend one token of each limit at ``now`` if they are all here; else the refusal,
        or the claims that would let ``take()`` decide next time."""
        step = Step()
        held: list[Bucket] = []
        spent: list[Limit] = []
        with self._lock:
            for limit in limits:
                window = window_of(limit, now)
                bucket = self._current(limit, identity, window, step)
                if bucket is not None and bucket.tokens:
                    held.append(bucket)
                elif bucket is not None and bucket.spent:
                    spent.append(limit)
                else:
                    step.claims.append(Claim(limit, window, min(self.size, limit.amount)))
            if spent:  # refused without a round trip (and without claiming for the others)
                step.claims = []
                limit = max(spent, key=lambda each: _end(each, now))
                wait = _end(limit, now) - now
                step.decision = Decision(False, limit, 0, wait, max(1, math.ceil(wait)))
            elif not step.claims:
                for bucket in held:
                    bucket.tokens -= 1
                low = min(held, key=lambda b: b.tokens)
                step.decision = Decision(True, low.limit, low.tokens, _end(low.limit, now) - now, 0)
        return step

    def grant(self, identity: str, claim: Claim, granted: int, now: float) -> None:
        """Record what Redis granted for ``claim`` at ``now`` (added to the tokens already
        held: two claims racing for one bucket lose nothing)."""
        key = (identity, claim.limit.amount, claim.limit.seconds)
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None or bucket.window != claim.window:
                self._bound(now)
                bucket = self._buckets[key] = Bucket(claim.limit, claim.window)
            bucket.tokens += granted
            bucket.spent = bucket.spent or granted < claim.want

    def drain(self) -> list[tuple[str, GiveBack]]:
        """Forget every bucket; the unspent tokens to give back, with their identities."""
        with self._lock:
            held = [
                (identity, GiveBack(bucket.limit, bucket.window, bucket.tokens))
                for (identity, _, _), bucket in self._buckets.items()
                if bucket.tokens
            ]
            self._buckets.clear()
        return held

    def reset(self) -> None:
        """Forget everything without giving back (after fork: the parent's tokens are its)."""
        self._lock = threading.Lock()
        self._buckets = {}

    def __len__(self) -> int:
        return len(self._buckets)

    def _current(self, limit: Limit, identity: str, window: int, step: Step) -> Bucket | None:
        """The bucket of the current window, or None; a bucket of a past window is dropped,
        its unspent tokens noted in ``step`` to be given back."""
        key = (identity, limit.amount, limit.seconds)
        bucket = self._buckets.get(key)
        if bucket is None or bucket.window == window:
            return bucket
        del self._buckets[key]
        if bucket.tokens and bucket.window < window:
            step.give_backs.append(GiveBack(limit, bucket.window, bucket.tokens))
        return None

    def _bound(self, now: float) -> None:
        """Make room for one more bucket."""
        if len(self._buckets) < self.max_buckets:
            return
        for key, bucket in list(self._buckets.items()):
            if bucket.window < window_of(bucket.limit, now):
                del self._buckets[key]
        if len(self._buckets) >= self.max_buckets:
            self._buckets.clear()


def _end(limit: Limit, now: float) -> float:
    return float((window_of(limit, now) + 1) * limit.seconds)
