"""The ``slicecount`` console script: the command line, or, where click is not installed, one
line naming the extra that brings it instead of a traceback."""

from __future__ import annotations

import sys

from slicecount.errors import MissingExtra


def main(args: list[str] | None = None, prog_name: str | None = None) -> None:
    try:
        from slicecount.cli import main as cli
    except MissingExtra as exc:
        sys.exit(f"error: {exc}")
    cli(args, prog_name=prog_name)
