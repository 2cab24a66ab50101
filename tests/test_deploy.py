"""deploy/kubernetes, the Dockerfile and .dockerignore: the manifests valid (strict) for a fixed
Kubernetes, every container running real code that its image's extras install, pods that
cannot run as root or write their root filesystem, the datasource's probes run
against a real datasource, and a build context that carries what the wheel needs and no
.venv (no Docker engine here: the build stage's own command builds the wheel from the context
that .dockerignore admits)."""

from __future__ import annotations

import copy
import importlib
import importlib.metadata
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import kubernetes_validate
import pytest
import yaml
from packaging.requirements import Requirement

from slicecount.config import Settings
from slicecount.datasource.app import create_app
from slicecount.embedded import free_port
from tests.serving import serving
from tests.test_stack import SERVICES, SETTING_ENV, check_slicecount

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "deploy" / "kubernetes"
KUBERNETES = "1.31.0"
"""The oldest Kubernetes the manifests promise to fit (validated against, strictly)."""
SECRET = "slicecount"
SECRET_KEYS = {"SLICECOUNT_REDIS_URL": "redis-url", "SLICECOUNT_TOKEN": "token"}
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(MANIFESTS.rglob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            found.append((f"{path.relative_to(MANIFESTS)}:{document['kind']}", document))
    return found


DOCUMENTS = documents()
BY_KIND: dict[str, list[dict[str, Any]]] = {}
for _, _document in DOCUMENTS:
    BY_KIND.setdefault(_document["kind"], []).append(_document)


def pod_specs() -> list[tuple[str, dict[str, Any]]]:
    specs = [(d["metadata"]["name"], d["spec"]["template"]) for d in BY_KIND["Deployment"]]
    specs += [(c["metadata"]["name"], c["spec"]["jobTemplate"]["spec"]["template"])
              for c in BY_KIND["CronJob"]]  # fmt: skip
    return specs


PODS = pod_specs()
CONTAINERS = [
    (f"{name}/{c['name']}", c, pod) for name, pod in PODS for c in pod["spec"]["containers"]
]


@pytest.mark.parametrize(("name", "document"), DOCUMENTS, ids=[n for n, _ in DOCUMENTS])
def test_manifests_validate_strictly(name: str, document: dict[str, Any]) -> None:
    kubernetes_validate.validate(document, KUBERNETES, strict=True)


def test_strict_validation_refuses_a_misspelt_field() -> None:
    _, deployment = next(d for d in DOCUMENTS if d[1]["kind"] == "Deployment")
    broken = copy.deepcopy(deployment)
    broken["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFs"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES, strict=True)


def test_the_manifests_hold_what_the_deployment_promises() -> None:
    assert {d["kind"] for _, d in DOCUMENTS} == {"Deployment", "Service", "CronJob"}
    commands = {name: c["command"][:2] for name, c, _ in CONTAINERS}
    assert commands["app/cleaner"] == ["slicecount", "cleaner"]  # the sidecar
    assert commands["slicecount-cleaner/cleaner"] == ["slicecount", "cleaner"]
    assert (
        "--once" in dict((n, c) for n, c, _ in CONTAINERS)["slicecount-cleaner/cleaner"]["command"]
    )
    assert commands["slicecount-datasource/datasource"] == ["slicecount", "datasource"]
    (cronjob,) = BY_KIND["CronJob"]
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    assert Path(MANIFESTS / "alternatives").is_dir()  # not applied with `kubectl apply -f dir`


# Each image of the manifests, and the extras it is built with (the comments say how).
def dockerfile_extras() -> list[str]:
    defaults: list[str] = re.findall(r"^ARG EXTRAS=(\S+)$", DOCKERFILE, re.M)
    (default,) = defaults
    return default.split(",")


COMPOSE_EXTRAS = SERVICES["flask-app"]["build"]["args"]["EXTRAS"].split(",")
IMAGES = {"slicecount": dockerfile_extras(), "slicecount-examples": COMPOSE_EXTRAS}


def requirements(extras: list[str]) -> set[str]:
    """What installing slicecount with these extras requires (hatchling writes an extra that
    names another, such as demo, with the other's requirements in full)."""
    provided = set(importlib.metadata.metadata("slicecount").get_all("Provides-Extra") or [])
    assert set(extras) <= provided, extras
    found = set()
    for line in importlib.metadata.requires("slicecount") or []:
        requirement = Requirement(line)
        marker = re.search(r"extra == [\"']([\w-]+)[\"']", str(requirement.marker))
        if marker and marker.group(1) in extras:
            requirement.marker = None
            found.add(str(requirement))
    return found


def installs(image_extras: list[str], extra: str) -> bool:
    return requirements([extra]) <= requirements(image_extras)


def needed_extra(command: list[str]) -> str | None:
    """The extra a container's command needs, after checking that it parses as the real
    program would (the CLI's own parser, an importable app)."""
    if command[0] == "slicecount":
        check_slicecount(command)
        return "datasource" if command[1] == "datasource" else "cli"
    if command[0] in ("gunicorn", "uvicorn"):
        target = command[-1] if command[0] == "gunicorn" else command[1]
        module, _, attribute = target.partition(":")
        assert getattr(importlib.import_module(module), attribute) is not None
        return "examples"
    assert command[:3] == ["python", "-m", "slicecount.examples.traffic"], command
    return None  # the core


@pytest.mark.parametrize(("name", "container", "pod"), CONTAINERS, ids=[c[0] for c in CONTAINERS])
def test_each_container_runs_real_code_its_image_installs(
    name: str, container: dict[str, Any], pod: dict[str, Any]
) -> None:
    image, _, tag = container["image"].partition(":")
    assert tag and tag != "latest", name  # a pinned tag: a rollout is a manifest change
    extra = needed_extra(container["command"])
    assert extra is None or installs(IMAGES[image], extra), (name, IMAGES[image])
    ports = [p["containerPort"] for p in container.get("ports", [])]
    for flag in ("--port", "-b"):
        if flag in container["command"]:
            given = container["command"][container["command"].index(flag) + 1]
            assert int(given.rsplit(":", 1)[-1]) in ports, name
    env = {e["name"]: e for e in container.get("env", [])}
    assert "SLICECOUNT_REDIS_URL" in env, name
    for variable, entry in env.items():
        assert variable in SETTING_ENV, f"{name}: {variable} is not a setting slicecount reads"
        # credentials from the Secret, never inline
        assert entry["valueFrom"]["secretKeyRef"] == {"name": SECRET, "key": SECRET_KEYS[variable]}


@pytest.mark.parametrize("name", sorted(n for n, _ in SERVICES.items() if "build" in SERVICES[n]))
def test_each_compose_service_is_built_with_the_extras_it_runs(name: str) -> None:
    build = SERVICES[name]["build"]
    assert build["context"] == "."
    extra = needed_extra(SERVICES[name]["command"])
    assert extra is None or installs(build["args"]["EXTRAS"].split(","), extra), name


def image_user() -> int:
    users = re.findall(r"^USER (\S+)$", DOCKERFILE, re.M)
    return int(users[-1].split(":")[0])


@pytest.mark.parametrize(("name", "pod"), PODS, ids=[n for n, _ in PODS])
def test_pods_run_as_the_images_user_read_only_and_bounded(name: str, pod: dict[str, Any]) -> None:
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is False  # no pod talks to the Kubernetes API
    context = spec["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["runAsUser"] == image_user() != 0
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in spec["containers"]:
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }, container["name"]
        for bound in ("requests", "limits"):
            assert set(container["resources"][bound]) == {"cpu", "memory"}, container["name"]
        mounts = {m["name"] for m in container.get("volumeMounts", [])}
        assert mounts <= {v["name"] for v in spec.get("volumes", [])}


def test_the_datasource_service_reaches_its_pods_and_probes_the_health_endpoint() -> None:
    (service,) = BY_KIND["Service"]
    (deployment,) = [d for d in BY_KIND["Deployment"] if d["metadata"]["name"] == service[
        "metadata"]["name"]]  # fmt: skip
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in ports
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["port"] in ports
    assert {e["name"] for e in container["env"]} == set(SECRET_KEYS)


def probe_paths() -> dict[str, str]:
    (deployment,) = [d for d in BY_KIND["Deployment"] if "datasource" in d["metadata"]["name"]]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {p: container[p]["httpGet"]["path"] for p in ("readinessProbe", "livenessProbe")}


@pytest.mark.slow
def test_the_probes_tell_a_ready_datasource_from_one_without_redis(redis_url: str) -> None:
    paths = probe_paths()
    ready, alive = paths["readinessProbe"], paths["livenessProbe"]
    with serving(create_app(Settings(redis_url=redis_url, token="t0k"))) as port:
        assert httpx.get(f"http://127.0.0.1:{port}{ready}", timeout=10).status_code == 200
        assert httpx.get(f"http://127.0.0.1:{port}{alive}", timeout=10).status_code == 200
    dead = f"redis://127.0.0.1:{free_port()}/0"
    with serving(create_app(Settings(redis_url=dead, token="t0k", socket_timeout=2.0))) as port:
        assert httpx.get(f"http://127.0.0.1:{port}{ready}", timeout=10).status_code == 503
        assert httpx.get(f"http://127.0.0.1:{port}{alive}", timeout=10).status_code == 200


# .dockerignore, read as Docker reads it: the last pattern that matches a path or one of its
# parent directories decides; "!" admits again; "**" spans directories.
def ignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    patterns = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        admit = line.startswith("!")
        glob = line.lstrip("!").strip("/")
        regex = ""
        for part in re.split(r"(\*\*/|\*\*|\*|\?)", glob):
            regex += {"**/": "(.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(
                part, re.escape(part)
            )
        patterns.append((admit, re.compile(regex)))
    return patterns


IGNORE = ignore_patterns()


def in_context(path: str) -> bool:
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    admitted = True
    for admit, pattern in IGNORE:
        if any(pattern.fullmatch(prefix) for prefix in prefixes):
            admitted = admit
    return admitted


def test_the_build_context_leaves_out_the_venv_git_caches_and_build_output() -> None:
    for path in (".venv/bin/python", ".git/HEAD", "dist/slicecount-0.1.0.tar.gz",
                 "build/lib/slicecount/__init__.py", ".mypy_cache/3.10/x.json",
                 ".pytest_cache/v/cache", ".ruff_cache/x", ".coverage", ".hypothesis/x",
                 "tests/conftest.py", "src/slicecount/__pycache__/keys.cpython-312.pyc",
                 "src/slicecount/promql/__pycache__/ast.cpython-312.pyc"):  # fmt: skip
        assert not in_context(path), path
    admitted = ["pyproject.toml", "README.md", "LICENSE", "src/slicecount/__init__.py",
                "src/slicecount/store/lua/trim.lua",
                "src/slicecount/datasource/ui/main.js"]  # fmt: skip
    for path in admitted:
        assert (ROOT / path).is_file() and in_context(path), path


def copy_lines(stage: str) -> list[list[str]]:
    return [shlex.split(line)[1:] for line in stage.splitlines() if line.startswith("COPY ")]


def stages() -> list[str]:
    return re.split(r"^(?=FROM )", DOCKERFILE, flags=re.M)[1:]


def test_the_runtime_stage_installs_the_wheel_with_its_extras_only() -> None:
    build, runtime = stages()
    assert build.startswith("FROM python:") and " AS wheel" in build.splitlines()[0]
    assert runtime.startswith("FROM python:") and "slim" in runtime.splitlines()[0]
    assert copy_lines(runtime) == [["--from=wheel", "/wheels", "/wheels"]]  # no sources
    install = next(line for line in runtime.splitlines() if line.startswith("RUN "))
    assert 'pip install "$(echo /wheels/slicecount-*.whl)[${EXTRAS}]"' in install
    for extra in ("datasource", "cli"):  # the CMD, the cleaner
        assert installs(dockerfile_extras(), extra)
    assert not installs(dockerfile_extras(), "flask")


@pytest.mark.slow
def test_the_build_stage_makes_the_wheel_from_what_the_context_admits(tmp_path: Path) -> None:
    context, workdir = tmp_path / "context", tmp_path / "stage"
    for folder, dirs, files in os.walk(ROOT):
        here = Path(folder).relative_to(ROOT).as_posix()
        dirs[:] = [d for d in dirs if d not in (".venv", ".git")]  # both excluded, tested above
        for file in files:
            path = file if here == "." else f"{here}/{file}"
            if in_context(path):
                (context / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / path, context / path)
    build = stages()[0]
    assert re.search(r"^WORKDIR /src$", build, re.M)
    for *sources, target in copy_lines(build):
        destination = workdir / target
        for source in sources:
            assert (context / source).exists(), f"COPY {source}: not in the build context"
            if (context / source).is_dir():
                shutil.copytree(context / source, destination)
            else:
                destination.mkdir(parents=True, exist_ok=True)
                shutil.copy2(context / source, destination / source)
    run = next(line for line in build.splitlines() if line.startswith("RUN "))
    command = shlex.split(run[4:])
    assert command[:2] == ["pip", "wheel"]
    wheels = tmp_path / "wheels"
    argv = [
        sys.executable,
        "-m",
        "pip",
        *[str(wheels) if a == "/wheels" else a for a in command[1:]],
    ]
    result = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (wheel,) = wheels.iterdir()
    assert re.fullmatch(r"slicecount-[^-]+-py3-none-any\.whl", wheel.name), wheel.name
