"""Managed Redis as users run it, end to end: a TLS-only redis-server (the CA given to the
client, or client certificates required), a password, and an ACL user limited to the allow-list
the README gives (or to ``+@all -@dangerous``). Write through a Recorder, read through the sync
and asyncio stores and the datasource (both protocols), clean with the cleaner, throttle with
the Limiter (Redis windows, sliding windows, local quotas); then Redis's ACL LOG must show no
command refused."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from slicecount.cleaner import Cleaner
from slicecount.config import Settings
from slicecount.core.frames import FRAME_SLICES
from slicecount.datasource.app import create_app
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from slicecount.store.asyncio import AsyncStore
from slicecount.throttle import Limiter, Verdict, parse_limits
from tests.datasource.conftest import simpod_body
from tests.tls import APP_USER, TlsRedis, password

BROAD_USER = "slicecount-broad"


@pytest.fixture(
    params=[("tls_redis", APP_USER), ("mtls_redis", APP_USER), ("tls_redis", BROAD_USER)],
    ids=["ca-only+allow-list", "client-certificates+allow-list", "ca-only+no-dangerous"],
)
def managed_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a restricted user on a TLS server emptied for the test."""
    fixture, user = request.param
    server: TlsRedis = request.getfixturevalue(fixture)
    secret = None
    with server.admin() as admin:
        admin.flushall()
        admin.script_flush()  # every case loads the scripts (SCRIPT LOAD) itself
        admin.execute_command("ACL", "LOG", "RESET")
        if user == BROAD_USER:
            secret = password()
            admin.execute_command(
                "ACL", "SETUSER", BROAD_USER, "reset", "on", f">{secret}", "~*", "&*",
                "+@all", "-@dangerous",
            )  # fmt: skip
    yield server.url(user, secret)
    with server.admin() as admin:
        refused = admin.execute_command("ACL", "LOG")
    assert refused == [], f"commands the ACL user was refused: {refused}"


@pytest.mark.slow
@pytest.mark.layouts("book", "blocks")
def test_write_read_clean_and_throttle_as_a_restricted_user(managed_url: str, layout: str) -> None:
    now = time.time()
    settings = Settings(
        redis_url=managed_url, layout=layout, precisions=(1, 60), retention="1=5,60=120"
    )
    with Recorder(Store(settings)) as recorder:
        recorder.add("http.requests", 3, {"route": "/a"}, now=now)
        for second in range(10):  # more slices than the 1 s retention (5): the cleaner trims
            recorder.add("http.requests", 4, {"route": "/a"}, now=now - 30 + second)
        for visitor in ("u1", "u2", "u2"):
            recorder.add_unique("visitors", visitor, now=now)
        assert recorder.flush()
        assert recorder.close()

    with Store(settings) as store:
        store.annotate("deployed", ["deploy"], now - 10)
        assert [n for _, n in store.get("http.requests", 1, {"route": "/a"})] == [4] * 10 + [3]
        assert sum(n for _, n in store.get("http.requests", 60, {"route": "/a"})) == 43
        assert [n for _, n in store.get_unique("visitors", 60)] == [2]
        if layout == "book":
            # retention judged a second after ``now``, however long the test took to get here
            stats = Cleaner(store, clock=lambda: now + 1).run_once(every_precision=True)
            assert stats is not None and stats.deleted == 10
            assert [n for _, n in store.get("http.requests", 1, {"route": "/a"})] == [3]
        else:  # a frame of 1 s slices later, every open slice is sealed and moved into the
            # block, whose 1 s frame is then wholly past retention and dropped, the 60 s kept
            later = now + FRAME_SLICES + 60
            with Store(settings, clock=lambda: later) as ahead:  # (its figures dated then)
                stats = Cleaner(ahead, clock=lambda: later).run_once(every_precision=True)
            assert stats is not None and stats.compaction is not None
            assert stats.compaction.moved == 11 and stats.compaction.bad == []
            assert store.get("http.requests", 1, {"route": "/a"}) == []
        assert sum(n for _, n in store.get("http.requests", 60, {"route": "/a"})) == 43

    async def read_async() -> tuple[list[tuple[int, int]], list[str]]:
        async with AsyncStore(settings) as astore:
            return await astore.get("http.requests", 60, {"route": "/a"}), await astore.series(
                "http.requests", 60
            )

    counts, series = asyncio.run(read_async())
    assert sum(n for _, n in counts) == 43 and series == ['http.requests{route="/a"}']

    body = simpod_body([{"target": "http.requests"}], now - 600, now + 60)
    with TestClient(create_app(settings)) as client:
        answer = client.post("/query", json=body)
        assert answer.status_code == 200, answer.text
        assert sum(v or 0 for v, _ in answer.json()[0]["datapoints"]) == 43
        search = client.post("/search", json={"target": ""})
        assert "http.requests" in search.json()
        promql = client.get("/api/v1/query", params={"query": "sum(http_requests_total)"})
        assert promql.status_code == 200 and promql.json()["status"] == "success", promql.text
        assert client.post("/annotations", json={"range": body["range"]}).status_code == 200

    three = parse_limits("3/minute")
    # every strategy's four checks in one minute: a minute starting between the third and the
    # fourth admits the fourth (a fixed window of 3/minute admits three in each minute)
    if time.time() % 60 > 45:
        time.sleep(61 - time.time() % 60)
    for options in ({}, {"strategy": "sliding"}, {"local_quota": 2}):
        with Limiter(settings, deadline=2.0, **options) as limiter:
            verdicts = [limiter.check(three, f"client-{options}") for _ in range(4)]
            assert [v.status for v in verdicts] == [None, None, None, 429], options

    async def throttle_async() -> Verdict:
        limiter = Limiter(settings, deadline=2.0)
        try:
            return await limiter.check_async(three, "async-client")
        finally:
            await limiter.aclose()

    checked = asyncio.run(throttle_async())
    assert checked.decision is not None and checked.allowed
