"""Query events from SQLAlchemy: ``instrument_sqlalchemy(engine)``.

Records ``db.queries{operation}`` and the histogram ``db.query.duration{operation}`` for every
statement the engine runs (failed ones too), and counts the queries of the current request
(when a slicecount middleware with ``track_queries=True`` serves it) into
``http.request.queries``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from slicecount.config import Settings
from slicecount.core.histogram import DEFAULT_DURATION_BUCKETS
from slicecount.errors import extra_imports
from slicecount.middleware.mapping import (
    DB_DURATION_METRIC,
    DB_QUERIES_METRIC,
    OPERATIONS,
    QueryMapping,
    operation_of,
)
from slicecount.middleware.shell import current_request
from slicecount.recording.recorder import Recorder
from slicecount.recording.source import RecorderSource

with extra_imports("sqlalchemy", "the SQLAlchemy instrumentation"):
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

logger = logging.getLogger("slicecount")

__all__ = [
    "OPERATIONS",
    "QUERIES_METRIC",
    "QUERY_DURATION_METRIC",
    "QueryMetrics",
    "instrument_sqlalchemy",
    "operation_of",
    "uninstrument_sqlalchemy",
]

QUERIES_METRIC = DB_QUERIES_METRIC
"""Counter of statements run, label operation."""
QUERY_DURATION_METRIC = DB_DURATION_METRIC
"""Histogram of statement durations in seconds, label operation."""
_START = "_slicecount_started"


class QueryMetrics:
    """The listener pair attached to one engine: it times statements; the core maps them."""

    def __init__(self, source: RecorderSource, buckets: tuple[float, ...]) -> None:
        self.source = source
        self.mapping = QueryMapping(source.namer(), buckets)
        source.watch(self.mapping.forget)
        self._warned = False

    def before(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        context = args[-2] if len(args) >= 2 else None
        if context is not None:
            setattr(context, _START, time.perf_counter())

    def after(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        context = args[-2] if len(args) >= 2 else None
        self.record(statement, getattr(context, _START, None))

    def error(self, exception_context: Any) -> None:
        context = exception_context.execution_context
        statement = exception_context.statement
        if statement is not None:
            self.record(statement, getattr(context, _START, None))

    def record(self, statement: str, started: float | None) -> None:
        """Count one statement, and add it to the current request's scope if a middleware
        with ``track_queries`` serves one. Never raises."""
        seconds = time.perf_counter() - started if started is not None else 0.0
        scope = current_request.get()
        if scope is not None:
            scope.queries += 1
        recorder = self.source.get()
        if recorder is None:
            return
        try:
            recorder.add_ids(self.mapping.entries(statement, seconds))
        except Exception as exc:
            recorder.refuse(exc)
            if not self._warned:
                self._warned = True
                logger.exception("slicecount could not record a query: %s", exc)


def instrument_sqlalchemy(
    engine: Engine,
    *,
    recorder: Recorder | None = None,
    settings: Settings | None = None,
    buckets: tuple[float, ...] = DEFAULT_DURATION_BUCKETS,
) -> QueryMetrics:
    """Count the queries of ``engine`` (an ``AsyncEngine``'s ``.sync_engine`` works too).

    ``db.queries`` and ``db.query.duration`` are always counted; requests count their queries
    into ``http.request.queries`` when their middleware was built with ``track_queries=True``.
    """
    metrics = QueryMetrics(RecorderSource(recorder, settings), buckets)
    event.listen(engine, "before_cursor_execute", metrics.before)
    event.listen(engine, "after_cursor_execute", metrics.after)
    event.listen(engine, "handle_error", metrics.error)
    return metrics


def uninstrument_sqlalchemy(engine: Engine, metrics: QueryMetrics) -> None:
    """Detach what ``instrument_sqlalchemy`` attached."""
    event.remove(engine, "before_cursor_execute", metrics.before)
    event.remove(engine, "after_cursor_execute", metrics.after)
    event.remove(engine, "handle_error", metrics.error)
