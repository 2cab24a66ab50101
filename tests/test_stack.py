"""docker-compose.yml and the Dockerfile: valid against the Compose specification, and every
service's command, port and environment matches what the code really reads (no engine here,
so the commands are checked by parsing them exactly as the containers would)."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from slicecount.cli import main as cli
from slicecount.config import ENV_PREFIX, Settings
from slicecount.examples.traffic import build_parser

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
SETTING_ENV = {
    ENV_PREFIX + name.upper() for name in Settings.__dataclass_fields__ if name[0] != "_"
}


@pytest.mark.slow
def test_compose_file_follows_the_compose_specification() -> None:
    checker = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent))
    assert checker, "check-jsonschema is a dev dependency"
    result = subprocess.run(
        [checker, "--builtin-schema", "vendor.compose-spec", str(ROOT / "docker-compose.yml")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def published(service: dict[str, Any]) -> set[int]:
    return {int(str(p).split(":")[-1]) for p in service.get("ports", [])}


def import_target(spec: str) -> object:
    module, _, attribute = spec.partition(":")
    return getattr(importlib.import_module(module), attribute)


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def check_slicecount(command: list[str]) -> click.Context:
    """Parse ``slicecount <sub> ...`` with the real CLI, without running it."""
    assert command[0] == "slicecount"
    assert isinstance(cli, click.Group)
    sub = cli.commands.get(command[1])
    assert sub is not None, command
    return sub.make_context(command[1], list(command[2:]))


@pytest.mark.parametrize("name", sorted(n for n in SERVICES if n not in ("redis", "grafana")))
def test_each_app_service_runs_real_code(name: str) -> None:
    service = SERVICES[name]
    command = service["command"]
    if command[0] == "slicecount":
        ctx = check_slicecount(command)
        if "port" in ctx.params:
            assert ctx.params["port"] in published(service), name
            assert ctx.params["host"] == "0.0.0.0"
    elif command[0] == "gunicorn":
        assert import_target(command[-1]) is not None
        config = option(command, "-c")
        assert config.startswith("python:")
        assert callable(importlib.import_module(config[len("python:") :]).worker_exit)
        assert int(option(command, "-b").rsplit(":", 1)[1]) in published(service)
    elif command[0] == "uvicorn":
        assert import_target(command[1]) is not None
        assert int(option(command, "--port")) in published(service)
    else:
        assert command[:3] == ["python", "-m", "slicecount.examples.traffic"]
        args = build_parser().parse_args(command[3:])
        targets = {args.flask.rsplit(":", 1)[0].split("//")[1]: int(args.flask.rsplit(":", 1)[1]),
                   args.starlette.rsplit(":", 1)[0].split("//")[1]:
                       int(args.starlette.rsplit(":", 1)[1])}  # fmt: skip
        for host, port in targets.items():
            assert port in published(SERVICES[host]), (host, port)
    environment = service.get("environment", {})
    for key in environment:
        assert key in SETTING_ENV, f"{name}: {key} is not a setting slicecount reads"
    Settings.from_env({k: v.replace("${SLICECOUNT_TOKEN:-change-me}", "t") for k, v in
                       environment.items()})  # fmt: skip
    assert environment["SLICECOUNT_REDIS_URL"].startswith("redis://redis:6379")
    assert service.get("depends_on"), name


def test_redis_grafana_and_the_datasource_line_up() -> None:
    redis = SERVICES["redis"]
    assert redis["healthcheck"]["test"][:2] == ["CMD", "redis-cli"]
    grafana = SERVICES["grafana"]
    assert grafana["environment"]["GF_INSTALL_PLUGINS"] == "simpod-json-datasource"
    assert "SLICECOUNT_TOKEN" in grafana["environment"]  # the provisioning file reads it
    mounts = {m.split(":")[1]: m.split(":")[0] for m in grafana["volumes"]}
    assert (ROOT / mounts["/etc/grafana/provisioning"]).is_dir()
    provider = yaml.safe_load(
        (ROOT / "grafana/provisioning/dashboards/slicecount.yaml").read_text()
    )
    assert provider["providers"][0]["options"]["path"] in mounts
    source = yaml.safe_load((ROOT / "grafana/provisioning/datasources/slicecount.yaml").read_text())
    url = source["datasources"][0]["url"]
    host, port = url.split("//")[1].split(":")
    assert int(port) in published(SERVICES[host])
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert (ROOT / "grafana/dashboards" / Path(home).name).is_file()


def test_dockerfile_is_slim_and_not_root() -> None:
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    assert any(line.startswith("FROM python:") and "slim" in line for line in lines)
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    for line in lines:
        if line.startswith("COPY ") and "--from=" not in line:  # --from: out of a build stage
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), source
    cmd = next(line for line in lines if line.startswith("CMD "))
    check_slicecount(json.loads(cmd[4:]))
