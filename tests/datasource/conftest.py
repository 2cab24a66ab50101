"""A datasource app on a real Redis, with a frozen clock and known data."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
import redis
from starlette.testclient import TestClient

from slicecount.config import DEFAULT_PRECISIONS, DEFAULT_RETENTION, Settings
from slicecount.config.request_limits import Limits
from slicecount.datasource.app import create_app
from slicecount.reads.reader import Reader
from slicecount.store import Store
from slicecount.store.asyncio import AsyncStore

T0 = 1_700_006_400  # a multiple of 86400
NOW = T0 + 7230  # 2 h 30 s later: 30 s into a 60 s slice
HOUR = 3600


def iso(epoch: float) -> str:
    from datetime import datetime, timezone

    return (
        datetime.fromtimestamp(epoch, timezone.utc)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def legacy_body(
    targets: list[dict[str, Any]], start: float, end: float, **extra: Any
) -> dict[str, Any]:
    """A /query body as the SimpleJSON plugin sends it (Grafana 9.5/10 dashboard)."""
    body: dict[str, Any] = {
        "app": "dashboard",
        "requestId": "Q101",
        "timezone": "browser",
        "panelId": 2,
        "dashboardId": 7,
        "dashboardUID": "abc",
        "range": {"from": iso(start), "to": iso(end), "raw": {"from": "now-1h", "to": "now"}},
        "timeInfo": "",
        "interval": "2s",
        "intervalMs": 2000,
        "targets": targets,
        "maxDataPoints": 1114,
        "scopedVars": {"__interval": {"text": "2s", "value": "2s"},
                       "__interval_ms": {"text": "2000", "value": 2000}},
        "startTime": 1717668302250,
        "rangeRaw": {"from": "now-1h", "to": "now"},
        "adhocFilters": [],
    }  # fmt: skip
    body.update(extra)
    return body


def simpod_body(
    targets: list[dict[str, Any]], start: float, end: float, **extra: Any
) -> dict[str, Any]:
    """A /query body as simpod-json-datasource 0.6 sends it (Grafana 11 scenes)."""
    body: dict[str, Any] = {
        "app": "dashboard",
        "requestId": "SQR103",
        "timezone": "browser",
        "range": {"from": iso(start), "to": iso(end), "raw": {"from": "now-1h", "to": "now"}},
        "interval": "2s",
        "intervalMs": 2000,
        "maxDataPoints": 1114,
        "startTime": 1717668302250,
        "rangeRaw": {"from": "now-1h", "to": "now"},
        "dashboardUID": "abc",
        "panelId": 2,
        "panelName": "Requests",
        "panelPluginId": "timeseries",
        "filters": [],
        "targets": [
            {"datasource": {"type": "simpod-json-datasource", "uid": "P1"}, "editorMode": "code",
             **t} for t in targets
        ],
        "scopedVars": {"__sceneObject": {"text": "__sceneObject"},
                       "__interval": {"text": "2s", "value": "2s"},
                       "__interval_ms": {"text": "2000", "value": 2000}},
    }  # fmt: skip
    body.update(extra)
    return body


_KNOWN: dict[str, list[tuple[bytes, int, bytes]]] = {}
"""The known data as each server and settings left it: (key, ms to live or 0, DUMP)."""


def write_known_data(store: Store) -> None:
    """The last hour before NOW: /a answers 200 once a second and 500 twice a minute; /b 200
    five times in total; a duration histogram on /a; DB queries; a deploy annotation.

    Written through the store once per server and settings, then restored from its DUMP: the
    writes cost 40-55 ms, and hundreds of tests start from this data (on a cluster, written)."""
    client = store.client
    if not isinstance(client, redis.Redis):
        _write_known_data(store)
        return
    known = repr(store.settings)  # the server's URL and all that shapes the keys
    if known not in _KNOWN:
        _write_known_data(store)
        keys = sorted(client.scan_iter(count=1000))
        dumps = [(k, max(int(client.pttl(k)), 0), client.dump(k)) for k in keys]
        _KNOWN[known] = cast(list[tuple[bytes, int, bytes]], dumps)
        return
    pipe = client.pipeline(transaction=False)
    for key, ttl, dump in _KNOWN[known]:
        pipe.restore(key, ttl, dump, replace=True)
    pipe.execute()


def _write_known_data(store: Store) -> None:
    ok_a = {s: 1 for s in range(NOW - HOUR, NOW)}
    err_a = {s: 2 for s in range(NOW - HOUR, NOW) if s % 60 == 10}
    ok_b = {NOW - 600 + i: 1 for i in range(5)}
    batch = {
        'http.requests{method="GET",route="/a",status="200"}': ok_a,
        'http.requests{method="GET",route="/a",status="500"}': err_a,
        'http.requests{method="POST",route="/b",status="200"}': ok_b,
        'db.queries{operation="SELECT"}': {NOW - 90: 7},
    }
    per_minute = {s: 1 for s in range(NOW - HOUR, NOW) if s % 60 == 0}
    for le, n in (("0.1", 6), ("0.5", 3), ("+Inf", 1)):
        batch[f'http.request.duration.bucket{{le="{le}",method="GET",route="/a"}}'] = {
            s: n for s in per_minute
        }
    store.apply(batch)
    store.annotate("deployed v1.2", ["deploy"], when=NOW - 1800, title="deploy v1.2")
    store.annotate("config change", ["config"], when=NOW - 900)


SMALL_LIMITS = Limits(max_series=50, max_points=2000, max_targets=5, max_body_bytes=20_000)
"""Limits small enough for the tests to reach each one with little data."""


@pytest.fixture
def settings(redis_url: str, layout: str) -> Settings:
    """The test's layout with the book's ladder, the one these tests' numbers are written for
    (120 slices each: 60 s cover 2 h, 300 s 10 h...); the blocks layout takes any ladder."""
    return Settings(
        redis_url=redis_url,
        layout=layout,
        precisions=DEFAULT_PRECISIONS,
        retention=DEFAULT_RETENTION,
    )


@pytest.fixture
def ds_settings(settings: Settings) -> Settings:
    return settings


@pytest.fixture
def client(ds_settings: Settings, store: Store) -> Iterator[TestClient]:
    write_known_data(store)
    app = create_app(ds_settings, limits=SMALL_LIMITS, clock=lambda: NOW)
    with TestClient(app) as client:
        yield client


@pytest.fixture
def fuzz_client(ds_settings: Settings, store: Store) -> Iterator[TestClient]:
    """A client on the app the schemathesis test loaded its schema from, now on the test Redis."""
    from tests.datasource.test_schemathesis import _app

    write_known_data(store)
    reader: Reader = _app.state.datasource
    real = Settings(redis_url=ds_settings.redis_url)
    reader.store = AsyncStore(real, clock=lambda: NOW)  # its settings come with it
    reader._cache.clear()
    with TestClient(_app) as client:
        yield client
