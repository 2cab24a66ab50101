"""The benchmarks that measure the book's layout beside the blocks layout name it: since the
default layout became ``blocks``, one that took the default measured the blocks layout twice
(bench_compaction) or cleaned the book's keys with a blocks store (bench_cleaner, which then
failed). Tiny runs, end to end; timings are printed, never asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent.parent / "benchmarks"
MARK = "slicecount-bench:"  # benchmarks/figures.py JSON_MARK

pytestmark = pytest.mark.slow


def run(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(HERE / script), *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_the_cleaner_benchmark_cleans_the_books_keys_with_a_store_of_the_books_layout() -> None:
    out = run("bench_cleaner.py", "--names", "200", "--json")
    line = next(line for line in out.splitlines() if line.startswith(MARK))
    figures = {f["key"]: f["value"] for f in json.loads(line[len(MARK) :])["figures"]}
    assert figures["cold_vs_book"] > 0 and figures["steady_vs_book"] > 0
    # every precision of the book's ladder trimmed to its 120 slices, as the book's cleaner does
    assert out.count("fields left in bench.m7 per precision: [60, 108, 119, 120, 120, 120, 120]")


def test_the_compaction_benchmark_writes_the_books_keys_on_its_book_side() -> None:
    out = run("bench_compaction.py", "--routes", "2", "--minutes", "5")
    kinds = {
        line.split(":", 1)[0]: line.split(":", 2)[2]
        for line in out.splitlines()
        if "bytes by key kind" in line
    }
    assert "count" in kinds["book"] and "block" not in kinds["book"], kinds
    assert "block" in kinds["blocks"] and "count" not in kinds["blocks"], kinds
