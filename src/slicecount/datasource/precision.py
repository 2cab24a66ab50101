"""Which precision answers a panel. Pure."""

from __future__ import annotations

from slicecount.config import Settings
from slicecount.slices import oldest_kept


def choose_precision(
    settings: Settings,
    start: float,
    end: float,
    now: float,
    interval_ms: float | None = None,
    max_points: int | None = None,
) -> int:
    """The finest precision whose retention still covers ``start`` and whose slice is at least
    ``max(intervalMs, (end - start) / maxDataPoints)``; else the closest one that covers, else
    the coarsest (nothing covers a range older than every retention)."""
    wanted = 0.0
    if interval_ms:
        wanted = interval_ms / 1000
    if max_points:
        wanted = max(wanted, (end - start) / max_points)
    covering = [
        p for p in settings.precisions if oldest_kept(p, settings.retention_for(p), now) <= start
    ]
    for precision in covering:
        if precision >= wanted:
            return precision
    if covering:
        return covering[-1]
    return settings.precisions[-1]
