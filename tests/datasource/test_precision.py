from __future__ import annotations

from slicecount.config import Settings
from slicecount.datasource.precision import choose_precision

NOW = 1_700_000_000.0
SETTINGS = Settings()  # 120 slices each: 1 s covers 2 min, 60 s 2 h, 3600 s 5 days


def test_finest_precision_that_covers_the_range_and_meets_the_interval() -> None:
    assert choose_precision(SETTINGS, NOW - 60, NOW, NOW) == 1
    assert choose_precision(SETTINGS, NOW - 3600, NOW, NOW) == 60
    assert choose_precision(SETTINGS, NOW - 3600, NOW, NOW, interval_ms=10_000) == 60
    assert choose_precision(SETTINGS, NOW - 60, NOW, NOW, interval_ms=2000) == 5
    assert choose_precision(SETTINGS, NOW - 60, NOW, NOW, max_points=10) == 60
    assert choose_precision(SETTINGS, NOW - 2 * 86400, NOW, NOW) == 3600


def test_closest_covering_when_none_is_coarse_enough_then_coarsest() -> None:
    # 600 s slices wanted: every precision covers a 60 s range, the first >= 600 s is 3600
    assert choose_precision(SETTINGS, NOW - 60, NOW, NOW, interval_ms=600_000) == 3600
    assert choose_precision(SETTINGS, NOW - 400 * 86400, NOW, NOW) == 86400


def test_a_precision_covers_a_range_that_starts_at_its_oldest_kept_slice() -> None:
    oldest_60 = 1_699_999_980 - 119 * 60  # the current 60 s slice and the 119 before it
    assert choose_precision(SETTINGS, oldest_60, NOW, NOW) == 60
    assert choose_precision(SETTINGS, oldest_60 - 1, NOW, NOW) == 300


def test_retention_is_read_per_precision() -> None:
    longer = Settings(retention={60: 1440})  # a day at 60 s
    assert choose_precision(SETTINGS, NOW - 20 * 3600, NOW, NOW) == 3600
    assert choose_precision(longer, NOW - 20 * 3600, NOW, NOW) == 60
