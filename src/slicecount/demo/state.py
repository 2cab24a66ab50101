"""Where a running ``slicecount demo`` says which Redis it uses, so that ``slicecount show``
(and every command given no ``--redis-url`` nor ``SLICECOUNT_REDIS_URL``) reads the demo's
data. One small JSON file per demo in a directory only this user can write:
``$XDG_RUNTIME_DIR/slicecount/`` or ``<tempdir>/slicecount-<uid>/``; removed when the demo
stops, ignored (and removed) once its process is gone."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class DemoState:
    """What a running demo publishes about itself."""

    pid: int
    redis_url: str
    datasource: str
    logs: str


def state_dir() -> Path:
    """The per-user directory of the state files."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "slicecount"
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"slicecount-{uid}"


def _private(directory: Path) -> bool:
    """True if ``directory`` is ours and no one else can write in it: in a shared temporary
    directory another user could otherwise plant a state file pointing at their Redis."""
    try:
        info = directory.lstat()
    except OSError:
        return False
    mine = not hasattr(os, "getuid") or info.st_uid == os.getuid()
    return stat.S_ISDIR(info.st_mode) and mine and not info.st_mode & 0o022


def publish(state: DemoState) -> Path:
    """Write the state file of the demo ``state.pid``; returns its path (for ``withdraw``)."""
    directory = state_dir()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / f"demo-{state.pid}.json"
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(asdict(state)))
    partial.replace(path)  # readers never see half a file
    return path


def withdraw(path: Path) -> None:
    """Remove a state file ``publish`` wrote."""
    path.unlink(missing_ok=True)


def running() -> DemoState | None:
    """The most recently started demo still running, if any."""
    directory = state_dir()
    if not _private(directory):
        return None
    found: list[tuple[float, DemoState]] = []
    for path in directory.glob("demo-*.json"):
        try:
            state = DemoState(**json.loads(path.read_text()))
            started = path.stat().st_mtime
        except (OSError, ValueError, TypeError):
            continue
        if not isinstance(state.pid, int) or state.pid <= 0 or not isinstance(state.redis_url, str):
            continue
        if _alive(state.pid):
            found.append((started, state))
        else:  # the demo was killed before it could remove its file
            path.unlink(missing_ok=True)
    return max(found, key=lambda item: item[0])[1] if found else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user took the pid over
        return False
    return True
