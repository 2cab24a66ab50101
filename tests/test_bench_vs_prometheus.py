"""benchmarks/bench_vs_prometheus.py runs end to end on a tiny app: both servers start on the
same seeded traffic and every figure of both is measured. Timings are printed, never asserted."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_vs_prometheus.py"
MARK = "slicecount-bench:"  # benchmarks/figures.py JSON_MARK

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("prometheus") is None or shutil.which("promtool") is None,
        reason="prometheus/promtool are not installed (apt-get install prometheus)",
    ),
]


@pytest.mark.parametrize("layout", ["book", "blocks"])
def test_quick_run_measures_both_servers(layout: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--routes", "5", "--repeats", "2", "--json",
         "--layout", layout],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "slicecount" in done.stdout and "Prometheus" in done.stdout
    line = next(line for line in done.stdout.splitlines() if line.startswith(MARK))
    figures = {f["key"]: f["value"] for f in json.loads(line[len(MARK) :])["figures"]}
    for refresh in ("5minutes", "1hour", "24hours"):
        for server in ("slicecount", "prometheus"):
            for q in ("p50", "p99"):
                value = figures[f"r5.{refresh}.{server}.{q}"]
                assert value is not None and value > 0, (refresh, server, q)
        assert figures[f"r5.{refresh}.slicecount.refused"] == 0
    assert figures["r5.bytes.slicecount"] > 0 and figures["r5.bytes.prometheus"] > 0
    assert figures["r5.longest_read"] >= 0  # SLOWLOG watched (0: no call over 0.5 ms)
    # The backfill holds every series the traffic made, and the truth lines up with the
    # counts: slicecount's points on minute boundaries (a 60 s slice each) are exact.
    assert figures["r5.series_now.prometheus"] == figures["r5.series_true"] > 0
    assert figures["r5.exact.slicecount"] >= 60


def test_a_live_run_times_both_servers_while_the_app_and_the_cleaner_run() -> None:
    """``--live`` on a tiny app: the live app counts and exposes each second, the cleaner
    daemon runs, Prometheus scrapes the app (the run stops when it does not), and every
    refresh and the viewers are timed on both servers."""
    done = subprocess.run(
        [sys.executable, str(BENCH), "--live", "--quick", "--routes", "5", "--history", "900",
         "--repeats", "2", "--warmup", "5", "--watch", "6", "--json"],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith(MARK))
    figures = {f["key"]: f["value"] for f in json.loads(line[len(MARK) :])["figures"]}
    for refresh in ("5minutes", "1hour", "24hours"):
        for server in ("slicecount", "prometheus"):
            assert figures[f"r5.{refresh}.{server}.p99"] > 0, (refresh, server)
        assert figures[f"r5.{refresh}.slicecount.refused"] == 0
    assert figures["r5.viewers.ratio.p99"] > 0
    assert figures["r5.bytes.slicecount"] > 0 and figures["r5.bytes.prometheus"] > 0
