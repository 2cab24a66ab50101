from __future__ import annotations

import re

from click.testing import CliRunner

from slicecount.cli import main


def test_demo_reads_back_every_event_at_every_precision() -> None:
    result = CliRunner().invoke(main, ["demo", "--seconds", "60", "--rate", "50", "--seed", "7"])
    assert result.exit_code == 0, result.output
    recorded = int(re.search(r"recorded (\d+) requests", result.output).group(1))  # type: ignore[union-attr]
    sums = [
        int(s)
        for s in re.findall(r"precision +\d+ s: \d+ series, \d+ slices, sum (\d+)", result.output)
    ]
    assert len(sums) == 7
    assert sums == [recorded] * 7
    assert "precision      1 s: 6 series, 60 slices" in result.output
