"""The one core every framework shell adapts to: what a request or query records. Pure of I/O.

A shell measures (method, route, status, seconds) and calls ``RequestMetrics.end()``; the core
maps that to series ids once per distinct (method, route, status), then records each request
with a single ``Recorder.add_many()``: a lock and a few dict updates, never the network.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass

from slicecount.config import Settings
from slicecount.errors import ConfigurationError
from slicecount.histogram import (
    DEFAULT_COUNT_BUCKETS,
    DEFAULT_DURATION_BUCKETS,
    LE_LABEL,
    MICRO,
    HistogramLayout,
)
from slicecount.recorder import Recorder
from slicecount.series import LabelValue, normalize_labels

logger = logging.getLogger("slicecount")

REQUESTS_METRIC = "http.requests"
"""Counter of finished requests, labels method, route, status."""
DURATION_METRIC = "http.request.duration"
"""Histogram of request durations in seconds, labels method, route."""
QUERIES_METRIC = "http.request.queries"
"""Histogram of database queries per request, labels method, route."""
UNMATCHED = "<unmatched>"
"""Route label of a request that matched no route: never the raw path (cardinality)."""
OTHER_METHOD = "OTHER"
"""Method label of any method outside ``KNOWN_METHODS`` (clients choose methods freely)."""
KNOWN_METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}
)
RESERVED_LABELS = frozenset({"method", "route", "status", LE_LABEL, "operation"})
MAX_CACHED_IDS = 10_000
"""(method, route, status) combinations whose series ids are remembered; unknown methods
count one each, so a client sending random methods cannot grow this past the bound."""


class RequestScope:
    """Per-request state that code deeper in the stack (the SQLAlchemy hook) adds to."""

    __slots__ = ("queries",)

    def __init__(self) -> None:
        self.queries = 0


current_request: ContextVar[RequestScope | None] = ContextVar("slicecount_request", default=None)
"""The request being served in this context, if a slicecount middleware is around it."""


class QueryTracking:
    """Whether any SQLAlchemy engine is instrumented (then requests record queries too)."""

    enabled = False


@dataclass(frozen=True)
class _Ids:
    requests: str
    duration: tuple[str, ...]
    duration_sum: str
    queries: tuple[str, ...]
    queries_sum: str


class InFlight:
    """A request between its start and ``RequestMetrics.end()``; shells may subclass it to
    keep their own per-request state in the same (single) allocation."""

    __slots__ = ("scope", "started", "token")

    def __init__(self) -> None:
        if QueryTracking.enabled:  # a contextvar only when some engine can add to it
            self.scope: RequestScope | None = RequestScope()
            self.token: Token[RequestScope | None] | None = current_request.set(self.scope)
        else:
            self.scope = self.token = None
        self.started = time.perf_counter()


def resolve_recorder(recorder: Recorder | None, settings: Settings | None) -> RecorderSource:
    """Where a shell's counts go: a given Recorder, one built from Settings, else the default."""
    if recorder is not None:
        return RecorderSource(recorder)
    if settings is not None:
        from slicecount.store import Store  # I/O object, built only when settings are given

        return RecorderSource(Recorder(Store(settings)))
    return RecorderSource(None)


class RecorderSource:
    """A fixed Recorder, or the process-wide default looked up at each use (so that
    ``slicecount.configure()`` after start-up still takes effect). Never raises."""

    __slots__ = ("_warned", "fixed")

    def __init__(self, fixed: Recorder | None) -> None:
        self.fixed = fixed
        self._warned = False

    def get(self) -> Recorder | None:
        if self.fixed is not None:
            return self.fixed
        from slicecount import default

        try:
            return default.get_recorder()
        except Exception as exc:  # bad SLICECOUNT_* settings: count nothing, serve everything
            if not self._warned:
                self._warned = True
                logger.error("slicecount middleware records nothing: %s", exc)
            return None


class RequestMetrics:
    """Maps finished requests to counter updates."""

    def __init__(
        self,
        recorder: Recorder | None = None,
        settings: Settings | None = None,
        *,
        buckets: Iterable[float] = DEFAULT_DURATION_BUCKETS,
        query_buckets: Iterable[float] = DEFAULT_COUNT_BUCKETS,
        labels: Mapping[str, LabelValue] | None = None,
        exclude_paths: Iterable[str] = (),
    ) -> None:
        self.source = resolve_recorder(recorder, settings)
        self.duration = HistogramLayout(DURATION_METRIC, tuple(buckets))
        self.bounds = self.duration.bounds
        self.queries = HistogramLayout(QUERIES_METRIC, tuple(query_buckets))
        self.static_labels = normalize_labels(labels)
        clash = RESERVED_LABELS & set(self.static_labels)
        if clash:
            raise ConfigurationError(f"static labels may not use reserved names {sorted(clash)}")
        excludes = list(exclude_paths)
        for path in excludes:
            if not isinstance(path, str) or not path.startswith("/"):
                raise ConfigurationError(f"excluded path must start with '/', got {path!r}")
        self.exclude_exact = frozenset(p for p in excludes if not p.endswith("*"))
        self.exclude_prefixes = tuple(p[:-1] for p in excludes if p.endswith("*"))
        self._ids: dict[tuple[str, str | None, int], _Ids] = {}
        self._warned = False

    def excluded(self, path: str) -> bool:
        """True for paths the options exclude (exact, or prefix when written ``/static/*``)."""
        return path in self.exclude_exact or (
            bool(self.exclude_prefixes) and path.startswith(self.exclude_prefixes)
        )

    def end(self, inflight: InFlight, method: str, route: str | None, status: int) -> None:
        """Record a finished request. Never raises."""
        seconds = time.perf_counter() - inflight.started
        scope = inflight.scope
        if scope is None:
            self.record(method, route, status, seconds, None)
            return
        try:
            current_request.reset(inflight.token)  # type: ignore[arg-type]
        except ValueError:
            pass  # ended from another context (a server thread closing the body): harmless
        self.record(method, route, status, seconds, scope.queries)

    def record(
        self, method: str, route: str | None, status: int, seconds: float, queries: int | None
    ) -> None:
        """Count one request of ``seconds`` (and ``queries`` database queries, if tracked)."""
        recorder = self.source.fixed or self.source.get()
        if recorder is None:
            return
        try:
            ids = self._ids.get((method, route, status)) or self._build(
                recorder, method, route, status
            )
            micros = int(seconds * MICRO)
            if queries is None:
                recorder.add_many_trusted(
                    (
                        (ids.requests, 1),
                        (ids.duration[bisect_left(self.bounds, seconds)], 1),
                        (ids.duration_sum, micros),
                    )
                )
                return
            recorder.add_many_trusted(
                (
                    (ids.requests, 1),
                    (ids.duration[bisect_left(self.bounds, seconds)], 1),
                    (ids.duration_sum, micros),
                    (ids.queries[self.queries.bucket_index(queries)], 1),
                    (ids.queries_sum, queries * MICRO),
                )
            )
        except Exception as exc:  # never let counting reach the request
            if not self._warned:
                self._warned = True
                logger.exception("slicecount could not record a request: %s", exc)

    def _build(self, recorder: Recorder, method: str, route: str | None, status: int) -> _Ids:
        key = (method, route, status)
        if method not in KNOWN_METHODS:  # clients pick methods freely: one label for the rest
            method = OTHER_METHOD
        route = route or UNMATCHED
        base = {**self.static_labels, "method": method, "route": route}
        duration, duration_sum = self.duration.series_ids(recorder.series_id, base)
        queries, queries_sum = self.queries.series_ids(recorder.series_id, base)
        ids = _Ids(
            requests=recorder.series_id(REQUESTS_METRIC, {**base, "status": status}),
            duration=duration,
            duration_sum=duration_sum,
            queries=queries,
            queries_sum=queries_sum,
        )
        if len(self._ids) < MAX_CACHED_IDS:
            self._ids[key] = ids
        return ids
