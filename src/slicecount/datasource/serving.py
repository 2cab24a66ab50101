"""How ``slicecount datasource`` runs under uvicorn: in this process, or in worker processes
that build the app from the settings and limits the command resolved (its options, then the
``SLICECOUNT_*`` environment), never from the environment a worker happens to inherit.

uvicorn starts several workers only from an import string, so the resolved settings travel in
a file readable by this user alone (mode 0600, removed when the server stops) whose path is
in ``RESOLVED_VARIABLE``: the token is on no command line and in no process's environment.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, fields
from typing import Any

from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.datasource.app import create_app
from slicecount.errors import ConfigurationError, extra_imports

with extra_imports("datasource", "the datasource"):
    from starlette.applications import Starlette

RESOLVED_VARIABLE = "_SLICECOUNT_DATASOURCE_RESOLVED"
"""The path of the resolved settings' file, for the workers of this command only."""
FACTORY = "slicecount.datasource.serving:from_resolved"
SWITCH_INTERVAL = 0.001
"""How often (s) a thread computing a heavy answer hands the interpreter lock to the event
loop, in the processes this command owns (Python's default: 0.005). While four heavy requests
ran, ``GET /`` took up to 70-170 ms at 5 ms, 30-55 ms at 1 ms, for the same throughput."""


def settings_as_json(settings: Settings) -> dict[str, Any]:
    """Every init field of ``settings`` as JSON values that ``Settings(**...)`` reads back."""
    values: dict[str, Any] = {}
    for field in fields(Settings):
        if not field.init:
            continue
        value = getattr(settings, field.name)
        if isinstance(value, Mapping):
            value = {str(key): kept for key, kept in value.items()}
        elif isinstance(value, tuple):
            value = list(value)
        values[field.name] = value
    return values


@contextmanager
def resolved_file(settings: Settings, limits: Limits) -> Iterator[str]:
    """A private file holding ``settings`` and ``limits``, removed when the block ends."""
    handle, path = tempfile.mkstemp(prefix="slicecount-datasource-", suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:  # mkstemp's mode: 0600
            json.dump({"settings": settings_as_json(settings), "limits": asdict(limits)}, file)
        yield path
    finally:
        os.unlink(path)


def from_resolved() -> Starlette:
    """The factory each worker of ``slicecount datasource --workers N`` calls."""
    path = os.environ.get(RESOLVED_VARIABLE)
    if not path:
        raise ConfigurationError(
            f"{RESOLVED_VARIABLE} is not set: {FACTORY} serves the workers of "
            "`slicecount datasource --workers N`; use slicecount.datasource.app:from_env"
        )
    with open(path, encoding="utf-8") as file:
        resolved = json.load(file)
    sys.setswitchinterval(SWITCH_INTERVAL)
    return create_app(Settings(**resolved["settings"]), limits=Limits(**resolved["limits"]))


def serve(settings: Settings, limits: Limits, host: str, port: int, workers: int) -> None:
    """Serve until stopped: this process alone, or ``workers`` processes on one socket."""
    import uvicorn

    if workers <= 1:
        sys.setswitchinterval(SWITCH_INTERVAL)
        app = create_app(settings, limits=limits)
        uvicorn.run(app, host=host, port=port, log_level="warning")
        return
    with resolved_file(settings, limits) as path:
        os.environ[RESOLVED_VARIABLE] = path  # the path only: the workers inherit it
        try:
            uvicorn.run(
                FACTORY,
                factory=True,
                host=host,
                port=port,
                workers=workers,
                log_level="warning",
                env_file=None,
            )
        finally:
            del os.environ[RESOLVED_VARIABLE]
