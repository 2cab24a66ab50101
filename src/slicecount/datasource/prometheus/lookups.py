"""The look-up endpoints of the Prometheus HTTP API (names, labels, series, metadata, and
the constant answers), each ``(reader, params) -> JSON-ready answer``. Counters, histograms
and unique series are listed by their exposed names (``query/catalogue``)."""

from __future__ import annotations

import re
from typing import Any

from slicecount import __version__
from slicecount.datasource.prometheus import results
from slicecount.datasource.prometheus.params import BadData, Params
from slicecount.promql.ast import VectorSelector
from slicecount.query.catalogue import Catalogue, derive, family, parse_promql
from slicecount.reads.listing import SeriesInfo
from slicecount.reads.reader import Reader

PROMETHEUS_VERSION = "2.53.0"
"""The API version announced by buildinfo: Grafana enables its features by version (>= 2.24
for the metadata and label endpoints it uses)."""


async def _exposed_series(reader: Reader, params: Params) -> list[dict[str, str]]:
    """Every exposed series (label sets with __name__) matching any ``match[]``, or all."""
    counters, uniques = await reader.listings()
    catalogue = Catalogue.of({s.name for s in counters}, {s.name for s in uniques})
    by_stored: dict[tuple[bool, str], list[SeriesInfo]] = {}
    for unique, listing in ((False, counters), (True, uniques)):
        for s in listing:
            by_stored.setdefault((unique, s.name), []).append(s)
    selectors = [_selector(text) for text in params.all("match[]")]
    out: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    for name, source in catalogue.listed(selectors):
        pairs = [(s.id, s.labels) for s in by_stored.get((source.unique, source.stored), [])]
        for derived in derive(name, source, pairs):
            labels = derived.labels
            if not selectors or any(sel.matches(labels) for sel in selectors):
                out.setdefault(tuple(sorted(labels.items())), labels)
    return [out[k] for k in sorted(out)]


def _selector(text: str) -> VectorSelector:
    node = parse_promql(text)
    if not isinstance(node, VectorSelector):
        raise BadData(f"invalid parameter 'match[]': {text[:80]!r} is not a series selector")
    return node


async def labels(reader: Reader, params: Params) -> dict[str, Any]:
    """/api/v1/labels: every label name (``__name__`` included)."""
    names = {k for s in await _exposed_series(reader, params) for k in s}
    return results.success(sorted(names))


async def label_values(reader: Reader, params: Params) -> dict[str, Any]:
    """/api/v1/label/<name>/values (``__name__``: the metric names)."""
    label = params.path.get("name", "")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", label):
        raise BadData(f"invalid label name: {label[:80]!r}")
    values = {s[label] for s in await _exposed_series(reader, params) if label in s}
    return results.success(sorted(values))


async def series(reader: Reader, params: Params) -> dict[str, Any]:
    """/api/v1/series: the label sets matching ``match[]`` (at least one is required)."""
    if not params.all("match[]"):
        raise BadData("no match[] parameter provided")
    return results.success(await _exposed_series(reader, params))


async def metadata(reader: Reader, params: Params) -> dict[str, Any]:
    """/api/v1/metadata: type, help and unit per metric family (a unique series is a gauge);
    a deprecated family (``metric=http_request_duration``) only when asked for by name."""
    counters, uniques = await reader.listings()
    catalogue = Catalogue.of({s.name for s in counters}, {s.name for s in uniques})
    wanted = params.get("metric")
    out: dict[str, list[dict[str, str]]] = {}
    for name, source in catalogue.sources.items() if wanted else catalogue.listed():
        kind = {"counter": "counter", "unique": "gauge"}.get(source.kind, "histogram")
        key = family(name, source.kind)
        if wanted and key != wanted:
            continue
        help_text = f"slicecount {source.stored.removesuffix('.bucket').removesuffix('.sum_us')}"
        if source.unique:
            help_text += ": distinct values per slice (sum over series is their union)"
        unit = "seconds" if kind == "histogram" and key.endswith("_seconds") else ""
        out.setdefault(key, [{"type": kind, "help": help_text, "unit": unit}])
    return results.success(out)


async def buildinfo(reader: Reader, params: Params) -> dict[str, Any]:
    """/api/v1/status/buildinfo: a Prometheus version (no ``features``: not Mimir)."""
    return results.success(
        {
            "version": PROMETHEUS_VERSION,
            "revision": f"slicecount-{__version__}",
            "branch": "slicecount",
            "buildUser": "slicecount",
            "buildDate": "",
            "goVersion": "none",
        }
    )


async def rules(reader: Reader, params: Params) -> dict[str, Any]:
    """/api/v1/rules: slicecount evaluates no rules (Grafana's alerting does)."""
    return results.success({"groups": []})
