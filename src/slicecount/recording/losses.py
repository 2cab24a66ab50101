"""What a Recorder lost before Redis, counted so that nothing is lost silently. Pure.

Two series carry the losses, written with the next flush (outside the bounded buffer, so that
reporting a loss never causes another): ``slicecount.dropped`` (events dropped because the
buffer was full while Redis was away) and ``slicecount.rejected{reason}`` (events refused).
"""

from __future__ import annotations

import threading

from slicecount.core.series import encode
from slicecount.errors import ConfigurationError

DROPPED_METRIC = "slicecount.dropped"
"""Events dropped because the buffer was full while Redis was unreachable."""
REJECTED_METRIC = "slicecount.rejected"
"""Events refused, labelled ``reason``: invalid_name, invalid_label, too_long, not_utf8,
not_a_count, count_range, time_range, not_an_id, too_many_metrics, not_a_value (a unique
value that is not a string), redis (Redis refused the increment), error (anything else); each
cause logged once."""

REASONS = frozenset(
    {
        "invalid_name",
        "invalid_label",
        "too_long",
        "not_utf8",
        "not_a_count",
        "count_range",
        "time_range",
        "not_an_id",
        "too_many_metrics",
        "not_a_value",
        "redis",
        "error",
    }
)
"""The values of ``reason``: a fixed set, so the loss series stay few."""

Pending = dict[int, dict[str, int]]  # epoch second -> series id -> count


class Losses:
    """Loss counts since the last flush, and the dropped total since the start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.dropped = 0  # the Recorder adds to it under its own lock
        self.refused: dict[str, int] = {}
        self.dropped_total = 0

    def refuse(self, reason: str, events: int) -> None:
        with self._lock:
            self.refused[reason] = self.refused.get(reason, 0) + events

    def __bool__(self) -> bool:
        return bool(self.dropped or self.refused)

    def write_into(self, pending: Pending, second: int) -> Pending:
        """Move the counts since the last flush into ``pending`` at ``second``."""
        with self._lock:
            dropped, self.dropped = self.dropped, 0
            refused, self.refused = self.refused, {}
        self.dropped_total += dropped
        if not dropped and not refused:
            return pending
        bucket = pending.setdefault(second, {})
        losses = {encode(REJECTED_METRIC, {"reason": r}): n for r, n in refused.items()}
        if dropped:
            losses[DROPPED_METRIC] = dropped
        for series_id, count in losses.items():
            bucket[series_id] = bucket.get(series_id, 0) + count
        return pending


def refused_by_redis(message: str) -> ConfigurationError:
    return ConfigurationError(message, "redis")
