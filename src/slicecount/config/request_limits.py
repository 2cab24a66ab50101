"""The datasource's limits: bounds on the work one request may cause, each taken from a
``SLICECOUNT_<NAME>`` variable. What a request is charged against them is ``query/budget.py``;
each breach is a 4xx naming the limit. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from slicecount.config.environment import ENV_PREFIX
from slicecount.errors import ConfigurationError


@dataclass(frozen=True)
class Limits:
    """Bounds on the work one request may cause; each breach is a 4xx naming the limit."""

    max_body_bytes: int = 1 << 20
    """Bytes of one request body (1 MiB)."""
    max_targets: int = 50
    """Targets (queries) in one /query."""
    max_series: int = 5000
    """Series one target may match: a duration histogram by route has 12 bucket series a route
    and method (what a target reads is bounded by the work budget below)."""
    max_points: int = 11_000
    """Points one series of an answer may have."""
    max_range_seconds: float = 10 * 366 * 86400
    """Seconds one query's range may span (10 years)."""
    max_request_points: int = 2_000_000
    """The work budget: points one /query may read, series x points per series summed over
    its targets (2 000 series of 1 000 points), checked before any slice is read. A point is
    a hash field of the book's layout (about 0.7 us to read); the blocks layout reads 8 for
    that cost (16 million: the 7-day panels of an 80-route app read 12.2 million at 60 s)."""
    max_computed_points: int = 10_000_000
    """Points its functions and operators may compute (each node's series x points, once per
    distinct reading of its times) and its answer may hold (series x times), so that ``x * 1
    * 1 * ...`` cannot multiply the work of what was read: ``max_series`` series at a week's
    Grafana step (about 1 000 points) through a function and an aggregation, about 2 s of one
    core at 0.2 us a point. The shipped dashboards' 7-day quantile panels of an 80-route app,
    which compute once for every 30 of their 1 009 times, are charged 0.23 million."""
    max_answer_points: int = 1_000_000
    """Points an answer may carry (series x times, summed over the targets, and each series'
    labels as the points of as many bytes of JSON), checked once the queries are evaluated
    and before anything is encoded. Encoding is what a large answer costs, about 0.3 us and
    20 bytes a point: a million are 0.3 s and 20 MB, and four at once leave ``GET /`` answered
    within 0.2 s (500 series at Grafana's 11 000 points are 5.5 million: 115 MB, 2 s).
    Reads and computing are cheaper a point, which is why they have budgets of their own."""
    max_inline_points: int = 20_000
    """A /query reading and computing more points than this is heavy: it waits its turn and is
    evaluated and encoded in a worker thread, leaving the event loop to light requests."""
    sealed_frame_bytes: int = 64 << 20
    """Bytes of sealed frames the datasource holds between refreshes (64 MiB), and of the
    windows decoded from them, least recently used out first: a refresh reads from Redis
    only the frames of the blocks a cleaner rewrote since the last one, and decodes them
    once for the refreshes of the next minutes (``reads/sealed.py``)."""
    repeated_answer_bytes: int = 64 << 20
    """Bytes of counts and encoded bodies the datasource keeps with the answers it remembers
    (64 MiB), least recently asked out first. A query asked again is read again and answered
    from its last answer where the counts read are the same: whole for the same times, else
    the times both ask that read only slices of equal counts (a live dashboard's next
    refresh: all but the new time, and the time whose window holds a second counted late)
    (``query/repeated.py``). Answers of equal counts share them (a histogram's p50, p95 and
    p99 panels): a 24-hour panel of 1 400 bucket series at 60 s holds 16 MB, a 5-minute one
    under 1 MB."""
    heavy_requests: int = 2
    """Heavy requests served at once; later ones queue in arrival order. Two: one reads from
    Redis while the other is evaluated, and evaluation that releases the GIL (numpy) runs on
    two cores at once; more only contend for the GIL (six at once made a dashboard refresh
    1.4 to 2 times slower than one) and hold more reads in memory."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Limits:
        """Defaults, each overridden by ``SLICECOUNT_<NAME>`` (``SLICECOUNT_MAX_REQUEST_POINTS``
        ...); a value that is not a positive number raises ConfigurationError naming it."""
        values: dict[str, Any] = {}
        for limit in fields(cls):
            raw = environ.get(ENV_PREFIX + limit.name.upper())
            if raw is None or raw == "":
                continue
            kind = float if limit.type in ("float", float) else int
            try:
                value = kind(raw)
            except ValueError:
                value = 0
            if not value > 0:
                raise ConfigurationError(
                    f"{ENV_PREFIX}{limit.name.upper()} must be a positive number, got {raw!r}"
                )
            values[limit.name] = value
        return cls(**values)
