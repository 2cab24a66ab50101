from __future__ import annotations

from slicecount.cleaner.schedule import (
    Due,
    annotation_cutoff,
    due_precisions,
    pass_index,
    pass_start,
    plan_pass,
    plan_trim,
    sealed_point,
    sweep_due,
)
from slicecount.config import Settings
from slicecount.operations.compacting import SEAL_GRACE, WRITER_LIVE

SETTINGS = Settings(layout="book")
"""The book's trims and sweeps (the blocks layout compacts every shard each pass instead)."""


def test_the_books_schedule() -> None:
    due = {i: due_precisions(SETTINGS, i, 60) for i in range(0, 3601)}
    assert all(set(due[i]) >= {1, 5, 60} for i in due)
    assert [i for i in range(20) if 300 in due[i]] == [0, 5, 10, 15]
    assert [i for i in due if 3600 in due[i]] == [0, 60, 120, 180, 240, 300, 360, 420, 480, 540,
                                                  600, 660, 720, 780, 840, 900, 960, 1020, 1080,
                                                  1140, 1200, 1260, 1320, 1380, 1440, 1500, 1560,
                                                  1620, 1680, 1740, 1800, 1860, 1920, 1980, 2040,
                                                  2100, 2160, 2220, 2280, 2340, 2400, 2460, 2520,
                                                  2580, 2640, 2700, 2760, 2820, 2880, 2940, 3000,
                                                  3060, 3120, 3180, 3240, 3300, 3360, 3420, 3480,
                                                  3540, 3600]  # fmt: skip
    assert due_precisions(SETTINGS, 7, 60, every=True) == list(SETTINGS.precisions)
    assert due_precisions(SETTINGS, 10, 1) == [1, 5]  # 1 s interval: p due every p passes
    assert due_precisions(SETTINGS, 300, 1) == [1, 5, 60, 300]
    assert pass_index(1_700_000_039.9, 60) == 28_333_333


def test_trim_modes() -> None:
    now = 1_700_000_000
    cutoff = now - now % 60 - 119 * 60
    assert plan_trim(SETTINGS, 60, now, None, sweep=False).mode == "cold"  # type: ignore[union-attr]
    assert plan_trim(SETTINGS, 60, now, cutoff, sweep=False) is None  # nothing expired
    inc = plan_trim(SETTINGS, 60, now, cutoff - 120, sweep=False)
    assert inc is not None and (inc.mode, inc.first, inc.cutoff) == (
        "incremental",
        cutoff - 120,
        cutoff,
    )
    assert plan_trim(SETTINGS, 60, now, cutoff - 120, sweep=True).mode == "full"  # type: ignore[union-attr]
    assert plan_trim(SETTINGS, 60, now, cutoff + 60, sweep=False).mode == "cold"  # type: ignore[union-attr]  # clock went back
    assert plan_trim(SETTINGS, 60, now, cutoff - 200 * 60, sweep=False).mode == "cold"  # type: ignore[union-attr]  # long gap
    assert plan_trim(SETTINGS, 60, now, None, sweep=True).mode == "full"  # type: ignore[union-attr]


def test_annotations_live_as_long_as_the_longest_retention() -> None:
    assert annotation_cutoff(SETTINGS, 1_000_000_000) == 1_000_000_000 - 120 * 86400
    assert annotation_cutoff(Settings(), 1_000_000_000) == 1_000_000_000 - 1830 * 86400


def test_the_horizon_follows_the_writers_clock_not_a_pinned_one() -> None:
    settings = Settings(precisions=(60,), max_future=300, layout="book")
    pinned, today = 1_700_000_000, 1_700_086_400
    trim = plan_trim(settings, 60, pinned, None, True, writers_now=today)
    assert trim is not None and trim.horizon == today + 300 - (today + 300) % 60
    assert plan_trim(settings, 60, pinned, None, True).horizon < today  # type: ignore[union-attr]


def test_a_sweep_is_due_a_period_after_the_last_or_when_none_is_on_record() -> None:
    start = 1_700_001_200
    assert sweep_due(60, None, start, 3600)
    assert sweep_due(60, start - 3600, start, 3600)
    assert not sweep_due(60, start - 3540, start, 3600)
    assert not sweep_due(86400, start - 3600, start, 3600)  # day slices: once a day
    assert sweep_due(86400, start - 86400, start, 3600)
    assert not sweep_due(60, start + 60, start, 3600)  # a racer's pass a minute ahead
    assert sweep_due(60, start + 3601, start, 3600)  # the clock went back: as none


def test_a_pass_trims_the_scheduled_precisions_and_those_with_a_sweep_due() -> None:
    index = 28_333_353  # 20 minutes past an hour: 1, 5 and 60 s are scheduled
    start = pass_start(index, 60)
    recent = dict.fromkeys(SETTINGS.precisions, start - 60)
    assert plan_pass(SETTINGS, index, 60, False, recent, 3600) == [
        Due(1, True, False), Due(5, True, False), Due(60, True, False),
    ]  # fmt: skip
    overdue = recent | {1: start - 3600, 86400: start - 86400}
    assert plan_pass(SETTINGS, index, 60, False, overdue, 3600) == [
        Due(1, True, True), Due(5, True, False), Due(60, True, False), Due(86400, False, True),
    ]  # fmt: skip
    assert [d.sweep for d in plan_pass(SETTINGS, index, 60, True, {}, 3600)] == [True] * 7


def test_the_sealed_point_waits_for_the_oldest_mark_of_a_live_writer() -> None:
    now = 1_700_000_007.5
    # nobody writes with a writer id: the grace alone, floored to the finest slice
    assert sealed_point(now, 1, {}, {}) == 1_700_000_007 - SEAL_GRACE
    assert sealed_point(now, 5, {}, {}) == 1_699_999_995
    live = {"a": now - 1, "b": now - WRITER_LIVE, "quiet": now - WRITER_LIVE - 1}
    # a live writer's mark holds sealing back (its outbox still holds second 1_699_999_900)
    marks = {"a": 1_699_999_990.0, "b": 1_699_999_900.0}
    assert sealed_point(now, 1, marks, live) == 1_699_999_900
    assert sealed_point(now, 60, marks, live) == 1_699_999_860
    # a writer quiet past WRITER_LIVE holds nothing back, nor a mark with no writer
    assert sealed_point(now, 1, {"quiet": 1_600_000_000, "gone": 1_500_000_000}, live) == (
        1_699_999_997
    )
    # a mark ahead of the grace changes nothing
    assert sealed_point(now, 1, {"a": now + 100}, live) == 1_699_999_997
