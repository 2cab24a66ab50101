"""The benchmarks' seeded traffic cut into a history and its live part, shifted in time and
exposed as a client library does: pure, no server."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from seeded_traffic import exposition, generate, openmetrics, scrape_times

END = 1_800_000_000


def test_a_shifted_traffic_is_the_one_generated_for_that_end() -> None:
    assert (
        generate(4, END, 600, 7).shifted(END + 3600).counts
        == generate(4, END + 3600, 600, 7).counts
    )


def test_the_history_and_the_live_seconds_hold_every_count_once() -> None:
    traffic = generate(4, END, 1200, 7)
    cut = END - 500
    past, live = traffic.until(cut), traffic.by_second(cut)
    assert past.end == cut and past.start == traffic.start
    assert all(t < cut for seconds in past.counts.values() for t in seconds)
    assert all(t >= cut for t in live)
    totals = dict(past.totals())
    for entries in live.values():
        for series, n in entries:
            totals[series] = totals.get(series, 0) + n
    assert totals == traffic.totals()
    assert past.events == past.requests_in(None, past.start, cut)


def test_the_exposition_is_the_last_scrape_of_the_backfill() -> None:
    """``/metrics`` of the live app at the history's end shows what the backfill's last
    scrape holds: same names, labels and values, the scrape's time aside."""
    traffic = generate(4, END, 900, 7)
    scrapes = scrape_times(traffic, 0)
    last = scrapes[-1]
    lines = [line for line in openmetrics(traffic, scrapes) if not line.startswith("#")]
    backfilled = {
        line.rsplit(" ", 2)[0]: float(line.rsplit(" ", 2)[1])
        for line in lines
        if line.rstrip().endswith(f" {last}")
    }
    shown = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in exposition(traffic.until(last).totals()).splitlines()
        if line and not line.startswith("#")
    }
    assert shown == backfilled
