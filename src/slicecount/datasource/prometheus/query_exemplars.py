"""``/api/v1/query_exemplars``: the exemplars of the series a query's selectors select, as
Prometheus answers them.

Prometheus takes every selector of the expression, whatever surrounds it
(``histogram_quantile(0.99, sum by (le) (rate(x_bucket[5m])))`` asks for ``x_bucket``'s), and
answers each selected series that has exemplars in the range with its labels and them, sorted
by labels. Here a histogram's exemplars belong to its buckets (``h_bucket{le}``, the bucket the
value fell in, as prometheus_client attaches them); a counter, a sum or a count has none.
"""

from __future__ import annotations

from typing import Any

from slicecount.datasource.prometheus import results
from slicecount.datasource.prometheus.api import prometheus_names
from slicecount.datasource.prometheus.params import WIDEST_TIME, BadData, Params
from slicecount.promql.ast import NAME_LABEL, VectorSelector, walk
from slicecount.promql.values import format_time, format_value
from slicecount.query.catalogue import parse_promql
from slicecount.reads.reader import Reader


async def query_exemplars(reader: Reader, params: Params) -> dict[str, Any]:
    """The exemplars from ``start`` to ``end`` (default: all) of the series the selectors of
    ``query`` select; ``data`` is null for a query without selectors, as Prometheus's."""
    start = params.time("start", -WIDEST_TIME, WIDEST_TIME)
    end = params.time("end", WIDEST_TIME, WIDEST_TIME)
    if end < start:
        raise BadData("end timestamp must not be before start timestamp")
    node = parse_promql(params.get("query") or "")
    selectors = [item for item in walk(node) if isinstance(item, VectorSelector)]
    if not selectors:
        return results.success(None)
    selected = await _selected_buckets(reader, selectors)
    found = await reader.exemplars(list(selected), start, end)
    order = sorted(found, key=lambda series_id: sorted(selected[series_id].items()))
    return results.success(
        [
            {
                "seriesLabels": selected[series_id],
                "exemplars": [
                    {
                        "labels": dict(exemplar.labels),
                        "value": format_value(exemplar.value),
                        "timestamp": format_time(exemplar.time),
                    }
                    for exemplar in found[series_id]
                ],
            }
            for series_id in order
        ]
    )


async def _selected_buckets(
    reader: Reader, selectors: list[VectorSelector]
) -> dict[str, dict[str, str]]:
    """stored bucket series id -> its labels as exposed, for every bucket series one of
    ``selectors`` selects."""
    counters, uniques = await reader.listings()
    catalogue = prometheus_names(counters, uniques)
    wanted: dict[str, set[str]] = {}  # stored bucket metric -> exposed names asked for it
    for selector in selectors:
        for name in catalogue.matching(selector, unique=False):
            source = catalogue.sources[name]
            if source.kind == "bucket":
                wanted.setdefault(source.stored, set()).add(name)
    if not wanted:
        return {}
    stored = list(wanted)
    precision = reader.discovery_precision
    listed = await reader.series_of_each([(metric, precision, False) for metric in stored])
    selected: dict[str, dict[str, str]] = {}
    for metric, series in zip(stored, listed, strict=True):
        for name in sorted(wanted[metric]):
            for info in series:
                labels = {NAME_LABEL: name, **info.labels}
                if any(selector.matches(labels) for selector in selectors):
                    selected.setdefault(info.id, labels)
    return selected
