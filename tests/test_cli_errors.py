"""What every command says when Redis cannot be reached: one line naming the failure, exit
status 1 (never a usage message, never a traceback); and ``slicecount --version``."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest
from click.testing import CliRunner

from slicecount.cli import main
from slicecount.embedded import free_port

COMMANDS = {
    "show": ["show", "http.requests"],
    "annotate": ["annotate", "deployed"],
    "reshard": ["reshard", "--from", "2"],
    "cleaner --once": ["cleaner", "--once"],
}


def unreachable(kind: str, tmp_path: Path) -> tuple[str, str]:
    """A Redis URL nothing answers at, and what the message must name."""
    port = free_port()  # nothing listens there
    if kind == "unix":
        return f"unix://{tmp_path}/no.sock", "no.sock"
    if kind == "cluster":
        return f"redis+cluster://127.0.0.1:{port}", f"127.0.0.1:{port}"
    return f"redis://127.0.0.1:{port}/0", f"127.0.0.1:{port}"


@pytest.mark.parametrize("kind", ["tcp", "unix", "cluster"])
@pytest.mark.parametrize("command", COMMANDS)
def test_redis_unreachable_is_one_line_and_status_1(
    command: str, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, named = unreachable(kind, tmp_path)
    monkeypatch.setenv("SLICECOUNT_REDIS_URL", url)
    result = CliRunner().invoke(main, COMMANDS[command])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # not an exception let out
    (line,) = result.output.splitlines()
    assert line.startswith("error: redis at ")
    assert named in line
    assert "Usage" not in result.output


def test_a_bad_option_is_still_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["show", "x", "--since", "soon"])
    assert result.exit_code == 2
    assert "invalid duration 'soon'" in result.output


def test_a_bad_layout_is_a_usage_error_naming_it() -> None:
    result = CliRunner().invoke(main, ["show", "x", "--layout", "flat"])
    assert result.exit_code == 2
    assert "layout must be one of book, blocks, got 'flat'" in result.output


def test_version_comes_from_the_package_metadata() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"slicecount {version('slicecount')}\n"
