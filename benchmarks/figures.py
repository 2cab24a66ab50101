"""What a benchmark measured, printed as one JSON line with ``--json`` (``compare.py`` reads it).

The benchmarks run against other revisions' ``src/`` too (``compare.py --before REV``), so they
import only slicecount's public API: ``Recorder``, ``Store``, ``AsyncStore``, ``create_app``,
the middleware classes, ``Cleaner`` and ``slicecount.embedded``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from typing import Literal

JSON_MARK = "slicecount-bench:"
"""Prefix of the JSON line, so that nothing else printed to stdout is mistaken for it."""


@dataclass(frozen=True)
class Figure:
    """One measured value; ``key`` is stable across sizes, ``label`` says what was measured."""

    key: str
    label: str
    value: float | None  # None: not measurable in this run (below the noise floor...)
    unit: str
    better: Literal["higher", "lower"]


def json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help=f"print one machine-readable line ({JSON_MARK} ...)"
    )


def emit(benchmark: str, figures: list[Figure]) -> None:
    """The JSON line, naming the slicecount tree it measured (compare.py checks it)."""
    import slicecount  # here, not at the top: compare.py imports this module for JSON_MARK

    record = {
        "benchmark": benchmark,
        "slicecount": slicecount.__file__,
        "figures": [asdict(figure) for figure in figures],
    }
    print(JSON_MARK + json.dumps(record), flush=True)
