"""Health that tells the truth, through the real ASGI path: ``GET /`` as Grafana's "Save &
test" checks the token and pings Redis, the page still loads for a browser, the probes answer
without the token, and every refusal under ``/api/v1`` is a Prometheus error envelope."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from slicecount.config import Settings
from slicecount.datasource.app import COLLECTOR_THRESHOLDS, create_app, from_env
from slicecount.embedded import EmbeddedRedis

GRAFANA = {"Accept": "application/json, text/plain, */*"}
"""What Grafana's backend sends with simPod's "Save & test"."""
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
TOKEN = {"Authorization": "Bearer s3cret"}
WRONG = {"Authorization": "Bearer s3cre"}
PROMETHEUS = ["/api/v1/query?query=up", "/api/v1/query_range?query=up&start=1&end=2&step=1",
              "/api/v1/labels", "/api/v1/label/__name__/values", "/api/v1/series?match[]=up",
              "/api/v1/metadata", "/api/v1/rules", "/api/v1/query_exemplars?query=up"]  # fmt: skip


@pytest.fixture
def server(private_redis: EmbeddedRedis) -> EmbeddedRedis:
    """A Redis of the test's own: stopped by the tests of the 503s."""
    return private_redis


@pytest.fixture
def secured(server: EmbeddedRedis) -> Iterator[TestClient]:
    settings = Settings(redis_url=server.url, token="s3cret", socket_timeout=1.0)
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.fixture
def tokenless(server: EmbeddedRedis) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(redis_url=server.url, socket_timeout=1.0))) as client:
        yield client


def test_grafana_health_check_is_green_only_with_the_token_and_redis(
    secured: TestClient, server: EmbeddedRedis
) -> None:
    missing = secured.get("/", headers=GRAFANA)
    assert missing.status_code == 401
    assert missing.json()["message"].startswith("authentication required")
    wrong = secured.get("/", headers={**GRAFANA, **WRONG})
    assert wrong.status_code == 401 and "wrong credentials" in wrong.json()["message"]
    healthy = secured.get("/", headers={**GRAFANA, **TOKEN})
    assert healthy.status_code == 200
    assert healthy.json() == {"status": "ok", "service": "slicecount datasource"}
    basic = secured.get("/", headers=GRAFANA, auth=("grafana", "s3cret"))  # Grafana basic auth
    assert basic.status_code == 200

    server.stop()
    down = secured.get("/", headers={**GRAFANA, **TOKEN})
    assert down.status_code == 503
    assert down.headers["content-type"] == "application/json"
    assert down.json()["message"].startswith("redis unavailable")
    assert secured.get("/", headers=GRAFANA).status_code == 401  # the token first, still

    server.start()
    assert secured.get("/", headers={**GRAFANA, **TOKEN}).status_code == 200  # back to green


def test_any_client_but_a_browser_gets_the_health_check(secured: TestClient) -> None:
    for accept in ("application/json", "*/*", "", "text/plain"):
        assert secured.get("/", headers={"Accept": accept}).status_code == 401, accept
        answer = secured.get("/", headers={"Accept": accept, **TOKEN})
        assert answer.json()["status"] == "ok", accept


def test_the_page_loads_without_the_token_even_while_redis_is_down(
    secured: TestClient, server: EmbeddedRedis
) -> None:
    server.stop()
    page = secured.get("/", headers=BROWSER)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'id="token-form"' in page.text  # the form the page shows on the API's 401
    head = secured.head("/", headers=BROWSER)
    assert head.status_code == 200 and head.headers["content-type"].startswith("text/html")


def test_head_is_the_health_check_too(secured: TestClient, server: EmbeddedRedis) -> None:
    assert secured.head("/", headers=GRAFANA).status_code == 401
    assert secured.head("/", headers={**GRAFANA, **WRONG}).status_code == 401
    assert secured.head("/", headers={**GRAFANA, **TOKEN}).status_code == 200
    server.stop()
    assert secured.head("/", headers={**GRAFANA, **TOKEN}).status_code == 503


def test_the_probes_are_open_and_only_readiness_needs_redis(
    secured: TestClient, server: EmbeddedRedis
) -> None:
    for method in ("GET", "HEAD"):
        assert secured.request(method, "/livez").status_code == 200
        assert secured.request(method, "/readyz").status_code == 200
    assert secured.get("/readyz").json() == {"status": "ok", "service": "slicecount datasource"}
    server.stop()
    assert secured.get("/livez").status_code == 200  # a Redis outage must not restart the pod
    down = secured.get("/readyz")
    assert down.status_code == 503 and down.json()["message"].startswith("redis unavailable")
    assert secured.post("/readyz").status_code == 401  # only reads are open


def test_prometheus_refusals_are_error_envelopes(secured: TestClient) -> None:
    for path in PROMETHEUS:
        for headers in ({}, WRONG, {"Authorization": "Basic !!!"}):
            for method in ("GET", "POST"):
                answer = secured.request(method, path, headers=headers)
                assert answer.status_code == 401, (method, path, headers)
                body = answer.json()
                assert body["status"] == "error" and body["errorType"] == "unauthorized"
                assert "token" in body["error"]
                assert answer.headers["www-authenticate"].startswith("Bearer")
        assert secured.get(path, headers=TOKEN).status_code == 200, path
    buildinfo = secured.get("/api/v1/status/buildinfo")  # Grafana reads it: open
    assert buildinfo.status_code == 200 and buildinfo.json()["status"] == "success"


def test_prometheus_503_is_an_error_envelope(secured: TestClient, server: EmbeddedRedis) -> None:
    server.stop()
    for path in ("/api/v1/query?query=up", "/api/v1/labels", "/api/v1/series?match[]=up"):
        answer = secured.get(path, headers=TOKEN)
        assert answer.status_code == 503, path
        body = answer.json()
        assert body["status"] == "error" and body["errorType"] == "unavailable", path
        assert body["error"].startswith("redis unavailable")


def test_a_tokenless_server_serves_a_token_and_says_so_once(
    tokenless: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="slicecount.datasource"):
        for _ in range(3):
            assert tokenless.get("/", headers={**GRAFANA, **TOKEN}).status_code == 200
            assert tokenless.get("/api/v1/labels", headers=TOKEN).status_code == 200
        assert tokenless.get("/", headers=GRAFANA).status_code == 200
    notices = [r.getMessage() for r in caplog.records if "carried credentials" in r.getMessage()]
    assert len(notices) == 1 and "no token" in notices[0]


def test_a_tokenless_health_check_still_pings_redis(
    tokenless: TestClient, server: EmbeddedRedis
) -> None:
    server.stop()
    assert tokenless.get("/", headers=GRAFANA).status_code == 503


def test_from_env_without_a_token_warns_that_it_is_open(
    server: EmbeddedRedis, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SLICECOUNT_REDIS_URL", server.url)
    monkeypatch.delenv("SLICECOUNT_TOKEN", raising=False)
    with caplog.at_level(logging.WARNING, logger="slicecount.datasource"):
        from_env()
    assert [r.getMessage() for r in caplog.records if "no token" in r.getMessage()] == [
        "no token: the datasource is open to anyone who can reach its port "
        "(set SLICECOUNT_TOKEN to require one)"
    ]
    monkeypatch.setenv("SLICECOUNT_TOKEN", "s3cret")
    caplog.clear()
    with TestClient(from_env()) as client:
        assert client.get("/", headers=GRAFANA).status_code == 401
    assert not [r for r in caplog.records if "no token" in r.getMessage()]


def test_grafana_prometheus_health_check_pings_redis(
    secured: TestClient, server: EmbeddedRedis
) -> None:
    probe = "/api/v1/query?query=1%2B1&time=4"  # what Grafana's Prometheus "Save & test" asks
    assert secured.get(probe, headers=WRONG).json()["errorType"] == "unauthorized"
    healthy = secured.get(probe, headers=TOKEN)
    assert healthy.status_code == 200 and healthy.json()["data"]["result"] == [4, "2"]
    server.stop()
    down = secured.get(probe, headers=TOKEN)
    assert down.status_code == 503 and down.json()["errorType"] == "unavailable"


def test_the_collector_waits_longer_while_the_app_serves(server: EmbeddedRedis) -> None:
    before = gc.get_threshold()
    first = create_app(Settings(redis_url=server.url))
    second = create_app(Settings(redis_url=server.url))
    assert gc.get_threshold() == before  # made, not started: nothing changed yet
    one = TestClient(first).__enter__()
    try:
        assert gc.get_threshold() == COLLECTOR_THRESHOLDS
        with TestClient(second) as two:  # started after the first, stopped before it
            assert two.get("/").status_code == 200
        assert gc.get_threshold() == COLLECTOR_THRESHOLDS  # the first still serves
        assert one.get("/").status_code == 200
    finally:
        one.__exit__(None, None, None)
    assert gc.get_threshold() == before
    with TestClient(first):  # started and stopped in the other order
        two = TestClient(second).__enter__()
    assert gc.get_threshold() == COLLECTOR_THRESHOLDS  # the second still serves
    two.__exit__(None, None, None)
    assert gc.get_threshold() == before
