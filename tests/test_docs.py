"""The README is a front door that works: its quickstart code runs as written against a real
Redis and counts what it says; it stays short; its links resolve. The reference pages are
generated from the code (``tools/docs_reference.py``) and current."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import click
import pytest
from starlette.testclient import TestClient

import slicecount
from slicecount.cli import main
from slicecount.config import ENV_PREFIX, Settings
from slicecount.config.request_limits import Limits
from slicecount.store import Store
from tests.test_default import clean_default

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
sys.path.insert(0, str(ROOT / "tools"))

import docs_reference  # noqa: E402  (tools/ is not a package: it runs as scripts and hooks)

__all__ = ["clean_default"]  # the fixture, used by name below


def python_block(marker: str) -> str:
    """The one ```python block of the README that contains ``marker``."""
    blocks: list[str] = re.findall(r"```python\n(.*?)```", README, re.DOTALL)
    (block,) = [block for block in blocks if marker in block]
    return block


def run_block(marker: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "readme_quickstart"}
    exec(compile(python_block(marker), f"README.md ({marker})", "exec"), namespace)
    return namespace


def requests_of(store: Store, route: str) -> int:
    labels = {"method": "GET", "route": route, "status": "200"}
    return sum(count for _, count in store.get("http.requests", 60, labels))


@pytest.fixture
def default_recorder(clean_default: None, store: Store) -> Iterator[None]:
    """The process-wide Recorder the quickstart's middleware uses, writing to the test Redis."""
    slicecount.configure(store.settings)
    yield


def test_readme_is_short_and_starts_with_the_quickstart() -> None:
    lines = README.splitlines()
    assert len(lines) <= 250
    first = "\n".join(lines[:60])
    assert 'pip install "slicecount[flask]"' in first
    assert 'pip install "slicecount[starlette]"' in first
    for framework in ("slicecount.middleware.flask", "FastAPI()", "Starlette(routes="):
        assert framework in first, framework
    assert "slicecount datasource" in first and "slicecount show" in first
    assert lines[0] == "# slicecount" and not lines[2].startswith("make ")


def test_readme_links_resolve() -> None:
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [target for target in targets if "://" not in target]
    assert "docs/getting-started.md" in local and "CONTRIBUTING.md" in local
    missing = [target for target in local if not (ROOT / target).exists()]
    assert missing == []


def test_flask_quickstart_counts_a_request(default_recorder: None, store: Store) -> None:
    app = run_block("slicecount.middleware.flask")["app"]
    client = app.test_client()
    # buffered: the body is read and closed, as a WSGI server does (the count lands then)
    assert client.get("/hello/ann", buffered=True).get_data(as_text=True) == "hello ann"
    assert client.get("/hello/bob", buffered=True).status_code == 200
    assert slicecount.get_recorder().flush()
    assert requests_of(store, "/hello/<name>") == 2
    durations = store.series("http.request.duration.bucket", 60)
    assert durations and all('route="/hello/<name>"' in series for series in durations)


def test_starlette_quickstart_counts_and_flushes_at_shutdown(
    default_recorder: None, store: Store
) -> None:
    app = run_block("Starlette(routes=")["app"]
    with TestClient(app) as client:
        assert client.get("/hello/ann").text == "hello ann"
    # no flush() here: the lifespan shutdown of the TestClient's exit wrote the count
    assert requests_of(store, "/hello/{name}") == 1


def test_fastapi_quickstart_counts_route_templates(default_recorder: None, store: Store) -> None:
    pytest.importorskip("fastapi", reason="the FastAPI quickstart needs fastapi installed")
    app = run_block("FastAPI()")["app"]
    with TestClient(app) as client:
        assert client.get("/hello/ann").json() == "hello ann"
        assert client.get("/hello/bob").status_code == 200
    assert requests_of(store, "/hello/{name}") == 2


def test_django_quickstart_names_the_middleware_and_good_settings() -> None:
    """The settings block, run after a ``startproject`` MIDDLEWARE: the middleware first, and
    every SLICECOUNT key one the middleware takes (the site's behaviour: test_django.py)."""
    pytest.importorskip("django")
    from django.utils.module_loading import import_string

    from slicecount.middleware.django import SliceCountMiddleware
    from slicecount.middleware.shell import Options

    started = ["django.middleware.security.SecurityMiddleware"]
    namespace: dict[str, Any] = {"MIDDLEWARE": started}
    exec(compile(python_block("MIDDLEWARE"), "README.md (Django)", "exec"), namespace)
    assert namespace["MIDDLEWARE"][1:] == started
    assert import_string(namespace["MIDDLEWARE"][0]) is SliceCountMiddleware
    settings = {f.name for f in fields(Settings)}
    assert set(namespace["SLICECOUNT"]) <= settings | Options.__optional_keys__


@pytest.mark.slow
def test_reference_pages_are_generated_from_the_current_code() -> None:
    assert docs_reference.stale_pages() == [], "run `make docs`"
    configuration = docs_reference.configuration_page()
    for field in [f for f in fields(Settings) if f.init] + list(fields(Limits)):
        assert f"| `{field.name}` | `{ENV_PREFIX}{field.name.upper()}` |" in configuration
    cli_page = docs_reference.cli_page()
    ctx = click.Context(main)
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        assert command is not None
        assert f"## slicecount {name}" in cli_page
        section = cli_page.split(f"## slicecount {name}\n")[1].split("\n## ")[0]
        options = [p for p in command.params if isinstance(p, click.Option)]
        assert options and all(f"`{p.opts[0]}`" in section for p in options)


def test_a_setting_without_a_docstring_stops_the_generator() -> None:
    @dataclass(frozen=True)
    class Undocumented:
        documented: int = 1
        """Said once."""
        silent: int = 2

    documented, silent = fields(Undocumented)
    assert docs_reference.describe(Undocumented, documented, {}) == "Said once."
    with pytest.raises(SystemExit, match=r"Undocumented\.silent has no docstring"):
        docs_reference.describe(Undocumented, silent, {})
