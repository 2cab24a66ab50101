"""The throttle's core for the middleware: limits checked in Redis within a deadline.

A ``Limiter`` owns its stores, built with ``socket_timeout`` (and the connect timeout) set to
its ``deadline``: each wait on Redis (connecting, reading a reply) gives up after it, so a Redis
down, paused or slow costs a request about one deadline (a few when a new connection has to be
made). Then the request is served (fail-open, the default) or answered 503 (``fail_closed``),
and ``slicecount.throttle.errors`` counts it through the Recorder. (A hit that timed out may
still be counted when Redis catches up: it was on its way.) Sync and async checks run the same
operations (``throttle.operations``); the async one never blocks the event loop. Use a limiter
from one event loop (its asyncio connections belong to the loop that made them).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slicecount.config import Settings
from slicecount.config.topology import without_options
from slicecount.errors import ConfigurationError, StoreError
from slicecount.operations.batches import Clock, Operation
from slicecount.recording.lifecycle import Live
from slicecount.store import Store
from slicecount.store.asyncio import AsyncStore
from slicecount.throttle.decision import Decision, check_strategy
from slicecount.throttle.limits import Limit
from slicecount.throttle.operations import check_identity, check_limits, give_back, hit, spend
from slicecount.throttle.quota import Quotas

if TYPE_CHECKING:
    from slicecount.recording.recorder import Recorder

logger = logging.getLogger("slicecount")

TIMEOUTS = frozenset({"socket_timeout", "socket_connect_timeout"})
ERRORS = "slicecount.throttle.errors"
"""The series counting the checks Redis did not answer in time (one per check)."""
STRIPES = 64
"""Locks that serialize the local quota's claims of one identity (identities share them)."""


@dataclass(frozen=True)
class Verdict:
    """What to do with a request: ``status`` None to serve it, 429 when a limit refuses it,
    503 when Redis failed and the limiter fails closed. ``decision`` is None when Redis
    failed (nothing was decided)."""

    decision: Decision | None
    status: int | None

    @property
    def allowed(self) -> bool:
        return self.status is None


class Limiter:
    """Checks requests against rate limits in Redis (see the module's docstring)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        strategy: str | None = None,
        deadline: float | None = None,
        fail_closed: bool = False,
        local_quota: int | None = None,
        recorder: Recorder | None = None,
        clock: Clock = time.time,
    ) -> None:
        """``settings``: where Redis is (default: the ``SLICECOUNT_*`` environment);
        ``strategy``: "fixed" or "sliding" (decision.py), ``deadline``: seconds a check waits
        on Redis (both default to the settings' ``throttle_strategy``/``throttle_deadline``);
        ``local_quota``: claim this many tokens at a time per (limit, identity) and spend
        them in-process (fixed windows only; throttle/operations.py documents the bound);
        ``recorder``: where throttle errors are counted (default: the process-wide one)."""
        base = settings if settings is not None else Settings.from_env()
        strategy = base.throttle_strategy if strategy is None else strategy
        deadline = base.throttle_deadline if deadline is None else deadline
        self.strategy = check_strategy(strategy)
        if isinstance(deadline, bool) or not isinstance(deadline, int | float) or deadline <= 0:
            raise ConfigurationError(
                f"deadline must be a positive number of seconds, got {deadline!r}"
            )
        if local_quota is not None and (local_quota.__class__ is not int or local_quota < 1):
            raise ConfigurationError(f"local_quota must be an integer >= 1, got {local_quota!r}")
        if local_quota is not None and self.strategy != "fixed":
            raise ConfigurationError("local_quota works with the fixed window only, not 'sliding'")
        # the deadline is both timeouts, whatever the URL says (URL options win in redis-py)
        url = without_options(base.redis_url, TIMEOUTS)
        self.settings = base.with_changes(redis_url=url, socket_timeout=float(deadline))
        self.deadline = float(deadline)
        self.fail_closed = fail_closed
        self.recorder = recorder
        self._clock = clock
        self._quotas = Quotas(local_quota) if local_quota is not None else None
        self._store: Store | None = None
        self._astore: AsyncStore | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None
        self._failing = False
        self._reset()
        _live.add(self)

    def _reset(self) -> None:
        """Fresh locks, and no tokens (at start, and in a forked child: the parent's tokens
        are the parent's to spend)."""
        self._store_lock = threading.Lock()
        self._locks = [threading.Lock() for _ in range(STRIPES)]
        self._alocks = [asyncio.Lock() for _ in range(STRIPES)]
        if self._quotas is not None:
            self._quotas.reset()

    # -- checks --------------------------------------------------------------------------------

    def check(self, limits: Sequence[Limit], identity: str) -> Verdict:
        """Count one request of ``identity`` against ``limits`` (from ``parse_limits``) and
        say what to answer. Raises only for bad arguments (ConfigurationError)."""
        limits, identity = check_limits(limits), check_identity(identity)
        try:
            store = self._sync_store()
            with self._turn(identity):
                decision = store.run(self._operation(store, limits, identity))
        except ConfigurationError:
            raise
        except Exception as exc:
            return self._failed(exc)
        return self._answered(decision)

    async def check_async(self, limits: Sequence[Limit], identity: str) -> Verdict:
        """``check()`` on redis.asyncio: the event loop is never blocked."""
        limits, identity = check_limits(limits), check_identity(identity)
        try:
            loop = asyncio.get_running_loop()
            if self._astore is None or self._aloop is not loop:
                # asyncio connections and locks belong to their loop: a new loop (a test
                # client's, a Flask async view's) gets its own; no I/O here, no race
                self._astore = AsyncStore(self.settings, clock=self._clock)
                self._alocks = [asyncio.Lock() for _ in range(STRIPES)]
                self._aloop = loop
            store = self._astore
            async with self._async_turn(identity):
                decision = await store.run(self._operation(store, limits, identity))
        except ConfigurationError:
            raise
        except Exception as exc:
            return self._failed(exc)
        return self._answered(decision)

    @contextmanager
    def _turn(self, identity: str) -> Iterator[None]:
        """With quotas, the claims of one identity wait for each other, but never past the
        deadline (then the claim goes ahead unlocked)."""
        lock = self._locks[hash(identity) % STRIPES] if self._quotas is not None else None
        locked = lock is not None and lock.acquire(timeout=self.deadline)
        try:
            yield
        finally:
            if locked and lock is not None:
                lock.release()

    @asynccontextmanager
    async def _async_turn(self, identity: str) -> AsyncIterator[None]:
        """``_turn`` on the event loop's locks."""
        lock = self._alocks[hash(identity) % STRIPES] if self._quotas is not None else None
        locked = lock is not None and await _acquire(lock, self.deadline)
        try:
            yield
        finally:
            if locked and lock is not None:
                lock.release()

    def _operation(
        self, store: Store | AsyncStore, limits: tuple[Limit, ...], identity: str
    ) -> Operation[Decision]:
        if self._quotas is None:
            return hit(store.context, limits, identity, self.strategy)
        return spend(store.context, self._quotas, limits, identity)

    def _sync_store(self) -> Store:
        store = self._store
        if store is None:
            with self._store_lock:  # (a cluster client reads the slot map when built)
                if self._store is None:
                    self._store = Store(self.settings, clock=self._clock)
                store = self._store
        return store

    def _answered(self, decision: Decision) -> Verdict:
        if self._failing:
            self._failing = False
            logger.warning("slicecount throttle: redis answers again")
        return Verdict(decision, None if decision.allowed else 429)

    def _failed(self, error: Exception) -> Verdict:
        """The verdict when Redis did not answer in time (or anything else went wrong)."""
        if not self._failing:
            self._failing = True
            logger.warning(
                "slicecount throttle: redis did not answer within %g s (%s); failing %s "
                "until it does",
                self.deadline,
                error,
                "closed (503)" if self.fail_closed else "open",
                exc_info=not isinstance(error, StoreError),
            )
        verdict = Verdict(None, 503 if self.fail_closed else None)
        recorder = self.recorder
        if recorder is None:
            from slicecount.recording.default import get_recorder

            try:
                recorder = get_recorder()
            except Exception:  # bad SLICECOUNT_* settings: the throttle still answers
                return verdict
        recorder.add(ERRORS)
        return verdict

    # -- closing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Give back the local tokens not spent (best effort) and release the connections."""
        store = self._store
        if store is not None:
            for identity, back in self._quotas.drain() if self._quotas is not None else ():
                try:
                    store.run(
                        give_back(store.context, back.limit, identity, back.window, back.tokens)
                    )
                except StoreError:
                    break  # Redis is away: the tokens expire with their windows
            store.close()
            self._store = None

    async def aclose(self) -> None:
        """``close()`` for the asyncio side (and the blocking one, if it was used)."""
        store = self._astore
        if store is not None:
            for identity, back in self._quotas.drain() if self._quotas is not None else ():
                try:
                    await store.run(
                        give_back(store.context, back.limit, identity, back.window, back.tokens)
                    )
                except StoreError:
                    break
            await store.close()
            self._astore = None
        self.close()

    def __enter__(self) -> Limiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _acquire(lock: asyncio.Lock, timeout: float) -> bool:
    """Take ``lock`` unless that takes longer than ``timeout``."""
    if not lock.locked():  # the usual case, taken at once (wait_for would start a task)
        await lock.acquire()
        return True
    try:
        return await asyncio.wait_for(lock.acquire(), timeout)
    except asyncio.TimeoutError:
        return False


_live: Live[Limiter] = Live(lambda limiter: limiter._reset())
"""The limiters of this process: a forked child's start with fresh locks and no tokens."""
