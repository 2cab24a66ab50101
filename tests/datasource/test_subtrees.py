"""The aggregations of queries that share a read are computed once, and answer the same."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.datasource.prometheus import api
from slicecount.datasource.prometheus.params import Params
from slicecount.promql.ast import Aggregate, Node, VectorSelector, walk
from slicecount.promql.engine import Evaluator, Result
from slicecount.promql.parser import parse
from slicecount.promql.values import Grid, Raw
from slicecount.query import subtrees
from slicecount.query.subtrees import lowest_aggregations, ready
from slicecount.reads.reader import Reader
from slicecount.store import Store
from slicecount.store.asyncio import AsyncStore
from tests.datasource.conftest import HOUR, NOW

QUANTILE = "histogram_quantile({q}, sum by (le, route) (rate(lat_bucket[2m])))"


def test_the_lowest_aggregations_over_selectors() -> None:
    node: Any = parse(
        "topk(3, sum by (a) (rate(x[1m]))) / on() group_left sum(y) + count(vector(1))"
    )
    assert [str(a.expr) if a.op == "sum" else a.op for a in lowest_aggregations(node)] == [
        str(node.lhs.lhs.expr.expr),
        str(node.lhs.rhs.expr),
    ]


def test_an_aggregation_is_computed_once_for_every_query_that_has_it() -> None:
    grid = Grid((60.0, 120.0), 60, 0, 0, 180, 200.0)

    raws = [Raw({"a": "1"}, [0, 2, 5]), Raw({"a": "2"}, [0, 1, 1])]  # what x matched

    def data(node: Any, matched: list[Raw] = raws) -> dict[VectorSelector, list[Raw]]:
        (selector,) = [n for n in walk(node) if isinstance(n, VectorSelector)]
        return {selector: matched}

    shared: dict[Any, Any] = {}
    first, second = parse("sum(rate(x[1m])) * 2"), parse("sum(rate(x[1m])) / 3")
    given, computed = ready(first, grid, data(first), 10_000, shared, data(first))
    assert computed > 0 and len(shared) == 1
    (series,) = next(iter(given.values()))
    assert series.values == [2 / 60 + 1 / 60, 3 / 60]
    again, computed = ready(second, grid, data(second), 10_000, shared, data(second))
    assert computed == 0 and next(iter(again.values())) is next(iter(given.values()))
    # x discovered anew (another answer, a series more): computed again, not shared
    anew = data(second, [*raws, Raw({"a": "3"}, [0, 0, 4])])
    fresh, computed = ready(second, grid, anew, 10_000, shared, anew)
    assert computed > 0 and next(iter(fresh.values()))[0].values == [3 / 60, 7 / 60]


def histograms(store: Store) -> None:
    batch: dict[str, dict[int, int]] = {}
    for route in ("/a", "/b", "/c"):
        for i, le in enumerate(("0.1", "0.5", "+Inf")):
            batch[f'lat.bucket{{le="{le}",route="{route}"}}'] = {
                s: 1 + (s + i + len(route)) % 3 for s in range(NOW - HOUR, NOW, 7)
            }
    store.apply(batch)


def test_the_quantile_panels_of_one_refresh_answer_as_each_alone(
    settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    histograms(store)
    sums: list[str] = []  # the aggregations computed for sharing

    class Counting(Evaluator):
        def evaluate(self, node: Node) -> Result:
            if isinstance(node, Aggregate):
                sums.append(node.op)
            return super().evaluate(node)

    monkeypatch.setattr(subtrees, "Evaluator", Counting)
    forms = [
        Params([("query", QUANTILE.format(q=q)), ("start", str(NOW - HOUR)), ("end", str(NOW)),
                ("step", "15")])
        for q in ("0.5", "0.95", "0.99")
    ]  # fmt: skip
    limits = Limits(max_inline_points=100)

    kept: list[dict[Any, Any] | None] = []

    class Recording(Reader):
        def shared_results(self, read: object) -> dict[Any, Any] | None:
            kept.append(super().shared_results(read))
            return kept[-1]

    async def together() -> list[Any]:
        async with AsyncStore(settings) as async_store:
            reader = Recording(async_store, limits, clock=lambda: NOW)
            found = await asyncio.gather(*(api.query_range(reader, form) for form in forms))
            return [json.loads(f.body) for f in found]

    async def alone(form: Params) -> Any:
        async with AsyncStore(settings) as async_store:
            reader = Reader(async_store, limits, clock=lambda: NOW)
            return json.loads((await api.query_range(reader, form)).body)

    shared = asyncio.run(together())
    assert sums == ["sum"]  # once for the three panels
    first, *others = kept  # one read, one place for what is computed from it: one sum
    assert first is not None and all(other is first for other in others) and len(kept) == 3
    quantile: Any = parse(QUANTILE.format(q=1))
    assert [key[:2] for key in first] == [("aggregation", repr(quantile.args[1]))]
    assert shared == [asyncio.run(alone(form)) for form in forms]
    assert len(shared[0]["data"]["result"]) == 3
    assert shared[0]["data"]["result"] != shared[2]["data"]["result"]
