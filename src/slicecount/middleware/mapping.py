"""The one mapping every framework shell adapts to: what a request or a query counts. Pure.

A shell measures (method, route, status, seconds, queries) and asks ``RequestMapping.entries()``
for the (series id, n) pairs to count; it hands them to its Recorder in one call. Series ids
come from an injected namer (a Recorder's ``series_id`` fits) and are remembered per distinct
(method, route, status), so a request costs a dict lookup and a tuple here. No Recorder, no
Store, no framework: this module is tested without a server.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from slicecount.core.histogram import (
    DEFAULT_COUNT_BUCKETS,
    DEFAULT_DURATION_BUCKETS,
    LE_LABEL,
    MICRO,
    HistogramIds,
    HistogramLayout,
)
from slicecount.core.series import Labels, LabelValue, normalize_labels
from slicecount.errors import ConfigurationError

REQUESTS_METRIC = "http.requests"
"""Counter of finished requests, labels method, route, status."""
DURATION_METRIC = "http.request.duration"
"""Histogram of request durations in seconds, labels method, route."""
QUERIES_METRIC = "http.request.queries"
"""Histogram of database queries per request, labels method, route."""
DB_QUERIES_METRIC = "db.queries"
"""Counter of statements run, label operation."""
DB_DURATION_METRIC = "db.query.duration"
"""Histogram of statement durations in seconds, label operation."""
UNIQUE_CLIENTS_METRIC = "http.unique_clients"
"""Unique series of the distinct clients per slice, label route (with ``unique_clients=``)."""
UNMATCHED = "<unmatched>"
"""Route label of a request that matched no route: never the raw path (cardinality)."""
OTHER_METHOD = "OTHER"
"""Method label of any method outside ``KNOWN_METHODS`` (clients choose methods freely)."""
KNOWN_METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}
)
OPERATIONS = ("SELECT", "INSERT", "UPDATE", "DELETE")
"""Statement operations with a label of their own; anything else is ``OTHER``."""
RESERVED_LABELS = frozenset({"method", "route", "status", LE_LABEL, "operation"})
MAX_CACHED_IDS = 10_000
"""(method, route, status) combinations whose series ids are remembered; unknown methods
count one each, so a client sending random methods cannot grow this past the bound."""

SeriesNamer = Callable[[str, Labels], str]
"""(metric name, labels) -> series id, validated; ValueError for a name or label it refuses."""
Entries = tuple[tuple[str, int], ...]
"""(series id, n) pairs to count at one instant."""
DURATION_BUCKET = 1
"""Where the duration's bucket is among a request's entries (what an exemplar annotates)."""


@dataclass(frozen=True)
class _Ids:
    requests: str
    duration: HistogramIds
    queries: HistogramIds


class RequestMapping:
    """Maps finished requests to the counts they add."""

    def __init__(
        self,
        series_id: SeriesNamer,
        *,
        buckets: Iterable[float] = DEFAULT_DURATION_BUCKETS,
        query_buckets: Iterable[float] = DEFAULT_COUNT_BUCKETS,
        labels: Mapping[str, LabelValue] | None = None,
        exclude_paths: Iterable[str] = (),
        max_cached_ids: int = MAX_CACHED_IDS,
    ) -> None:
        self.series_id = series_id
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
        self.max_cached_ids = max_cached_ids
        self._ids: dict[tuple[str, str | None, int], _Ids] = {}
        self._client_labels: dict[str | None, Labels] = {}

    def excluded(self, path: str) -> bool:
        """True for paths the options exclude (exact, or prefix when written ``/static/*``)."""
        return path in self.exclude_exact or (
            bool(self.exclude_prefixes) and path.startswith(self.exclude_prefixes)
        )

    def entries(
        self, method: str, route: str | None, status: int, seconds: float, queries: int | None
    ) -> Entries:
        """What one request of ``seconds`` (and ``queries`` queries, when tracked) counts.
        Raises what the namer raises for a label it refuses (a route too long, say)."""
        ids = self._ids.get((method, route, status)) or self._build(method, route, status)
        if queries is None:
            return (
                (ids.requests, 1),
                (ids.duration.buckets[bisect_left(self.bounds, seconds)], 1),
                (ids.duration.total, int(seconds * MICRO)),
            )
        return (
            (ids.requests, 1),
            (ids.duration.buckets[bisect_left(self.bounds, seconds)], 1),
            (ids.duration.total, int(seconds * MICRO)),
            (ids.queries.buckets[self.queries.bucket_index(queries)], 1),
            (ids.queries.total, queries * MICRO),
        )

    def client_labels(self, route: str | None) -> Labels:
        """The labels of ``http.unique_clients`` for a request of ``route``."""
        labels = self._client_labels.get(route)
        if labels is None:
            if len(self._client_labels) >= self.max_cached_ids:
                self._client_labels.clear()
            labels = self._client_labels[route] = {
                **self.static_labels,
                "route": route or UNMATCHED,
            }
        return labels

    def forget(self) -> None:
        """Drop the remembered ids (the namer's Recorder was replaced: it admits anew)."""
        self._ids.clear()

    def _build(self, method: str, route: str | None, status: int) -> _Ids:
        key = (method, route, status)
        if method not in KNOWN_METHODS:  # clients pick methods freely: one label for the rest
            method = OTHER_METHOD
        route = route or UNMATCHED
        base = {**self.static_labels, "method": method, "route": route}
        series_id = self.series_id
        ids = _Ids(
            requests=series_id(REQUESTS_METRIC, {**base, "status": status}),
            duration=self.duration.series_ids(series_id, base),
            queries=self.queries.series_ids(series_id, base),
        )
        if len(self._ids) < self.max_cached_ids:
            self._ids[key] = ids
        return ids


def operation_of(statement: str) -> str:
    """The statement's leading keyword if it is one of ``OPERATIONS``, else ``"OTHER"``."""
    head = statement.lstrip(" \t\r\n(")[:7].upper()
    for operation in OPERATIONS:
        if head.startswith(operation):
            return operation
    return "OTHER"


class QueryMapping:
    """Maps a statement run (and its duration) to the counts it adds."""

    def __init__(
        self, series_id: SeriesNamer, buckets: Iterable[float] = DEFAULT_DURATION_BUCKETS
    ) -> None:
        self.series_id = series_id
        self.duration = HistogramLayout(DB_DURATION_METRIC, tuple(buckets))
        # at most len(OPERATIONS) + 1 keys: no bound needed
        self._ids: dict[str, tuple[str, tuple[str, ...], str]] = {}

    def entries(self, statement: str, seconds: float) -> Entries:
        """What one statement of ``seconds`` counts."""
        operation = operation_of(statement)
        ids = self._ids.get(operation) or self._build(operation)
        return (
            (ids[0], 1),
            (ids[1][self.duration.bucket_index(seconds)], 1),
            (ids[2], round(seconds * MICRO)),
        )

    def forget(self) -> None:
        """Drop the remembered ids (the namer's Recorder was replaced: it admits anew)."""
        self._ids.clear()

    def _build(self, operation: str) -> tuple[str, tuple[str, ...], str]:
        labels = {"operation": operation}
        buckets, total = self.duration.series_ids(self.series_id, labels)
        ids = (self.series_id(DB_QUERIES_METRIC, labels), buckets, total)
        self._ids[operation] = ids
        return ids
