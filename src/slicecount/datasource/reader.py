"""Series discovery (cached) and slice reads for the datasource, through the AsyncStore."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from slicecount.config import Settings
from slicecount.datasource.discovery import SeriesInfo
from slicecount.datasource.evaluate import Fetch, Series, Timeline
from slicecount.datasource.protocol import LimitExceeded, Limits
from slicecount.histogram import BUCKET_SUFFIX
from slicecount.series import parse
from slicecount.slices import oldest_kept, slice_starts
from slicecount.store_async import AsyncStore

CACHE_TTL = 2.0
"""Seconds a discovery answer (series of a metric, metric names) is reused: Grafana asks for
the same panels over and over, and a series that appears shows up within this delay."""
_MAX_PARSED = 100_000


class Reader:
    """What the routes need from Redis, with a small TTL cache for discovery."""

    def __init__(
        self,
        store: AsyncStore,
        limits: Limits,
        clock: Callable[[], float] = time.time,
        ttl: float = CACHE_TTL,
    ) -> None:
        self.store = store
        self.settings: Settings = store.settings
        self.limits = limits
        self.clock = clock
        self.ttl = ttl
        self._cache: dict[Any, tuple[float, Any]] = {}
        self._parsed: dict[str, SeriesInfo] = {}

    @property
    def discovery_precision(self) -> int:
        """Names and labels are looked up at the coarsest precision: its retention is longest."""
        return self.settings.precisions[-1]

    async def _cached(self, key: Any, load: Callable[[], Any]) -> Any:
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        value = await load()
        if len(self._cache) > 10_000:
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

    async def series_of(self, name: str, precision: int) -> list[SeriesInfo]:
        """The series of one metric at ``precision`` (ids that do not parse are skipped)."""

        async def load() -> list[SeriesInfo]:
            out = []
            for series_id in await self.store.series(name, precision):
                try:
                    out.append(self._parse(series_id))
                except ValueError:
                    continue  # written by something else under our keys: ignore it
            return out

        result: list[SeriesInfo] = await self._cached(("series", name, precision), load)
        return result

    async def everything(self) -> list[SeriesInfo]:
        """Every series at the discovery precision (for names, label keys and values)."""

        async def load() -> list[SeriesInfo]:
            out = []
            for series_id in await self.store.all_series(self.discovery_precision):
                try:
                    out.append(self._parse(series_id))
                except ValueError:
                    continue
            return out

        result: list[SeriesInfo] = await self._cached(("all",), load)
        return result

    async def names(self) -> list[str]:
        """Metric names, histograms listed by their base name beside their parts."""
        names = {s.name for s in await self.everything()}
        bases = {n[: -len(BUCKET_SUFFIX)] for n in names if n.endswith(BUCKET_SUFFIX)}
        return sorted(names | bases)

    async def histograms(self) -> set[str]:
        return {n[: -len(BUCKET_SUFFIX)] for n in await self.names() if n.endswith(BUCKET_SUFFIX)}

    def timeline(self, precision: int, start: float, end: float, now: float) -> Timeline:
        starts = slice_starts(precision, start, end)
        if len(starts) > self.limits.max_points:
            raise LimitExceeded(
                f"{len(starts)} points per series at precision {precision} s, more than the "
                f"limit of {self.limits.max_points}: shorten the range or pick a coarser precision"
            )
        oldest = oldest_kept(precision, self.settings.retention_for(precision), now)
        return Timeline(precision, starts, now, oldest)

    async def load(self, wanted: Sequence[Fetch], timeline: Timeline) -> dict[Fetch, list[Series]]:
        """Discover, filter and read every fetch's series in one pipelined HMGET."""
        precision = timeline.precision
        chosen: dict[Fetch, list[SeriesInfo]] = {}
        total = 0
        for fetch in wanted:
            selector, histogram = fetch
            found: list[SeriesInfo] = []
            for name in selector.names:
                metric = name + BUCKET_SUFFIX if histogram else name
                found += [
                    s for s in await self.series_of(metric, precision) if selector.matches(s.labels)
                ]
            chosen[fetch] = found
            total += len(found)
            if total > self.limits.max_series:
                raise LimitExceeded(
                    f"the query matches more than {self.limits.max_series} series: "
                    "narrow it with label matchers or aggregate with sum by (...)"
                )
        ids = list(dict.fromkeys(s.id for found in chosen.values() for s in found))
        counts = {}
        if ids:
            starts = timeline.starts
            counts = await self.store.read(ids, precision, starts.start, starts[-1])
        return {
            fetch: [Series(s.name, s.labels, timeline.fill(counts[s.id])) for s in found]
            for fetch, found in chosen.items()
        }
