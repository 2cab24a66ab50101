"""Which series id an event counts into: validation, a cache, and the cardinality guards. Pure.

A process records at most ``max_metrics`` metric names (events of further names are refused,
reason ``too_many_metrics``) and at most ``max_series_per_metric`` label sets per metric; the
ones past that bound are counted in ``name{overflow="true"}`` (their ``le`` kept, so a
histogram's buckets count once and stay a histogram). Raw ids in labels or names cannot grow
the process's memory either: what overflows is not cached.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Mapping

from slicecount.core.series import Labels, LabelValue, encode, shown
from slicecount.errors import ConfigurationError

logger = logging.getLogger("slicecount")

OVERFLOW_LABELS = {"overflow": "true"}
"""Labels of the series that takes a metric's label sets beyond ``max_series_per_metric``."""
MAX_WARNINGS = 100
"""Distinct warnings one process logs at most (each cause once)."""


class Warnings:
    """Log each distinct cause once, and at most ``MAX_WARNINGS`` causes."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def once(self, key: str, message: str, *args: object) -> None:
        if key in self._seen or len(self._seen) >= MAX_WARNINGS:
            return
        self._seen.add(key)
        logger.warning(message, *args)


class Admission:
    """Resolves (name, labels) to a series id, once per distinct pair."""

    def __init__(self, max_series_per_metric: int, max_metrics: int, warnings: Warnings) -> None:
        self.max_series_per_metric = max_series_per_metric
        self.max_metrics = max_metrics
        self.warnings = warnings
        self._lock = threading.Lock()
        self.ids: dict[Hashable, str] = {}
        """(name, label items) or name -> id: read without the lock (a dict get is atomic)."""
        self.issued: set[str] = set()
        """Every id handed out (overflow ids too): what ``Recorder.add_ids`` accepts."""
        self._admitted: dict[str, set[str]] = {}

    def after_fork(self) -> None:
        """A lock another thread held at fork time stays held in the child: take a new one."""
        self._lock = threading.Lock()

    def series_id(self, name: str, labels: Labels | None) -> str:
        """The id to count (name, labels) into; ValueError naming a bad name or label."""
        cached = self.ids.get((name, tuple(labels.items())) if labels else name)
        return cached if cached is not None else self._admit(name, labels)

    def _admit(self, name: str, labels: Labels | None) -> str:
        series_id = encode(name, labels)
        key: Hashable = (name, tuple(labels.items())) if labels else name
        le = labels.get("le") if labels else None
        guard_id = series_id if le is None else encode(name, _without_le(labels))
        with self._lock:  # decide only: no logging, no encoding (a log handler may count too)
            admitted = self._admitted.get(name)
            if admitted is None and len(self._admitted) >= self.max_metrics:
                too_many = True
            else:
                too_many = False
                if admitted is None:
                    admitted = self._admitted[name] = set()
                overflow = guard_id not in admitted and len(admitted) >= self.max_series_per_metric
                if not overflow:
                    admitted.add(guard_id)
                    self.ids[key] = series_id
                    self.issued.add(series_id)
        if too_many:
            raise ConfigurationError(
                f"metric {shown(name)} is past the {self.max_metrics} metric names this "
                "process records (max_metrics)",
                "too_many_metrics",
            )
        if not overflow:
            return series_id
        self.warnings.once(
            f"overflow:{name}",
            "metric %r reached %d label sets in this process; further new label sets are "
            'counted as %s{overflow="true"}',
            name,
            self.max_series_per_metric,
            name,
        )
        folded = encode(name, OVERFLOW_LABELS if le is None else {**OVERFLOW_LABELS, "le": le})
        self.issued.add(folded)
        return folded


def _without_le(labels: Labels | None) -> Mapping[str, LabelValue]:
    return {k: v for k, v in (labels or {}).items() if k != "le"}
