"""The datasource's one link to Redis: discovery (cached) and slice reads, through the AsyncStore.

The Reader owns what every endpoint shares: the store (and its settings), the limits, the clock,
the discovery cache (an unchanged answer kept as the same object, so what was derived from it
holds), the turns of heavy requests and the reads requests share (``sharing``). A query
(``execute``) takes two concurrent rounds: the series of every selector, then (once the work
is checked) their slices and unions, in chunks so that no reply holds the event loop for long.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.core.exemplars import Exemplar
from slicecount.core.histogram import BUCKET_SUFFIX
from slicecount.core.series import parse
from slicecount.operations.unique_reading import Group, kept_precisions
from slicecount.reads.chunks import (
    READS_IN_FLIGHT,
    Read,
    SliceRange,
    merged,
    start_reads,
    union_parts,
)
from slicecount.reads.listing import SeriesInfo
from slicecount.reads.repeats import Repeats
from slicecount.reads.sealed import SealedFrames
from slicecount.reads.sharing import SharedReads, Turns, all_done
from slicecount.store.asyncio import AsyncStore

CACHE_TTL = 2.0
"""Seconds a discovery answer (series of a metric, metric names) is reused: Grafana asks for
the same panels over and over, and a series that appears shows up within this delay."""
ANNOTATION_LIMIT = 1000
"""Annotations returned for one panel at most."""
_MAX_PARSED = 100_000
_MAX_CACHED = 10_000

T = TypeVar("T")
_Load = tuple[Any, Callable[[], Awaitable[list[SeriesInfo]]]]
"""A discovery cache key and how to load its answer."""


class Reader:
    """What the endpoints need from Redis, with a small TTL cache for discovery."""

    def __init__(
        self,
        store: AsyncStore,
        limits: Limits,
        clock: Callable[[], float] = time.time,
        ttl: float = CACHE_TTL,
    ) -> None:
        self.store = store
        self.limits = limits
        self.clock = clock
        self.ttl = ttl
        self.heavy = Turns(limits.heavy_requests)
        self._cache: dict[Any, tuple[float, Any]] = {}
        self._loading: dict[Any, asyncio.Future[Any]] = {}
        self._parsed: dict[str, SeriesInfo] = {}
        self._shared = SharedReads[Read](2 * limits.max_request_points)
        self.sealed = SealedFrames(limits.sealed_frame_bytes)
        self.repeats = Repeats(limits.repeated_answer_bytes)

    @property
    def settings(self) -> Settings:
        """The store's settings: one source for precisions, retention and the token."""
        return self.store.settings

    @property
    def discovery_precision(self) -> int:
        """Names and labels are looked up at the coarsest precision: its retention is longest."""
        return self.settings.precisions[-1]

    async def close(self) -> None:
        await self.store.close()

    # -- discovery --------------------------------------------------------------------------

    async def _cached(self, key: Any, load: Callable[[], Awaitable[T]]) -> T:
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and now - hit[0] < self.ttl:
            value: T = hit[1]
            return value
        loop = asyncio.get_running_loop()
        pending = self._loading.get(key)
        if pending is not None and pending.get_loop() is loop:
            # the panels of a refresh arrive together: one load answers them all (each
            # loaded the whole registry before, six at once)
            await asyncio.wait([pending])
            if not pending.cancelled():
                shared: T = pending.result()
                return shared
            return await self._cached(key, load)  # its request went away: load it here
        future: asyncio.Future[T] = loop.create_future()
        self._loading[key] = future
        try:
            value = await self._loaded(key, load, now)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a load no other request awaited is not an error
            raise
        else:
            future.set_result(value)
        finally:
            if self._loading.get(key) is future:
                del self._loading[key]
        return value

    async def _loaded(self, key: Any, load: Callable[[], Awaitable[T]], now: float) -> T:
        value = await load()
        latest = self._cache.get(key)  # another request's load may have ended meanwhile
        if latest is not None and latest[1] == value:
            value = latest[1]  # unchanged: what was derived from it (``core.memo``) still holds
        if len(self._cache) > _MAX_CACHED:
            self._cache.clear()
        self._cache[key] = (now, value)
        return value

    def _parse(self, series_id: str) -> SeriesInfo:
        parsed = self._parsed.get(series_id)
        if parsed is None:
            parsed = SeriesInfo(series_id, *parse(series_id))
            if len(self._parsed) < _MAX_PARSED:
                self._parsed[series_id] = parsed
        return parsed

    def _parse_all(self, series_ids: Sequence[str]) -> list[SeriesInfo]:
        out = []
        for series_id in series_ids:
            try:
                out.append(self._parse(series_id))
            except ValueError:
                continue  # written by something else under our keys: ignore it
        return out

    def _series(self, name: str, precision: int) -> _Load:
        async def load() -> list[SeriesInfo]:
            return self._parse_all(await self.store.series(name, precision))

        return ("series", name, precision), load

    def _unique_series(self, name: str, precision: int) -> _Load:
        async def load() -> list[SeriesInfo]:
            return self._parse_all(await self.store.unique_series(name, precision))

        return ("unique", name, precision), load

    def _all_uniques(self) -> _Load:
        async def load() -> list[SeriesInfo]:
            coarsest = kept_precisions(self.settings)[-1]
            return self._parse_all(await self.store.all_unique_series(coarsest))

        return ("all unique",), load

    def _everything(self) -> _Load:
        async def load() -> list[SeriesInfo]:
            return self._parse_all(await self.store.all_series(self.discovery_precision))

        return ("all",), load

    async def _all_cached(self, asked: Sequence[_Load]) -> list[list[SeriesInfo]]:
        """Each answer from the cache, those missing loaded concurrently: a request whose
        discovery is cached starts no task for it."""
        now = time.monotonic()
        out: list[list[SeriesInfo]] = []
        missing: list[int] = []
        for i, (key, _) in enumerate(asked):
            hit = self._cache.get(key)
            fresh = hit is not None and now - hit[0] < self.ttl
            out.append(hit[1] if fresh else [])  # type: ignore[index]  # fresh: a hit
            if not fresh:
                missing.append(i)
        if len(missing) == 1:
            out[missing[0]] = await self._cached(*asked[missing[0]])
        elif missing:
            tasks = [asyncio.ensure_future(self._cached(*asked[i])) for i in missing]
            await all_done(tasks)
            for i, task in zip(missing, tasks, strict=True):
                out[i] = task.result()
        return out

    async def series_of(self, name: str, precision: int) -> list[SeriesInfo]:
        """The series of one metric at ``precision`` (ids that do not parse are skipped)."""
        return await self._cached(*self._series(name, precision))

    async def unique_series_of(self, name: str, precision: int) -> list[SeriesInfo]:
        """The unique series of one metric at a unique precision."""
        return await self._cached(*self._unique_series(name, precision))

    async def series_of_each(
        self, wanted: Sequence[tuple[str, int, bool]]
    ) -> list[list[SeriesInfo]]:
        """The series of each (metric, precision, unique?), the uncached looked up at once."""
        return await self._all_cached(
            [self._unique_series(n, p) if u else self._series(n, p) for n, p, u in wanted]
        )

    async def all_uniques(self) -> list[SeriesInfo]:
        """Every unique series, looked up at the coarsest unique precision (the longest kept)."""
        return await self._cached(*self._all_uniques())

    async def everything(self) -> list[SeriesInfo]:
        """Every series at the discovery precision (for names, label keys and values)."""
        return await self._cached(*self._everything())

    async def listings(self) -> tuple[list[SeriesInfo], list[SeriesInfo]]:
        """``everything()`` and ``all_uniques()``, looked up at once when not cached."""
        counters, uniques = await self._all_cached([self._everything(), self._all_uniques()])
        return counters, uniques

    async def names(self) -> list[str]:
        """Metric names, histograms listed by their base name beside their parts."""
        names = {s.name for s in await self.everything()}
        bases = {n[: -len(BUCKET_SUFFIX)] for n in names if n.endswith(BUCKET_SUFFIX)}
        return sorted(names | bases)

    async def histograms(self) -> set[str]:
        return {n[: -len(BUCKET_SUFFIX)] for n in await self.names() if n.endswith(BUCKET_SUFFIX)}

    async def count_unions(self, precision: int, groups: Sequence[Group]) -> list[int]:
        """The distinct count of each group's union of (series, slices), in order: in calls
        of at most UNION_SLICES_PER_CALL slices, READS_IN_FLIGHT at once."""
        gate = asyncio.Semaphore(READS_IN_FLIGHT)

        async def count(part: list[Group]) -> list[int]:
            async with gate:
                return await self.store.count_unions(precision, part)

        tasks = [asyncio.ensure_future(count(part)) for part in union_parts(groups)]
        await all_done(tasks)
        return [n for task in tasks for n in task.result()]

    async def annotations(
        self, start: float, end: float, tags: Sequence[str]
    ) -> list[dict[str, Any]]:
        """Annotations from ``start`` to ``end`` having all ``tags``, at most ANNOTATION_LIMIT."""
        return await self.store.annotations(start, end, tags, ANNOTATION_LIMIT)

    async def exemplars(
        self, ids: Sequence[str], start: float, end: float
    ) -> dict[str, list[Exemplar]]:
        """The exemplars of bucket series ``ids`` from ``start`` to ``end``, oldest first."""
        return await self.store.exemplars(ids, start, end)

    async def read_slices(
        self, ids: Sequence[str], span: SliceRange, since: float | None = None
    ) -> Read:
        """The counts of every series over ``span``, in chunks of READ_CHUNK_POINTS (the
        book's layout) or BLOCK_CHUNK_SERIES (the blocks'), READS_IN_FLIGHT at once.
        ``since``: when the request arrived (``time.monotonic()``): the same read of another
        request started since then answers it too (``sharing``)."""
        precision, first, last, stored = span
        if last < first or not ids:
            return {i: [] for i in ids}
        if since is not None:
            points = len(ids) * ((last - first) // stored + 1)
            return await self._shared.read(
                (span, tuple(ids)), points, since, lambda: self.read_slices(ids, span)
            )
        gate = asyncio.Semaphore(READS_IN_FLIGHT)
        tasks = start_reads(self.store, ids, precision, first, last, stored, gate, self.sealed)
        await all_done(tasks)
        return merged([task.result() for task in tasks])

    def request(self) -> AbstractContextManager[float]:
        """A request under way, from its arrival (``time.monotonic()``, given) to its answer:
        the reads that started since it arrived answer it too (``read_slices``' ``since``)."""
        return self._shared.request()

    def shared_results(self, read: object) -> dict[Any, Any] | None:
        """Where what is computed from a shared read (``read_slices``' answer) is kept for
        the requests it answers (``subtrees``); None when the read is not shared."""
        return self._shared.results(read)  # type: ignore[arg-type]  # any object: by id
