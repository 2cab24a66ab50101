"""``slicecount show``: a metric's recent counts as a terminal table with sparklines. Pure
formatting over what the Store reads."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from slicecount.core.series import parse
from slicecount.core.slices import slice_starts
from slicecount.errors import ConfigurationError
from slicecount.store import Store

BARS = "▁▂▃▄▅▆▇█"
_SPAN = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)\Z")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_span(text: str) -> float:
    """``"90"``, ``"10m"``, ``"2h"``, ``"1d"`` -> seconds."""
    match = _SPAN.match(text.strip())
    if match is None or float(match.group(1)) <= 0:
        raise ConfigurationError(f"invalid duration {text!r}: expected e.g. 30s, 10m, 2h, 1d")
    return float(match.group(1)) * _UNITS[match.group(2)]


def sparkline(values: Sequence[int]) -> str:
    top = max(values, default=0)
    if top <= 0:
        return BARS[0] * len(values)
    return "".join(BARS[min(len(BARS) - 1, v * (len(BARS) - 1) // top)] for v in values)


@dataclass
class Row:
    key: str
    values: list[int]

    @property
    def total(self) -> int:
        return sum(self.values)


def collect(
    store: Store, name: str, precision: int, start: float, end: float, by: str | None
) -> tuple[list[int], list[Row]]:
    """Slice starts and one row per series (or per value of label ``by``), biggest first."""
    ids = store.series(name, precision)
    starts = list(slice_starts(precision, start, end))
    rows: dict[str, list[int]] = {}
    for series_id, values in store.read(ids, precision, start, end).items():
        labels = parse(series_id)[1]
        key = (labels.get(by, "") or "(none)") if by else series_id
        row = rows.setdefault(key, [0] * len(starts))
        for i, value in enumerate(values):
            row[i] += value or 0
    ordered = sorted((Row(k, v) for k, v in rows.items()), key=lambda r: (-r.total, r.key))
    return starts, ordered


def table(rows: Sequence[Row], header: str) -> str:
    width = max([len(header)] + [len(r.key) for r in rows])
    lines = [f"{header:<{width}}  {'total':>9}  {'last':>7}  trend"]
    for row in rows:
        last = row.values[-1] if row.values else 0
        lines.append(f"{row.key:<{width}}  {row.total:>9}  {last:>7}  {sparkline(row.values)}")
    return "\n".join(lines)
