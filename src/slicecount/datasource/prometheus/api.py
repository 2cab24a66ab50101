"""The endpoints of the Prometheus HTTP API, each ``(reader, params) -> JSON-ready answer``.

Queries are planned (precision, slices), their series discovered and checked against the
limits before any slice is read; then read once per stored series and evaluated. No HTTP
framework here: ``app`` routes the requests and maps errors to Prometheus' envelopes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Any

import anyio.to_thread

from slicecount import __version__
from slicecount.datasource.discovery import SeriesInfo
from slicecount.datasource.limits import LimitExceeded
from slicecount.datasource.prometheus import results
from slicecount.datasource.prometheus.names import Catalogue, Derived, derive, family
from slicecount.datasource.prometheus.params import BadData, Params
from slicecount.datasource.prometheus.plan import (
    Need,
    choose,
    evaluation_times,
    last_boundary,
    needs,
)
from slicecount.datasource.reader import Reader, all_done
from slicecount.datasource.render import Rendered, render
from slicecount.promql.ast import NAME_LABEL, Node, VectorSelector, walk
from slicecount.promql.engine import Evaluator, Result
from slicecount.promql.parser import parse
from slicecount.promql.values import Raw

MAX_STEPS = 11_000
"""Evaluation times one range query may ask (Prometheus' own limit)."""
PROMETHEUS_VERSION = "2.53.0"
"""The API version announced by buildinfo: Grafana enables its features by version (>= 2.24
for the metadata and label endpoints it uses)."""


async def query(reader: Reader, params: Params) -> Rendered:
    """/api/v1/query: the value of an expression at one time (now by default)."""
    text = params.required("query")
    t = params.time("time", default=reader.clock())
    node = _parse(text)

    def answer(result: Result, infos: tuple[str, ...], warnings: tuple[str, ...]) -> Any:
        return results.success(results.instant(result, node.type, t), warnings, infos)

    return await evaluate(reader, node, [t], None, answer)


async def query_range(reader: Reader, params: Params) -> Rendered:
    """/api/v1/query_range: the expression at ``start + k * step`` up to ``end``."""
    text = params.required("query")
    start, end = params.time("start"), params.time("end")
    step = params.duration("step")
    if end < start:
        raise BadData("invalid parameter 'end': end timestamp must not be before start time")
    if step <= 0:
        raise BadData(
            "invalid parameter 'step': zero or negative query resolution step widths are not "
            "accepted. Try a positive integer"
        )
    if len(evaluation_times(start, end, step, limit=MAX_STEPS + 2)) > MAX_STEPS + 1:
        raise BadData(
            f"exceeded maximum resolution of {MAX_STEPS:,} points per timeseries. Try "
            "decreasing the query resolution (?step=XX)"
        )
    node = _parse(text)
    if node.type not in ("scalar", "vector"):
        raise BadData(
            f"invalid expression type {_type_name(node)} for range query, must be Scalar or "
            "instant Vector"
        )
    times = evaluation_times(start, end, step)

    def answer(result: Result, infos: tuple[str, ...], warnings: tuple[str, ...]) -> Any:
        return results.success(results.matrix(result, node.type, times), warnings, infos)

    return await evaluate(reader, node, times, step, answer)


def _parse(text: str) -> Node:
    node = parse(text)
    if node.type == "matrix":
        raise BadData(
            "a range vector alone (x[5m]) is not supported: wrap it in a function such as "
            "rate(), increase() or max_over_time()"
        )
    return node


def _type_name(node: Node) -> str:
    return {"matrix": '"range vector"', "string": '"string"'}.get(node.type, node.type)


async def evaluate(
    reader: Reader,
    node: Node,
    times: Sequence[float],
    step: float | None,
    answer: Callable[[Result, tuple[str, ...], tuple[str, ...]], Any],
) -> Rendered:
    """Plan, discover, check, read, evaluate and encode one expression. A heavy one (more
    than ``max_inline_points`` to read and compute) waits its turn and is evaluated and
    encoded in a worker thread, leaving the event loop to light requests."""
    limits = reader.limits
    wanted = needs(node)
    catalogue = Catalogue.of(await reader.stored_names()) if wanted else Catalogue({}, ())
    choice = choose(reader.settings, wanted, times, step, reader.clock(), limits.max_points)
    grid = choice.grid
    found = await _discover(reader, catalogue, wanted, grid.precision)
    ids = list(dict.fromkeys(p for derived in found.values() for d in derived for p in d.parts))
    last = last_boundary(grid, wanted)
    slices = (last - grid.first) // grid.precision
    if len(ids) > limits.max_series:
        raise LimitExceeded(
            f"the query reads {len(ids):,} stored series, more than the limit of "
            f"{limits.max_series:,}: narrow it with label matchers"
        )
    if len(ids) * slices > limits.max_request_points:
        raise LimitExceeded(
            f"the query reads {len(ids) * slices:,} points ({len(ids):,} series x {slices:,} "
            f"slices of {grid.precision} s), more than the work budget max_request_points = "
            f"{limits.max_request_points:,}: shorten the range or match fewer series"
        )

    def compute(counts: dict[str, list[int | None]]) -> bytes:
        sums = Sums({i: _totals(counts.get(i, []), slices) for i in ids}, slices)
        data = {
            selector: [Raw(d.labels, sums.of(d.parts), d.scale) for d in derived]
            for selector, derived in found.items()
        }
        result = Evaluator(grid, data, limits.max_computed_points).evaluate(node)
        return render(answer(result, choice.infos, catalogue.warnings))

    work = len(ids) * (slices + len(times)) + len(walk(node)) * len(times)
    if work <= limits.max_inline_points:
        counts = await reader.read_slices(ids, grid.precision, grid.first, last - grid.precision)
        return Rendered(compute(counts))
    async with reader.heavy():
        counts = await reader.read_slices(ids, grid.precision, grid.first, last - grid.precision)
        return Rendered(await anyio.to_thread.run_sync(lambda: compute(counts)))


async def _discover(
    reader: Reader, catalogue: Catalogue, wanted: Sequence[Need], precision: int
) -> dict[VectorSelector, list[Derived]]:
    """The derived series each selector matches."""
    per_need = [(need, _names(catalogue, need.selector)) for need in wanted]
    stored = list(
        dict.fromkeys(catalogue.sources[n].stored for _, names in per_need for n in names)
    )
    tasks = [asyncio.ensure_future(reader.series_of(name, precision)) for name in stored]
    await all_done(tasks)
    series = {name: task.result() for name, task in zip(stored, tasks, strict=True)}
    out: dict[VectorSelector, list[Derived]] = {}
    for need, names in per_need:
        matched: list[Derived] = []
        for name in names:
            source = catalogue.sources[name]
            pairs = [(s.id, s.labels) for s in series[source.stored]]
            matched += [d for d in derive(name, source, pairs) if need.selector.matches(d.labels)]
        out[need.selector] = matched
    return out


def _names(catalogue: Catalogue, selector: VectorSelector) -> list[str]:
    by_name = [m for m in selector.matchers if m.label == NAME_LABEL]
    return [n for n in catalogue.sources if all(m.matches(n) for m in by_name)]


def _totals(counts: Sequence[int | None], slices: int) -> list[int]:
    """Running totals at each boundary: 0 at the first, then after each slice."""
    if not counts:
        return [0] * (slices + 1)
    return [0, *accumulate(c or 0 for c in counts)]


class Sums:
    """The running totals of sums of stored series. A histogram's cumulative buckets are the
    prefixes of one list of parts, so each is the one below plus one series: remembered, the
    buckets of a label set cost one addition each, not one per bucket below."""

    def __init__(self, totals: dict[str, list[int]], slices: int) -> None:
        self.totals = totals
        self.known: dict[tuple[str, ...], list[int]] = {(): [0] * (slices + 1)}

    def of(self, parts: tuple[str, ...]) -> list[int]:
        found = self.known.get(parts)
        if found is None:
            if len(parts) == 1:
                found = self.totals[parts[0]]
            else:
                below, last = self.of(parts[:-1]), self.totals[parts[-1]]
                found = [a + b for a, b in zip(below, last, strict=True)]
            self.known[parts] = found
        return found


# -- look-ups -------------------------------------------------------------------------------


async def _exposed_series(reader: Reader, params: Params) -> list[dict[str, str]]:
    """Every exposed series (label sets with __name__) matching any ``match[]``, or all."""
    everything = await reader.everything()
    catalogue = Catalogue.of(s.name for s in everything)
    by_stored: dict[str, list[SeriesInfo]] = {}
    for s in everything:
        by_stored.setdefault(s.name, []).append(s)
    selectors = [_selector(text) for text in params.all("match[]")]
    out: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    for name, source in catalogue.sources.items():
        pairs = [(s.id, s.labels) for s in by_stored.get(source.stored, [])]
        for derived in derive(name, source, pairs):
            labels = derived.labels
            if not selectors or any(sel.matches(labels) for sel in selectors):
                out.setdefault(tuple(sorted(labels.items())), labels)
    return [out[k] for k in sorted(out)]


def _selector(text: str) -> VectorSelector:
    node = parse(text)
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
    """/api/v1/metadata: type and help per metric family."""
    catalogue = Catalogue.of(await reader.stored_names())
    wanted = params.get("metric")
    out: dict[str, list[dict[str, str]]] = {}
    for name, source in catalogue.sources.items():
        kind = "counter" if source.kind == "counter" else "histogram"
        key = family(name, source.kind)
        if wanted and key != wanted:
            continue
        help_text = f"slicecount {source.stored.removesuffix('.bucket').removesuffix('.sum_us')}"
        out.setdefault(key, [{"type": kind, "help": help_text, "unit": ""}])
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


async def exemplars(reader: Reader, params: Params) -> dict[str, Any]:
    """/api/v1/query_exemplars: none are kept."""
    return results.success([])
