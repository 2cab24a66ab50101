"""How concurrent requests share the datasource: heavy ones take turns, and the requests of
one dashboard refresh share their reads.

Grafana sends a dashboard's panels at once, and several read the same slices: the p50, p95
and p99 panels of a histogram read the same buckets over the same range, "requests per
second" and "error ratio" the same counters. A read is shared with a request only when it
started after that request arrived, so the answer is as fresh as reading it then: nothing is
cached past what a request could have seen, and a count written before a request arrived is
always in its answer. A read is forgotten once every request under way arrived after it
started.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Generic, TypeVar

T = TypeVar("T")

KEPT_READS = 64
"""Reads remembered at most (each only while a request that arrived before it is under
way: then no request can share it)."""


class Turns:
    """At most ``size`` holders at once, the others waiting in arrival order. The semaphore is
    made in the running loop (a test client may start a new loop for the same app)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._gate: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    @asynccontextmanager
    async def __call__(self) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        if self._gate is None or self._gate[0] is not loop:
            self._gate = (loop, asyncio.Semaphore(self.size))
        async with self._gate[1]:
            yield


class SharedReads(Generic[T]):
    """Reads by key, each offered to the requests that arrived before it started."""

    def __init__(self, max_points: int, clock: Callable[[], float] = time.monotonic) -> None:
        """``max_points``: the points the remembered answers may hold together."""
        self.max_points = max_points
        self.clock = clock
        self._reads: OrderedDict[Hashable, tuple[float, int, asyncio.Future[T]]] = OrderedDict()
        self._points = 0
        self._results: dict[int, dict[Hashable, Any]] = {}  # by id() of a remembered answer
        self._arrivals: Counter[float] = Counter()  # of the requests under way

    @contextmanager
    def request(self) -> Iterator[float]:
        """A request under way, from its arrival (the time given) to its answer."""
        arrived = self.clock()
        self._arrivals[arrived] += 1
        try:
            yield arrived
        finally:
            self._arrivals[arrived] -= 1
            if not self._arrivals[arrived]:
                del self._arrivals[arrived]
            self._prune()

    def _prune(self) -> None:
        """Forget the reads that started before every request under way arrived."""
        oldest = min(self._arrivals, default=math.inf)
        while self._reads:
            key, (started, _, _) = next(iter(self._reads.items()))
            if started >= oldest:
                break
            self._forget(key)

    async def read(
        self, key: Hashable, points: int, since: float, load: Callable[[], Awaitable[T]]
    ) -> T:
        """The answer of a read of ``key`` started at ``since`` or later (another request's,
        in flight or done), else of ``load()``, offered to requests that arrived before now.
        A shared read that failed or was cancelled with its request is read again."""
        found = self._reads.get(key)
        if found is not None and found[0] >= since:
            shared = found[2]
            await asyncio.wait([shared])
            if not shared.cancelled():
                return shared.result()
        started = self.clock()
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._remember(key, started, points, done)
        try:
            value = await load()  # in the request's task: cancelled with it
        except BaseException:
            done.cancel()  # those waiting read for themselves
            raise
        done.set_result(value)
        if key in self._reads and self._reads[key][2] is done:  # not dropped while reading
            self._results[id(value)] = {}
        return value

    def results(self, answer: T) -> dict[Hashable, Any] | None:
        """What is computed from a remembered answer (``answer`` itself, as ``read`` returned
        it), to be shared with the requests it answers; None when it is not remembered."""
        return self._results.get(id(answer))  # dropped with the answer: an id is not reused

    def _remember(
        self, key: Hashable, started: float, points: int, task: asyncio.Future[T]
    ) -> None:
        self._forget(key)
        self._reads[key] = (started, points, task)
        self._points += points
        self._prune()
        while len(self._reads) > KEPT_READS or self._points > self.max_points:
            oldest_key = next(iter(self._reads))
            if oldest_key == key:
                break
            self._forget(oldest_key)

    def _forget(self, key: Hashable) -> None:
        found = self._reads.pop(key, None)
        if found is not None:
            self._points -= found[1]
            if found[2].done() and not found[2].cancelled():
                self._results.pop(id(found[2].result()), None)


async def all_done(tasks: Sequence[asyncio.Future[Any]]) -> None:
    """Wait for every task; on the first failure cancel the others, so no Redis call outlives
    its request, and raise it."""
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
