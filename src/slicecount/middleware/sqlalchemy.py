"""Query events from SQLAlchemy: ``instrument_sqlalchemy(engine)``.

Records ``db.queries{operation}`` and the histogram ``db.query.duration{operation}`` for every
statement the engine runs (failed ones too), and counts the queries of the current request
(when a slicecount middleware serves it) into ``http.request.queries``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from slicecount.config import Settings
from slicecount.histogram import DEFAULT_DURATION_BUCKETS, MICRO, HistogramLayout
from slicecount.middleware._core import QueryTracking, RecorderSource, current_request
from slicecount.middleware._core import resolve_recorder as _resolve
from slicecount.recorder import Recorder

logger = logging.getLogger("slicecount")

QUERIES_METRIC = "db.queries"
"""Counter of statements run, label operation."""
QUERY_DURATION_METRIC = "db.query.duration"
"""Histogram of statement durations in seconds, label operation."""
OPERATIONS = ("SELECT", "INSERT", "UPDATE", "DELETE")
"""Operations with a label of their own; anything else is OTHER."""
_START = "_slicecount_started"


def operation_of(statement: str) -> str:
    """The statement's leading keyword if it is one of ``OPERATIONS``, else ``"OTHER"``."""
    head = statement.lstrip(" \t\r\n(")[:7].upper()
    for operation in OPERATIONS:
        if head.startswith(operation):
            return operation
    return "OTHER"


class QueryMetrics:
    """The listener pair attached to one engine."""

    def __init__(self, source: RecorderSource, buckets: tuple[float, ...]) -> None:
        self.source = source
        self.duration = HistogramLayout(QUERY_DURATION_METRIC, buckets)
        self._ids: dict[str, tuple[str, tuple[str, ...], str]] = {}
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
        seconds = time.perf_counter() - started if started is not None else 0.0
        scope = current_request.get()
        if scope is not None:
            scope.queries += 1
        recorder = self.source.get()
        if recorder is None:
            return
        try:
            operation = operation_of(statement)
            ids = self._ids.get(operation) or self._build(recorder, operation)
            recorder.add_many_trusted(
                [
                    (ids[0], 1),
                    (ids[1][self.duration.bucket_index(seconds)], 1),
                    (ids[2], round(seconds * MICRO)),
                ]
            )
        except Exception as exc:
            if not self._warned:
                self._warned = True
                logger.exception("slicecount could not record a query: %s", exc)

    def _build(self, recorder: Recorder, operation: str) -> tuple[str, tuple[str, ...], str]:
        labels = {"operation": operation}
        buckets, total = self.duration.series_ids(recorder.series_id, labels)
        ids = (recorder.series_id(QUERIES_METRIC, labels), buckets, total)
        self._ids[operation] = ids
        return ids


def instrument_sqlalchemy(
    engine: Engine,
    *,
    recorder: Recorder | None = None,
    settings: Settings | None = None,
    buckets: tuple[float, ...] = DEFAULT_DURATION_BUCKETS,
) -> QueryMetrics:
    """Count the queries of ``engine`` (an ``AsyncEngine``'s ``.sync_engine`` works too)."""
    metrics = QueryMetrics(_resolve(recorder, settings), buckets)
    event.listen(engine, "before_cursor_execute", metrics.before)
    event.listen(engine, "after_cursor_execute", metrics.after)
    event.listen(engine, "handle_error", metrics.error)
    QueryTracking.enabled = True
    return metrics


def uninstrument_sqlalchemy(engine: Engine, metrics: QueryMetrics) -> None:
    """Detach what ``instrument_sqlalchemy`` attached."""
    event.remove(engine, "before_cursor_execute", metrics.before)
    event.remove(engine, "after_cursor_execute", metrics.after)
    event.remove(engine, "handle_error", metrics.error)
