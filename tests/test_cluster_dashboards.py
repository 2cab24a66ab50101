"""Every request the dashboards send (simPod and Prometheus, variables, panels, annotations,
alert queries) answers the same on a Redis Cluster as on one server, for the same traffic."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
import redis
from starlette.testclient import TestClient

from slicecount.config import Settings
from slicecount.core.series import parse
from slicecount.datasource.app import create_app
from slicecount.store import Store
from tests import test_grafana
from tests.conftest import flushed_url
from tests.test_grafana import (
    DASHBOARDS,
    PROM_DASHBOARDS,
    alert_queries,
    interpolate,
    interpolate_prom,
    query_body,
)

pytestmark = pytest.mark.slow
SELECTIONS: list[dict[str, list[str] | None]] = [
    {"route": None, "method": None},
    {"route": ["/users/<int:user_id>", "/items/{item_id}", "/error"], "method": ["GET"]},
]
demo_data = test_grafana.demo_data  # the fixture: the example apps' traffic, recorded
Request = tuple[str, str, str, dict[str, Any]]  # what, method, path, httpx arguments


def simpod_requests(now: float) -> Iterator[Request]:
    def iso(epoch: float) -> str:
        return datetime.fromtimestamp(epoch, timezone.utc).isoformat()

    span = {"from": iso(now - 3600), "to": iso(now)}
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text())
        for variable in dashboard["templating"]["list"]:
            target = {"payload": {"target": variable["query"]["query"]}, "range": span}
            yield variable["name"], "POST", "/variable", {"json": target}
        for selection in SELECTIONS:
            for panel in dashboard["panels"]:
                targets = [
                    {**t, "target": interpolate(t["target"], selection)} for t in panel["targets"]
                ]
                body = {**query_body(targets), "range": span}
                yield f"{panel['title']} {selection}", "POST", "/query", {"json": body}
        for annotation in dashboard["annotations"]["list"]:
            if annotation["datasource"]["uid"] == "slicecount":
                body = {**query_body([annotation["target"]]), "range": span}
                yield annotation["name"], "POST", "/query", {"json": body}


def prometheus_requests(now: float) -> Iterator[Request]:
    span = {"start": f"{now - 3600:.3f}", "end": f"{now:.3f}", "step": "15"}
    for label in ("route", "method"):
        params = {"match[]": "http_requests_total", "start": span["start"], "end": span["end"]}
        yield label, "GET", f"/api/v1/label/{label}/values", {"params": params}
    models = [
        (f"{panel['title']} {target['refId']} {selection}", target, selection)
        for path in PROM_DASHBOARDS
        for panel in json.loads(path.read_text())["panels"]
        for target in panel["targets"]
        for selection in SELECTIONS
    ]
    models += [(name, model, SELECTIONS[0]) for name, model in alert_queries()]
    for name, model, selection in models:
        query = interpolate_prom(model["expr"], selection)
        yield name, "POST", "/api/v1/query_range", {"data": {"query": query, **span}}
        if model.get("instant"):
            instant = {"query": query, "time": span["end"]}
            yield name, "POST", "/api/v1/query", {"data": instant}


def copy_traffic(source: Store, target: Store, now: float, raw: Any) -> None:
    """Every series' per-second counts (the traffic took seconds: all of it is inside the 1 s
    precision's retention) written again through the target's own write path; the unique
    series (and first-seen counters, which are no sums of their seconds) copied key by key."""
    batch: dict[str, dict[int, int]] = {}
    first = int(now) - source.settings.retention_for(1) + 1
    unique_names = {s.split("{")[0] for s in source.all_unique_series(60)}
    for name in set(source.names(1)) - unique_names:
        ids = source.series(name, 1)
        for series_id, values in source.read(ids, 1, first, now).items():
            batch[series_id] = {first + i: n for i, n in enumerate(values) if n}
    assert target.apply(batch) == 0
    copy_uniques(source, target, unique_names, raw)


def copy_counter(
    one: Any, many: Any, source: Store, target: Store, precision: int, series_id: str
) -> None:
    """A counter's keys and member: the book's hash of one precision, or (blocks) the open
    hash and the block of every precision."""
    if source.settings.layout == "book":
        fields = one.hgetall(source.keys.counter(precision, series_id))
        many.hset(target.keys.counter(precision, series_id), mapping=fields)
        many.zadd(target.keys.known_for(series_id), {f"{precision}:{series_id}": 0})
        return
    fields = one.hgetall(source.keys.open(series_id))
    if fields:
        many.hset(target.keys.open(series_id), mapping=fields)
    block = one.get(source.keys.block(series_id))
    if block is not None:
        many.set(target.keys.block(series_id), block)
    many.zadd(target.keys.known_for(series_id), {target.keys.series_member(series_id): 0})


def copy_uniques(source: Store, target: Store, names: set[str], many: Any) -> None:
    """The unique series' HLLs and registry members, and the first-seen counters' hashes, at
    every precision, byte for byte (HLLs are strings)."""
    with redis.Redis.from_url(source.settings.redis_url) as one:
        book = source.settings.layout == "book"
        for p in source.settings.precisions if book else source.settings.precisions[:1]:
            for series_id in source.all_series(p):
                if series_id.split("{")[0] in names:
                    copy_counter(one, many, source, target, p, series_id)
        for p in source.settings.unique_precisions:
            for series_id in source.all_unique_series(p):
                mine = source.keys.unique_layout(series_id, (p,))
                theirs = target.keys.unique_layout(series_id, (p,))
                score = one.zscore(mine.registry, mine.slots[0].member)
                many.zadd(theirs.registry, {theirs.slots[0].member: score})
                for start in source.get_unique(series_id.split("{")[0], p, _labels(series_id)):
                    key = mine.slots[0].hll(start[0])
                    many.set(theirs.slots[0].hll(start[0]), one.get(key), px=one.pttl(key))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_every_dashboard_request_answers_the_same_on_the_cluster(
    demo_data: Settings, request: pytest.FixtureRequest
) -> None:
    now = time.time()
    cluster = Settings(redis_url=flushed_url("cluster", request))
    with Store(demo_data) as one, Store(cluster) as many:
        with redis.Redis.from_url(demo_data.redis_url) as raw:
            notes = raw.zrange(one.keys.annotations(), 0, -1, withscores=True)
        with request.getfixturevalue("cluster_group").client() as raw:
            copy_traffic(one, many, now, raw)
            raw.zadd(many.keys.annotations(), dict(notes))
        for p in one.settings.precisions:  # the same data at every precision
            ids = sorted(one.all_series(p))
            assert sorted(many.all_series(p)) == ids, p
            since = now - one.settings.retention_for(p) * p
            assert many.read(ids, p, since, now) == one.read(ids, p, since, now), p
    asked = filled = 0
    with (
        TestClient(create_app(demo_data, clock=lambda: now)) as single,
        TestClient(create_app(cluster, clock=lambda: now)) as sharded,
    ):
        for what, method, path, arguments in [*simpod_requests(now), *prometheus_requests(now)]:
            expected = single.request(method, path, **arguments)
            assert expected.status_code == 200, (what, expected.text)
            assert sharded.request(method, path, **arguments).json() == expected.json(), what
            asked += 1
            filled += has_data(expected.json())
    assert filled == asked >= 30  # every answer compared had data in it


def has_data(body: Any) -> bool:
    """A Prometheus envelope with a result, or simPod frames/variable values not all empty."""
    if isinstance(body, dict):
        return bool(body["data"]["result"] if isinstance(body["data"], dict) else body["data"])
    return any(item.get("datapoints") or item.get("rows") or item.get("__value") for item in body)


def _labels(series_id: str) -> dict[str, str]:
    return dict(parse(series_id)[1])
