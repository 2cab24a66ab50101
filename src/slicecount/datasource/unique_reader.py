"""The I/O of ``unique(...)`` targets: their series discovered (cached, as counters are) and
their unions counted, every target's at once, in calls of bounded size run side by side."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import NamedTuple

from slicecount.datasource import uniques
from slicecount.datasource.budget import Work
from slicecount.datasource.discovery import SeriesInfo
from slicecount.datasource.evaluate import Series
from slicecount.datasource.limits import LimitExceeded
from slicecount.datasource.nodes import Node
from slicecount.datasource.plan import QueryPlan, SeriesQuery
from slicecount.datasource.reader import Reader, all_done

Picked = dict[Node, list[SeriesInfo]]
"""The unique series each union node of a target matched."""


class _Job(NamedTuple):
    query: SeriesQuery
    leaf: Node
    outputs: list[uniques.Output]
    points: list[range | None]


async def discover(reader: Reader, plan: QueryPlan) -> dict[SeriesQuery, Picked]:
    """The unique series of every union node of every unique target; LimitExceeded past the
    series limit of a target."""
    queries = [q for q in plan.series_queries if q.unique is not None]
    wanted = {
        (name, q.unique.precision): None
        for q in queries
        if q.unique is not None
        for leaf in q.unique.leaves
        for name in uniques.selector_of(leaf).names
    }
    tasks = [asyncio.ensure_future(reader.unique_series_of(n, p)) for n, p in wanted]
    await all_done(tasks)
    found = {key: task.result() for key, task in zip(wanted, tasks, strict=True)}
    picked: dict[SeriesQuery, Picked] = {}
    for query in queries:
        assert query.unique is not None
        mine: Picked = {}
        for leaf in query.unique.leaves:
            selector = uniques.selector_of(leaf)
            mine[leaf] = [
                s
                for name in selector.names
                for s in found[(name, query.unique.precision)]
                if selector.matches(s.labels)
            ]
        if sum(map(len, mine.values())) > reader.limits.max_series:
            raise LimitExceeded(
                f"the query matches more than {reader.limits.max_series} unique series: "
                "narrow it with label matchers"
            )
        picked[query] = mine
    return picked


def _jobs(query: SeriesQuery, picked: Picked) -> list[_Job]:
    assert query.unique is not None
    points = uniques.point_slices(query.timeline, query.unique.precision)
    return [
        _Job(query, leaf, uniques.outputs(leaf, picked.get(leaf, [])), points)
        for leaf in query.unique.leaves
    ]


def work(query: SeriesQuery, picked: Picked | None) -> Work:
    """What a unique target reads and computes (nothing for a counters target)."""
    if query.unique is None or picked is None:
        return Work()
    jobs = _jobs(query, picked)
    points = jobs[0].points if jobs else []
    read, computed = uniques.work(query.node, [j.outputs for j in jobs], points)
    return Work(read, computed)


async def read(
    reader: Reader, plan: QueryPlan, picked: Mapping[SeriesQuery, Picked]
) -> dict[SeriesQuery, dict[Node, list[Series]]]:
    """The series of every union node: each union counted by ``Reader.count_unions`` at its
    target's precision, every target's at once."""
    jobs = [job for query, mine in picked.items() for job in _jobs(query, mine)]
    calls = [
        asyncio.ensure_future(
            reader.count_unions(
                job.query.unique.precision, list(uniques.groups(job.outputs, job.points))
            )
        )
        for job in jobs
        if job.query.unique is not None
    ]
    await all_done(calls)
    out: dict[SeriesQuery, dict[Node, list[Series]]] = {}
    for job, call in zip(jobs, calls, strict=True):
        counts = iter(call.result())
        out.setdefault(job.query, {})[job.leaf] = uniques.build(job.outputs, job.points, counts)
    return out
