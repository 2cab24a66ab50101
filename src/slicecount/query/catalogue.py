"""slicecount names as Prometheus sees them. Pure.

The exposed name is the slicecount name with every character outside ``[A-Za-z0-9_:]``
replaced by ``_``; a counter gets ``_total`` (``http.requests`` -> ``http_requests_total``). A
histogram ``h`` (``h.bucket{le}`` per bucket, ``h.sum_us``) is ``h_bucket{le}`` (cumulative,
``le="+Inf"`` included), ``h_sum`` (base units) and ``h_count``; a duration histogram is
observed in seconds and says so, as Prometheus' naming convention asks
(``http.request.duration`` -> ``http_request_duration_seconds_bucket``, ``_sum``, ``_count``),
and so does a wait (``tasks.queue_wait`` -> ``tasks_queue_wait_seconds_bucket``).
A unique series (distinct values per slice) is a gauge: the legacy name, no suffix
(``api.users`` -> ``api_users``). Two names that map to one are reported, and the first (in
sort order) answers; counters and histograms are named before unique series, so adding a
unique series never takes a name a dashboard already reads.

Deprecated aliases: the names of 0.1 (a duration histogram without ``_seconds``) still answer
a selector that names them exactly, for one release; they are not listed (look-ups, metadata,
regex matchers), so nothing is seen twice.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from slicecount.core.histogram import BUCKET_SUFFIX, LE_LABEL, MICRO, SUM_SUFFIX, parse_bound
from slicecount.errors import QueryError
from slicecount.promql.ast import NAME_LABEL, Node, VectorSelector
from slicecount.promql.lexer import DottedName
from slicecount.promql.parser import parse

Kind = Literal["counter", "bucket", "count", "sum", "unique"]
_ILLEGAL = re.compile(r"[^A-Za-z0-9_:]")
_DURATION = re.compile(r"(?:^|[._:])duration$")
"""A histogram named so is observed in seconds (the middleware's and the SQLAlchemy hook's)."""
_SECONDS = re.compile(r"(?:^|[._:])(?:duration|wait)$")
"""A histogram of seconds: a duration, or a wait (the task workers' ``tasks.queue_wait``)."""
SCALE = {"counter": 1.0, "bucket": 1.0, "count": 1.0, "sum": 1 / MICRO, "unique": 1.0}


def legacy(name: str) -> str:
    return _ILLEGAL.sub("_", name)


def histogram_base(stored: str) -> str:
    """The exposed base name of a histogram (``stored`` without its ``.bucket``/``.sum_us``):
    a duration's ends in ``_seconds``, its unit."""
    base = legacy(stored)
    return base + "_seconds" if _SECONDS.search(stored) else base


def exposed(stored: str) -> list[tuple[str, Kind]]:
    """The Prometheus names of a stored metric, with what each shows of it."""
    if stored.endswith(BUCKET_SUFFIX):
        base = histogram_base(stored[: -len(BUCKET_SUFFIX)])
        return [(base + "_bucket", "bucket"), (base + "_count", "count")]
    if stored.endswith(SUM_SUFFIX):
        return [(histogram_base(stored[: -len(SUM_SUFFIX)]) + "_sum", "sum")]
    name = legacy(stored)
    return [(name if name.endswith("_total") else name + "_total", "counter")]


def deprecated(stored: str) -> list[tuple[str, Kind]]:
    """The 0.1 names of a stored metric that differ from today's (a duration histogram's,
    without ``_seconds``): answered when named exactly, until the next release."""
    parts: tuple[Kind, ...]
    for suffix, parts in ((BUCKET_SUFFIX, ("bucket", "count")), (SUM_SUFFIX, ("sum",))):
        if stored.endswith(suffix) and _DURATION.search(stored[: -len(suffix)]):
            base = legacy(stored[: -len(suffix)])
            return [(f"{base}_{kind}", kind) for kind in parts]
    return []


def suggest(stored: str) -> str:
    """What to write in PromQL for a name written as stored: ``http.requests`` ->
    ``http_requests_total``, a duration histogram -> its ``_seconds_bucket`` (and kin)."""
    if stored.endswith((BUCKET_SUFFIX, SUM_SUFFIX)):
        return exposed(stored)[0][0]
    if _SECONDS.search(stored):  # a histogram's base name
        base = histogram_base(stored)
        return f"{base}_bucket (or {base}_sum, {base}_count)"
    return exposed(stored)[0][0]


def parse_promql(text: str) -> Node:
    """``parse(text)``, but a name written with dots is answered with its Prometheus name."""
    try:
        return parse(text)
    except DottedName as exc:
        raise QueryError(f"{exc}: did you mean {suggest(exc.name)}?") from None


def family(name: str, kind: Kind) -> str:
    """The metric family an exposed name belongs to (metadata is per family)."""
    if kind in ("counter", "unique"):
        return name
    return name.rsplit("_", 1)[0]


@dataclass(frozen=True)
class Source:
    """What an exposed name reads: a stored metric and how."""

    stored: str
    kind: Kind

    @property
    def unique(self) -> bool:
        return self.kind == "unique"

    @property
    def shown(self) -> str:
        """The stored name as a warning names it."""
        return f"{self.stored} (unique)" if self.unique else self.stored


@dataclass(frozen=True)
class Catalogue:
    """Every exposed name, and the collisions found building it. ``sources`` holds the
    deprecated aliases too; ``aliases`` says which they are (answered only when named)."""

    sources: dict[str, Source]
    warnings: tuple[str, ...]
    aliases: frozenset[str] = frozenset()
    _matching: dict[tuple[object, ...], list[str]] = field(
        default_factory=dict, compare=False, repr=False
    )  # a catalogue lives as long as the discovery answer it is built from: Grafana asks
    # the same selectors over and over, each scan of the names is done once

    @classmethod
    def of(cls, stored_names: Iterable[str], unique_names: Iterable[str] = ()) -> Catalogue:
        sources: dict[str, Source] = {}
        clashes: dict[str, list[str]] = {}
        named = [(stored, exposed(stored)) for stored in sorted(set(stored_names))]
        named += [(stored, [(legacy(stored), "unique")]) for stored in sorted(set(unique_names))]
        for stored, names in named:
            for name, kind in names:
                source = Source(stored, kind)
                if name in sources:
                    clashes.setdefault(name, [sources[name].shown]).append(source.shown)
                    continue
                sources[name] = source
        warnings = tuple(
            f"{', '.join(names)} all map to {name}: only {names[0]} is answered under that name"
            for name, names in sorted(clashes.items())
        )
        aliases = set()
        for stored, _ in named:  # last: an alias never takes a name that is answered
            for name, kind in deprecated(stored):
                if name not in sources:
                    sources[name] = Source(stored, kind)
                    aliases.add(name)
        return cls(sources, warnings, frozenset(aliases))

    def matching(self, selector: VectorSelector, unique: bool | None = None) -> list[str]:
        """The exposed names a selector's ``__name__`` matchers accept (of one kind: unique
        series or not, when ``unique`` is given); an alias only when named exactly."""
        by_name = tuple(m for m in selector.matchers if m.label == NAME_LABEL)
        found = self._matching.get((by_name, unique))
        if found is None:
            found = self._matching[(by_name, unique)] = [
                name
                for name, source in self.sources.items()
                if (unique is None or source.unique == unique)
                and all(m.matches(name) for m in by_name)
                and (name not in self.aliases or named_exactly(selector, name))
            ]
        return found

    def listed(self, selectors: Sequence[VectorSelector] = ()) -> list[tuple[str, Source]]:
        """The names a look-up shows: every one but the aliases, and those that one of
        ``selectors`` names exactly."""
        return [
            (name, source)
            for name, source in self.sources.items()
            if name not in self.aliases or any(named_exactly(s, name) for s in selectors)
        ]


def named_exactly(selector: VectorSelector, name: str) -> bool:
    """Whether ``selector`` asks for ``name`` by an equality matcher (``name{...}``)."""
    return any(m.label == NAME_LABEL and m.op == "=" and m.value == name for m in selector.matchers)


@dataclass(frozen=True)
class Derived:
    """One series as PromQL sees it: its labels, and the stored series whose running totals
    add up to it (a cumulative bucket adds the buckets at or below its bound)."""

    labels: dict[str, str]
    parts: tuple[str, ...]
    scale: float


def derive(
    name: str, source: Source, series: Sequence[tuple[str, dict[str, str]]]
) -> list[Derived]:
    """The series of exposed ``name`` from the stored ``(id, labels)`` of its source."""
    scale = SCALE[source.kind]
    if source.kind in ("counter", "sum", "unique"):
        return [Derived({NAME_LABEL: name, **labels}, (id_,), scale) for id_, labels in series]
    groups: dict[tuple[tuple[str, str], ...], list[tuple[float, str]]] = {}
    bounds: dict[float, str] = {math.inf: "+Inf"}
    for id_, labels in series:
        try:
            bound = parse_bound(labels.get(LE_LABEL, ""))
        except ValueError:
            continue  # not a bucket of ours
        bounds.setdefault(bound, labels[LE_LABEL])
        rest = tuple(sorted((k, v) for k, v in labels.items() if k != LE_LABEL))
        groups.setdefault(rest, []).append((bound, id_))
    out = []
    for rest, buckets in groups.items():
        buckets.sort()
        if source.kind == "count":
            parts = tuple(id_ for _, id_ in buckets)
            out.append(Derived({NAME_LABEL: name, **dict(rest)}, parts, scale))
            continue
        # every bound any label set has, so that each set shows the same buckets
        for bound, text in sorted(bounds.items()):
            parts = tuple(id_ for b, id_ in buckets if b <= bound)
            out.append(Derived({NAME_LABEL: name, **dict(rest), LE_LABEL: text}, parts, scale))
    return out
