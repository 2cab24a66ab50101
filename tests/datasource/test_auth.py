from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from slicecount.config import Settings
from slicecount.datasource.app import create_app
from slicecount.datasource.auth import authorized


@pytest.fixture
def secured(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings.with_changes(token="s3cret"))) as client:
        yield client


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


ENDPOINTS = ["/query", "/search", "/metrics", "/metric-payload-options", "/variable",
             "/tag-keys", "/tag-values", "/annotations"]  # fmt: skip


def test_every_endpoint_and_the_health_check_need_the_token(secured: TestClient) -> None:
    assert secured.get("/").status_code == 401  # Grafana's "Save & test": green only with it
    assert secured.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    for path in ENDPOINTS:
        response = secured.post(path, json={})
        assert response.status_code == 401, path
        assert "authentication required" in response.json()["message"]
        assert response.headers["www-authenticate"].startswith("Bearer")
    assert secured.get("/openapi.json").status_code == 401


def test_bearer_or_basic_password_opens_it(secured: TestClient) -> None:
    for header in ("Bearer s3cret", basic("grafana", "s3cret"), basic("", "s3cret")):
        response = secured.post("/search", json={}, headers={"Authorization": header})
        assert response.status_code == 200, header
    for header in (
        "Bearer wrong",
        "Bearer",
        basic("grafana", "s3cre"),
        "Basic !!!",
        "Token s3cret",
        "s3cret",
    ):
        assert (
            secured.post("/search", json={}, headers={"Authorization": header}).status_code == 401
        )


def test_no_token_means_open(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:
        assert client.post("/search", json={}).status_code == 200


def test_authorized_compares_whole_tokens() -> None:
    assert authorized(b"Bearer abc", "abc")
    assert not authorized(b"Bearer abcd", "abc")
    assert not authorized(b"Bearer ab", "abc")
    assert not authorized(None, "abc")
    assert not authorized("Bearer é".encode(), "abc")


def test_the_page_and_its_files_are_open_but_its_data_is_not(secured: TestClient) -> None:
    page = secured.get("/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "ui/vendor/uPlot.iife.min.js" in page.text
    script = secured.get("/ui/main.js")  # an ES module: served as JavaScript, or not run
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert secured.get("/ui/vendor/uPlot.LICENSE").status_code == 200
    assert secured.post("/ui/main.js").status_code == 401  # only reads are open
    grafana = {"Accept": "application/json, text/plain, */*"}  # Grafana's Save & test
    assert secured.get("/", headers=grafana).status_code == 401
    health = secured.get("/", headers={**grafana, "Authorization": "Bearer s3cret"})
    assert health.json()["status"] == "ok"
