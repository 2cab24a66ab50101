"""The running demo's state file: ``slicecount show`` (and every command given no Redis URL)
reads the demo's Redis while the demo runs, and only then."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from slicecount.cli import main
from slicecount.demo import state as demo_state
from slicecount.demo.state import DemoState
from slicecount.embedded import EmbeddedRedis
from slicecount.store import Store


@pytest.fixture(autouse=True)
def runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv("SLICECOUNT_REDIS_URL", raising=False)
    return tmp_path / "slicecount"


def state(url: str, pid: int | None = None) -> DemoState:
    return DemoState(pid or os.getpid(), url, "http://127.0.0.1:8080/", "/tmp/logs")


def gone_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_published_while_running_withdrawn_after(runtime_dir: Path) -> None:
    assert demo_state.running() is None
    path = demo_state.publish(state("redis://127.0.0.1:7001/0"))
    assert path.parent == runtime_dir
    assert runtime_dir.stat().st_mode & 0o777 == 0o700
    assert demo_state.running() == state("redis://127.0.0.1:7001/0")
    demo_state.withdraw(path)
    assert demo_state.running() is None


def test_a_killed_demos_file_is_ignored_and_removed(runtime_dir: Path) -> None:
    path = demo_state.publish(state("redis://127.0.0.1:7001/0", pid=gone_pid()))
    assert demo_state.running() is None
    assert not path.exists()


def test_the_newest_running_demo_wins(runtime_dir: Path) -> None:
    older = demo_state.publish(state("redis://127.0.0.1:7001/0", pid=os.getppid()))
    demo_state.publish(state("redis://127.0.0.1:7002/0"))
    os.utime(older, (time.time() - 60, time.time() - 60))
    running = demo_state.running()
    assert running is not None and running.redis_url == "redis://127.0.0.1:7002/0"


def test_a_directory_others_can_write_is_not_trusted(runtime_dir: Path) -> None:
    demo_state.publish(state("redis://127.0.0.1:7001/0"))
    runtime_dir.chmod(0o777)
    assert demo_state.running() is None


def test_show_reads_the_running_demos_redis(
    redis_server: EmbeddedRedis, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.incr("demo.hits", 4)
    path = demo_state.publish(state(redis_server.url))
    shown = CliRunner().invoke(main, ["show", "demo.hits", "--precision", "86400", "--json"])
    assert shown.exit_code == 0, shown.output
    assert f"reading the running demo's redis {redis_server.url}" in shown.stderr
    assert '"total": 4' in shown.stdout
    # a URL given says where, demo or not
    monkeypatch.setenv("SLICECOUNT_REDIS_URL", "redis://127.0.0.1:1/0")
    elsewhere = CliRunner().invoke(main, ["show", "demo.hits"])
    assert elsewhere.exit_code == 1 and "127.0.0.1:1" in elsewhere.output
    assert "demo" not in elsewhere.output
    demo_state.withdraw(path)
