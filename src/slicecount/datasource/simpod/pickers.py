"""Answers for Grafana's pickers: metric names, label names and values, variable queries,
the simPod builder payloads. Pure: works on series already discovered."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from slicecount.config import Settings
from slicecount.core.histogram import BUCKET_SUFFIX, LE_LABEL
from slicecount.datasource.simpod.protocol import FUNCTIONS
from slicecount.errors import QueryError
from slicecount.operations.unique_reading import kept_precisions
from slicecount.promql.ast import NAME_LABEL, VectorSelector, compile_regex
from slicecount.reads.listing import SeriesInfo
from slicecount.targets.grammar import parse, regex_escape, unescape, unique_name
from slicecount.targets.rewrites import one_slice


class Labelled(Protocol):
    """Anything with labels: a discovered series, or an evaluated one."""

    @property
    def labels(self) -> dict[str, str]: ...


_VARIABLE = re.compile(r"\s*(metrics|label_names|label_values)\s*\((.*)\)\s*\Z", re.DOTALL)


def unique_entry(name: str) -> str:
    """How a unique metric is listed to Grafana: as the target that reads it."""
    return unique_name(name)


def entry_metric(entry: str) -> tuple[str, bool]:
    """(the metric, whether it is a unique one) of a listed entry."""
    if entry.startswith("unique(") and entry.endswith(")"):
        return entry[len("unique(") : -1], True
    return entry, False


def of_metric(everything: Iterable[SeriesInfo], names: Sequence[str]) -> list[SeriesInfo]:
    """The series of metrics ``names`` (a histogram name covers its bucket series)."""
    wanted = set(names) | {n + BUCKET_SUFFIX for n in names}
    return [s for s in everything if s.name in wanted]


def label_names(series: Iterable[Labelled]) -> list[str]:
    """Every label name of ``series``, sorted; a histogram's ``le`` is not one to filter on."""
    return sorted({k for s in series for k in s.labels if k != LE_LABEL})


def label_values(series: Iterable[Labelled], label: str) -> list[str]:
    return sorted({s.labels[label] for s in series if label in s.labels})


def search(names: Sequence[str], text: object) -> list[str]:
    """Legacy /search: every name containing the typed text (Grafana's escaping undone)."""
    needle = unescape(text).strip().lower() if isinstance(text, str) else ""
    return [n for n in names if needle in n.lower()]


def variable(
    query: str,
    names: Sequence[str],
    everything: Sequence[SeriesInfo],
    uniques: Sequence[SeriesInfo] = (),
) -> list[str]:
    """Variable queries: ``metrics(regex?)``, ``label_names(metric?)``,
    ``label_values(label)``, ``label_values(selector, label)`` (a selector may be
    ``unique(...)``: the unique series' labels); else names containing it."""
    match = _VARIABLE.match(query)
    if match is None:
        return search(names, query)
    kind, args = match.group(1), match.group(2).strip()
    if kind == "metrics":
        if not args:
            return list(names)
        regex = compile_regex(args.strip("\"'"))
        return [n for n in names if regex.fullmatch(n) is not None]
    if kind == "label_names":
        return label_names(_selected(args, everything, uniques) if args else everything)
    selector_text, _, label = args.rpartition(",")
    label = label.strip().strip("\"'")
    if not label:
        raise QueryError(f"label_values needs a label name: {query!r}")
    scope = _selected(selector_text, everything, uniques) if selector_text.strip() else everything
    return label_values(scope, label)


def _selected(
    text: str, everything: Sequence[SeriesInfo], uniques: Sequence[SeriesInfo]
) -> list[SeriesInfo]:
    node = parse(text)
    window = one_slice(node)
    if window is None:
        raise QueryError(f"expected a metric selector, got {text!r}")
    selector = window.vector
    if isinstance(node, VectorSelector):  # unique(...)
        return [s for s in uniques if _selects(selector, unique_name(s.name), s.labels)]
    return [
        s
        for s in everything
        if _selects(selector, s.name, s.labels)
        or (
            s.name.endswith(BUCKET_SUFFIX)
            and _selects(selector, s.name[: -len(BUCKET_SUFFIX)], s.labels)
        )
    ]


def _selects(selector: VectorSelector, name: str, labels: dict[str, str]) -> bool:
    return selector.matches({**labels, NAME_LABEL: name})


def precision_options(settings: Settings, unique: bool = False) -> list[dict[str, str]]:
    def label(p: int) -> str:
        for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
            if p % size == 0:
                return f"{p // size} {unit}"
        return f"{p} s"

    return [{"label": "auto", "value": "auto"}] + [
        {"label": label(p), "value": str(p)}
        for p in (kept_precisions(settings) if unique else settings.precisions)
    ]


def function_options(histogram: bool, unique: bool = False) -> list[dict[str, str]]:
    if unique:  # a distinct count has no rate; group by makes unions
        return [{"label": "distinct count", "value": "count"}]
    labels = {"count": "count per slice", "rate": "rate (per second)"}
    chosen = FUNCTIONS if histogram else ("count", "rate")
    return [{"label": labels.get(f, f), "value": f} for f in chosen]


def metric_entry(
    name: str, histogram: bool, settings: Settings, series: Sequence[SeriesInfo] | None
) -> dict[str, Any]:
    """One /metrics item (``name`` may be ``unique(metric)``); with ``series`` given, label
    payloads carry their options too."""
    unique = entry_metric(name)[1]
    payloads: list[dict[str, Any]] = [
        {
            "name": "function",
            "label": "Function",
            "type": "select",
            "placeholder": "count",
            "options": function_options(histogram, unique),
            "width": 20,
        },
        {"name": "group_by", "label": "Group by", "type": "multi-select", "placeholder": "none"},
        {
            "name": "precision",
            "label": "Precision",
            "type": "select",
            "placeholder": "auto",
            "options": precision_options(settings, unique),
        },
    ]
    if series is not None:
        payloads[1]["options"] = [{"label": k, "value": k} for k in label_names(series)]
        for label in label_names(series):
            payloads.append(
                {
                    "name": label,
                    "label": label,
                    "type": "multi-select",
                    "placeholder": "any",
                    "options": value_options(series, label),
                }
            )
    return {"label": name, "value": name, "payloads": payloads}


def value_options(series: Sequence[SeriesInfo], label: str) -> list[dict[str, str]]:
    # Builder filters are regexes: send values escaped, show them plain.
    return [{"label": v, "value": regex_escape(v)} for v in label_values(series, label)]


def payload_options(
    name: str, payload_name: str, histogram: bool, settings: Settings, series: Sequence[SeriesInfo]
) -> list[dict[str, str]]:
    """/metric-payload-options for one payload of one metric (or ``unique(metric)``)."""
    unique = entry_metric(name)[1]
    if payload_name == "function":
        return function_options(histogram, unique)
    if payload_name == "precision":
        return precision_options(settings, unique)
    if payload_name == "group_by":
        return [{"label": k, "value": k} for k in label_names(series)]
    return value_options(series, payload_name)
