"""Settings: one frozen dataclass, from keyword arguments or the ``SLICECOUNT_*`` environment.

The package holds ``Settings`` here, and beside it their ``defaults``, how each value is parsed and
checked (``parsing``) and what they are read from: ``environment`` (the ``SLICECOUNT_*``
variables) and ``topology`` (what a Redis URL says). It may import only slicecount.errors.

The whole house, and what each layer may import: docs/architecture.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from slicecount.config.defaults import (
    BLOCKS_PRECISIONS,
    BLOCKS_RETENTION,
    CLUSTER_SHARDS,
    DEFAULT_CLOSE_TIMEOUT,
    DEFAULT_EXEMPLAR_RETENTION,
    DEFAULT_FLUSH_INTERVAL,
    DEFAULT_LAYOUT,
    DEFAULT_MAX_EXEMPLARS,
    DEFAULT_MAX_FUTURE,
    DEFAULT_MAX_METRICS,
    DEFAULT_MAX_PENDING,
    DEFAULT_MAX_SERIES_PER_METRIC,
    DEFAULT_PRECISIONS,
    DEFAULT_REDIS_URL,
    DEFAULT_RETENTION,
    DEFAULT_SOCKET_TIMEOUT,
    DEFAULT_SWEEP_PERIOD,
    DEFAULT_THROTTLE_DEADLINE,
    DEFAULT_UNIQUE_EXACT_CAP,
    LAYOUTS,
    TRACE_ID_PLACEHOLDER,
)
from slicecount.config.environment import ENV_PREFIX, warn_unknown
from slicecount.config.parsing import (
    integer,
    parse_precisions,
    parse_retention,
    positive,
    unique_precisions,
    validate_url,
)
from slicecount.config.topology import REDACTED, parse_url, redact
from slicecount.errors import ConfigurationError

__all__ = [  # what callers import from the package (the rest: its modules)
    "BLOCKS_PRECISIONS",
    "BLOCKS_RETENTION",
    "CLUSTER_SHARDS",
    "DEFAULT_LAYOUT",
    "DEFAULT_PRECISIONS",
    "DEFAULT_RETENTION",
    "ENV_PREFIX",
    "LAYOUTS",
    "Settings",
]


@dataclass(frozen=True)
class Settings:
    """Every knob of slicecount. Values given as strings (environment, CLI) are parsed too."""

    redis_url: str = DEFAULT_REDIS_URL
    """Where Redis is: ``redis://``, ``rediss://`` (TLS), ``unix://``, ``redis+sentinel://``,
    ``redis+cluster://``, and ``rediss+`` of the last two; a password in the URL."""
    prefix: str = ""
    """Put before every key (``P`` in the key layout), so that several apps share a Redis."""
    layout: str = DEFAULT_LAYOUT
    """How counts are kept in Redis: ``blocks`` (per series, a hash of the slices still open and
    one string of compact blocks of the sealed ones, every precision; the cleaner seals them:
    fine slices kept for days in fewer bytes) or ``book`` (a hash per series and
    precision, one field per slice: the book's keys, read and written by its
    ``update_counter``/``get_counter``)."""
    precisions: tuple[int, ...] = ()
    """Slice lengths in seconds; empty: the layout's ladder, with blocks ``1,5,60,3600,86400``,
    or the book's ``1,5,60,300,3600,18000,86400`` (1 s to 1 day)."""
    retention: Mapping[int, int] | int | str | None = None
    """Slices kept per precision: ``120``, or some precisions apart, ``1=300,60=1440`` (the
    others keep 120); none: with blocks and their ladder
    ``1=600,5=34560,60=44640,3600=9600,86400=1830`` (10 minutes, 2 days, 31 days, 400 days,
    5 years), else 120 (below 128 a book's hash stays in Redis's compact listpack encoding)."""
    flush_interval: float = DEFAULT_FLUSH_INTERVAL
    close_timeout: float = DEFAULT_CLOSE_TIMEOUT
    """Seconds ``Recorder.close()`` (and the exit of the process) keeps trying to write what
    is buffered; what is still unwritten then is logged as lost."""
    token: str | None = None
    """The datasource's bearer token (or basic-auth password); none: it answers anyone."""
    shards: int = 0
    """Registry and key shards (hash tags); 0 picks: 1 on one server, ``CLUSTER_SHARDS`` (64) on a
    Redis Cluster (where every transaction must lie in one slot)."""
    max_pending: int = DEFAULT_MAX_PENDING
    max_series_per_metric: int = DEFAULT_MAX_SERIES_PER_METRIC
    max_metrics: int = DEFAULT_MAX_METRICS
    max_future: float = DEFAULT_MAX_FUTURE
    socket_timeout: float = DEFAULT_SOCKET_TIMEOUT
    throttle_deadline: float = DEFAULT_THROTTLE_DEADLINE
    """Seconds a rate-limit check waits on Redis before the request is let through (or
    refused, failing closed): a Redis down or paused costs a request about this much."""
    throttle_strategy: str = "fixed"
    """"fixed" windows (the seed's) or "sliding" (the previous window weighted in)."""
    unique_precisions: tuple[int, ...] = ()
    """Precisions of the unique counts (a subset of ``precisions``); empty: those of
    ``UNIQUE_MIN_PRECISION`` s and coarser (the coarsest if none is)."""
    unique_retention: int | None = None
    """Slices kept per unique precision; empty: the counters' retention, at most the book's
    120 (a slice's HyperLogLog costs up to 12 kB: the blocks ladder's 31 days of minutes
    would be 44 640 of them a series)."""
    unique_exact_cap: int = DEFAULT_UNIQUE_EXACT_CAP
    """Values listed per slice in exact mode; past it the slice counts by its HyperLogLog."""
    sweep_period: float = DEFAULT_SWEEP_PERIOD
    """Seconds between two cleaner sweeps of a precision (slices longer than this: one slice);
    the time of the last complete sweep is kept in Redis, so cron and restarts honour it."""
    max_exemplars: int = DEFAULT_MAX_EXEMPLARS
    """Exemplars (a traced request's trace id beside its duration bucket) kept per shard,
    oldest out first, as Prometheus bounds its own; 0 turns exemplars off: none is captured."""
    exemplar_retention: int = DEFAULT_EXEMPLAR_RETENTION
    """Seconds the cleaner keeps an exemplar (the bound may drop it sooner)."""
    trace_url: str | None = None
    """A link to one trace, ``${__value.raw}`` standing for its id (Grafana's syntax), e.g.
    ``http://jaeger:16686/trace/${__value.raw}``: the built-in page links each exemplar to it,
    and the shipped Grafana provisioning hands it to the Prometheus datasource."""
    _retention: Mapping[int, int] = field(init=False, repr=False, compare=False)
    _defaulted: frozenset[str] = field(init=False, repr=False, compare=False)
    """Which of precisions, retention and unique precisions were left to their defaults
    (``with_changes`` keeps them so: a change of layout changes the ladder)."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "redis_url", validate_url(self.redis_url))
        if not isinstance(self.prefix, str):
            raise ConfigurationError(f"prefix must be a string, got {self.prefix!r}")
        if self.layout not in LAYOUTS:
            raise ConfigurationError(
                f"layout must be one of {', '.join(LAYOUTS)}, got {self.layout!r}"
            )
        defaulted = {"precisions"} if self.precisions is None or self.precisions == () else set()
        ladder = self.layout == "blocks" and bool(defaulted)
        if defaulted:
            set_(self, "precisions", BLOCKS_PRECISIONS if ladder else DEFAULT_PRECISIONS)
        base: Mapping[int, int] | int = BLOCKS_RETENTION if ladder else DEFAULT_RETENTION
        if self.retention is None:
            defaulted.add("retention")
            set_(self, "retention", base)
        if self.unique_precisions in (None, "", ()):
            defaulted.add("unique_precisions")
        set_(self, "_defaulted", frozenset(defaulted))
        precisions = parse_precisions(self.precisions)
        set_(self, "precisions", precisions)
        if self.layout == "blocks" and any(p % precisions[0] for p in precisions):
            raise ConfigurationError(
                f"with the blocks layout every precision must be a multiple of the finest "
                f"(open slices of {precisions[0]} s add up into them), got {precisions}"
            )
        retention = parse_retention(self.retention, precisions, base)
        set_(self, "_retention", retention)
        values = set(retention.values())
        set_(self, "retention", values.pop() if len(values) == 1 else retention)
        set_(self, "flush_interval", positive("flush_interval", self.flush_interval))
        set_(self, "socket_timeout", positive("socket_timeout", self.socket_timeout))
        set_(self, "close_timeout", positive("close_timeout", self.close_timeout))
        set_(self, "throttle_deadline", positive("throttle_deadline", self.throttle_deadline))
        if self.throttle_strategy not in ("fixed", "sliding"):
            raise ConfigurationError(
                f"throttle_strategy must be fixed or sliding, got {self.throttle_strategy!r}"
            )
        set_(self, "max_future", positive("max_future", self.max_future))
        set_(self, "sweep_period", positive("sweep_period", self.sweep_period))
        set_(self, "max_metrics", integer("max_metrics", self.max_metrics))
        shards = integer("shards", self.shards, minimum=0)
        cluster = parse_url(self.redis_url).kind == "cluster"
        if shards == 0:
            shards = CLUSTER_SHARDS if cluster else 1
        elif shards == 1 and cluster:
            raise ConfigurationError(
                "shards must be > 1 on a Redis Cluster (one shard has no hash tag: a flush "
                "would span slots)"
            )
        set_(self, "shards", shards)
        set_(self, "unique_precisions", unique_precisions(self.unique_precisions, precisions))
        set_(self, "unique_exact_cap", integer("unique_exact_cap", self.unique_exact_cap))
        if self.unique_retention is not None:
            set_(self, "unique_retention", integer("unique_retention", self.unique_retention))
        set_(self, "max_pending", integer("max_pending", self.max_pending))
        set_(self, "max_exemplars", integer("max_exemplars", self.max_exemplars, minimum=0))
        kept = integer("exemplar_retention", self.exemplar_retention)
        set_(self, "exemplar_retention", kept)
        if self.trace_url == "":
            set_(self, "trace_url", None)
        if self.trace_url is not None and (
            not isinstance(self.trace_url, str) or TRACE_ID_PLACEHOLDER not in self.trace_url
        ):
            raise ConfigurationError(
                f"trace_url must be a URL with {TRACE_ID_PLACEHOLDER} where the trace id goes, "
                f"got {self.trace_url!r}"
            )
        per_metric = integer("max_series_per_metric", self.max_series_per_metric)
        set_(self, "max_series_per_metric", per_metric)
        if self.token is not None and not isinstance(self.token, str):
            raise ConfigurationError(f"token must be a string, got {type(self.token).__name__}")
        if self.token == "":
            set_(self, "token", None)

    def __repr__(self) -> str:
        """The dataclass's repr with the URL's passwords and the token redacted (a repr ends
        up in logs and tracebacks)."""
        shown = {f.name: getattr(self, f.name) for f in fields(self) if f.repr}
        shown["redis_url"] = redact(self.redis_url)
        if self.token is not None:
            shown["token"] = REDACTED
        return f"Settings({', '.join(f'{name}={value!r}' for name, value in shown.items())})"

    def retention_for(self, precision: int) -> int:
        """Slices kept at ``precision``."""
        try:
            return self._retention[precision]
        except KeyError:
            raise ConfigurationError(
                f"unknown precision {precision!r}: expected one of {self.precisions}"
            ) from None

    def unique_retention_for(self, precision: int) -> int:
        """Unique slices kept at ``precision`` (``unique_retention``, else the counters'
        retention up to ``DEFAULT_RETENTION``)."""
        counters = self.retention_for(precision)
        if self.unique_retention is not None:
            return self.unique_retention
        return min(counters, DEFAULT_RETENTION)

    def check_precision(self, precision: object) -> int:
        """Return ``precision`` if it is configured, else raise naming it."""
        if isinstance(precision, bool) or not isinstance(precision, int):
            raise ConfigurationError(f"precision must be an integer, got {precision!r}")
        self.retention_for(precision)
        return precision

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``SLICECOUNT_*`` variables; keyword arguments win over the environment."""
        env = os.environ if environ is None else environ
        known = {f.name for f in fields(cls) if f.init}
        unknown = set(overrides) - known
        if unknown:
            raise ConfigurationError(
                f"unknown setting(s) {sorted(unknown)}; known: {sorted(known)}"
            )
        warn_unknown(env, known)
        values: dict[str, Any] = {}
        for name in known:
            raw = env.get(ENV_PREFIX + name.upper())
            if raw is not None and raw != "":
                values[name] = raw
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def with_changes(self, **changes: Any) -> Settings:
        """A copy with some settings changed (validated again); precisions and retention left
        to the layout stay so (a change of layout then changes the ladder)."""
        if "precisions" in changes:
            if "retention" not in changes:
                changes["retention"] = {
                    p: self._retention.get(p, DEFAULT_RETENTION)
                    for p in parse_precisions(changes["precisions"])
                }
            kept = set(parse_precisions(changes["precisions"]))
        elif "precisions" in self._defaulted:
            changes["precisions"] = ()
            blocks = changes.get("layout", self.layout) == "blocks"
            kept = set(BLOCKS_PRECISIONS if blocks else DEFAULT_PRECISIONS)
            if "retention" not in changes:
                changes["retention"] = (
                    None
                    if "retention" in self._defaulted
                    else {p: n for p, n in self._retention.items() if p in kept} or None
                )
        else:
            kept = set(self.precisions)
        if "unique_precisions" in self._defaulted:
            changes.setdefault("unique_precisions", ())
        elif "unique_precisions" not in changes:
            changes["unique_precisions"] = tuple(p for p in self.unique_precisions if p in kept)
        return replace(self, **changes)
