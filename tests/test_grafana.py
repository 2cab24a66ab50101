"""Every dashboard panel, sent to the datasource as Grafana would send it (variables
interpolated in Grafana's regex format), answers with data recorded by the example apps."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.testclient import TestClient

import slicecount
from slicecount.config import Settings
from slicecount.datasource.app import create_app
from slicecount.datasource.protocol import regex_escape
from slicecount.examples.traffic import flask_request, starlette_request

ROOT = Path(__file__).resolve().parents[1]
DASHBOARDS = sorted((ROOT / "grafana" / "dashboards").glob("*.json"))


@pytest.fixture
def demo_data(settings: Settings) -> Iterator[Settings]:
    """The example apps under the traffic generator's mix, in-process, recorded in Redis."""
    import random

    from slicecount.examples import flask_app, starlette_app

    recorder = slicecount.configure(settings)
    rng = random.Random(3)
    flask_app.create_app().logger.disabled = True
    flask = flask_app.create_app().test_client()
    for _ in range(300):
        method, path = flask_request(rng)
        flask.open(
            path.replace("seconds=0.6", "seconds=0.01").replace("seconds=0.2", "seconds=0.01"),
            method=method,
            buffered=True,
        )
    with TestClient(starlette_app.app, raise_server_exceptions=False) as client:
        for _ in range(150):
            method, path = starlette_request(rng)
            client.request(method, path.replace("seconds=0.3", "seconds=0.01"))
    assert recorder.flush()
    recorder.store.annotate("v1.2 deployed", ["deploy"])
    yield settings
    recorder.close()


def interpolate(text: str, values: dict[str, list[str] | None]) -> str:
    """Grafana's regex format: All -> the variable's allValue, one value -> escaped, many ->
    (a|b)."""

    def one(match: re.Match[str]) -> str:
        chosen = values[match.group(1)]
        if chosen is None:
            return ".*"
        escaped = [regex_escape(v) for v in chosen]
        return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"

    return re.sub(r"\$(\w+)", one, text)


def query_body(targets: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "range": {"from": "now-1h", "to": "now"},  # replaced below with ISO times
        "intervalMs": 2000,
        "maxDataPoints": 800,
        "targets": targets,
        "filters": [],
    }


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
@pytest.mark.parametrize(
    "selection",
    [
        {"route": None, "method": None},
        {"route": ["/users/<int:user_id>", "/error"], "method": ["GET"]},
    ],
    ids=["all", "chosen"],
)
def test_every_panel_answers_with_data(
    path: Path, selection: dict[str, list[str] | None], demo_data: Settings
) -> None:
    from datetime import datetime, timedelta, timezone

    dashboard = json.loads(path.read_text())
    assert dashboard["schemaVersion"] >= 39
    now = datetime.now(timezone.utc)
    span = {"from": (now - timedelta(hours=1)).isoformat(), "to": now.isoformat()}
    with TestClient(create_app(demo_data)) as client:
        for variable in dashboard["templating"]["list"]:
            response = client.post(
                "/variable", json={"payload": {"target": variable["query"]["query"]}, "range": span}
            )
            assert response.status_code == 200 and response.json(), variable["name"]
        for panel in dashboard["panels"]:
            targets = [
                {**t, "target": interpolate(t["target"], selection)} for t in panel["targets"]
            ]
            body = {**query_body(targets), "range": span}
            response = client.post("/query", json=body)
            assert response.status_code == 200, (panel["title"], response.text)
            frames = response.json()
            assert {f["refId"] for f in frames} == {t["refId"] for t in targets}, panel["title"]
            nonzero = False
            for frame in frames:
                if frame.get("type") == "table":
                    assert frame["rows"], panel["title"]
                    nonzero = True
                else:  # every series has values; some series is above zero somewhere
                    values = [v for v, _ in frame["datapoints"] if v is not None]
                    assert values, (panel["title"], frame["target"])
                    nonzero = nonzero or any(values)
            assert nonzero, panel["title"]
        for annotation in dashboard["annotations"]["list"]:
            if annotation["datasource"]["uid"] != "slicecount":
                continue
            body = {**query_body([annotation["target"]]), "range": span}
            (table,) = client.post("/query", json=body).json()
            assert [row[4] for row in table["rows"]] == ["deploy"]


def test_provisioning_points_at_the_dashboards_and_the_datasource() -> None:
    datasources = yaml.safe_load(
        (ROOT / "grafana/provisioning/datasources/slicecount.yaml").read_text()
    )
    (source,) = datasources["datasources"]
    assert source["type"] == "simpod-json-datasource" and source["uid"] == "slicecount"
    assert source["secureJsonData"]["httpHeaderValue1"] == "Bearer ${SLICECOUNT_TOKEN}"
    providers = yaml.safe_load(
        (ROOT / "grafana/provisioning/dashboards/slicecount.yaml").read_text()
    )
    assert providers["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards/slicecount"
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text())
        for panel in dashboard["panels"]:
            assert panel["datasource"]["uid"] == source["uid"]
