"""Aggregations computed once for the queries that read the same slices. Pure.

The p50, p95 and p99 panels of a histogram differ only in the quantile: each aggregates
the same buckets with ``sum by (le, route) (rate(...[w]))``, the costly part. The lowest
aggregations of a query (those over selectors, with no aggregation below them) are
computed from a shared read once, remembered with it (``Reader.shared_results``) by their
text and grid, and handed to the engine ready for every query that has them, which only
reads them (a vector is arrays the engine never changes in place).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping, MutableMapping
from typing import Any

from slicecount.promql.arrays import Block
from slicecount.promql.ast import Aggregate, Node, VectorSelector, walk
from slicecount.promql.engine import Data, Evaluator, as_block
from slicecount.promql.values import Grid


def lowest_aggregations(node: Node) -> list[Aggregate]:
    """The aggregations over selectors with no aggregation below them, in tree order."""
    out = []
    for item in walk(node):
        if isinstance(item, Aggregate):
            below = walk(item.expr)
            if not any(isinstance(b, Aggregate) for b in below) and any(
                isinstance(b, VectorSelector) for b in below
            ):
                out.append(item)
    return out


def ready(
    node: Node,
    grid: Grid,
    data: Data,
    budget: int,
    shared: MutableMapping[Hashable, Any],
    found: Mapping[VectorSelector, object],
) -> tuple[dict[Node, Block], int]:
    """The lowest aggregations of ``node`` on ``grid``, each from ``shared`` or computed
    (and put there), and the points computed (EvaluationError past ``budget``). ``found``:
    what each selector matched (discovery's answer): one is shared only when its selectors
    matched the very same (a series discovered in between makes it computed anew)."""
    out: dict[Node, Block] = {}
    computed = 0
    for aggregate in lowest_aggregations(node):
        key = ("aggregation", repr(aggregate), grid)
        matched = [found.get(n) for n in walk(aggregate) if isinstance(n, VectorSelector)]
        with _LOCKS:
            if len(_COMPUTING) > _MAX_LOCKS:
                _COMPUTING.clear()  # at worst a key computed twice side by side: never wrong
            computing = _COMPUTING.setdefault(key, threading.Lock())
        with computing:
            hit = shared.get(key)
            if hit is not None and all(a is b for a, b in zip(hit[0], matched, strict=True)):
                out[aggregate] = hit[1]
                continue
            evaluator = Evaluator(grid, data, budget - computed)
            result = as_block(evaluator.evaluate(aggregate), len(grid.times))
            computed += evaluator.computed
            shared[key] = (matched, result)  # holding ``matched``: their ids stay theirs
        out[aggregate] = result
    return out, computed


_COMPUTING: dict[Hashable, threading.Lock] = {}
"""A lock per aggregation (and grid): heavy requests evaluate in worker threads, two at a
time, and the second to want a shared aggregation waits for the first's instead of computing
it beside it, while different aggregations are computed side by side (numpy lets go of the
GIL). A process-wide lock made the whole refresh's aggregations take turns."""
_LOCKS = threading.Lock()
"""Guards ``_COMPUTING``."""
_MAX_LOCKS = 1000
