"""The I/O of ``unique(...)`` targets: their series discovered (cached, as counters are) and
their unions counted, every target's at once, in calls of bounded size run side by side."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from slicecount.datasource import uniques
from slicecount.datasource.budget import Work
from slicecount.datasource.discovery import SeriesInfo
from slicecount.datasource.evaluate import Series
from slicecount.datasource.limits import LimitExceeded
from slicecount.datasource.nodes import Node
from slicecount.datasource.plan import QueryPlan, SeriesQuery
from slicecount.datasource.reader import READS_IN_FLIGHT, Reader, all_done
from slicecount.unique_reading import Group

UNION_SLICES_PER_CALL = 20_000
"""Slices named in one ``count_unions`` call: its reply is small, but Redis merges each
union's HLLs in one go (~20 ms for this many), so no call holds a server for long."""

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
    """The series of every union node: each union counted by ``count_unions`` at its target's
    precision, in calls of at most UNION_SLICES_PER_CALL slices, READS_IN_FLIGHT at once."""
    jobs = [job for query, mine in picked.items() for job in _jobs(query, mine)]
    gate = asyncio.Semaphore(READS_IN_FLIGHT)

    async def count(precision: int, part: list[Group]) -> list[int]:
        async with gate:
            return await reader.store.count_unions(precision, part)

    calls: list[asyncio.Future[list[int]]] = []
    by_job: list[list[int]] = []  # the calls each job's counts come from, in order
    for job in jobs:
        assert job.query.unique is not None
        precision = job.query.unique.precision
        mine = []
        for part in parts(list(uniques.groups(job.outputs, job.points))):
            mine.append(len(calls))
            calls.append(asyncio.ensure_future(count(precision, part)))
        by_job.append(mine)
    await all_done(calls)
    out: dict[SeriesQuery, dict[Node, list[Series]]] = {}
    for job, mine in zip(jobs, by_job, strict=True):
        counts = iter([c for i in mine for c in calls[i].result()])
        out.setdefault(job.query, {})[job.leaf] = uniques.build(job.outputs, job.points, counts)
    return out


def parts(groups: Sequence[Group], limit: int = UNION_SLICES_PER_CALL) -> list[list[Group]]:
    """``groups`` cut into calls of at most ``limit`` slices (a bigger union alone in its
    call)."""
    chunks: list[list[Group]] = [[]]
    size = 0
    for group in groups:
        slices = sum(len(starts) for _, starts in group)
        if chunks[-1] and size + slices > limit:
            chunks.append([])
            size = 0
        chunks[-1].append(group)
        size += slices
    return [c for c in chunks if c]
