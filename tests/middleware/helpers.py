"""Reading back what the middleware recorded."""

from __future__ import annotations

from slicecount.core.series import parse
from slicecount.store import Store


def totals(store: Store, name: str, precision: int = 60, **match: str) -> dict[str, int]:
    """series id -> total count, for the series of ``name`` whose labels include ``match``."""
    out: dict[str, int] = {}
    for series_id in store.series(name, precision):
        metric, labels = parse(series_id)
        if all(labels.get(k) == v for k, v in match.items()):
            out[series_id] = sum(n for _, n in store.get(metric, precision, labels))
    return out


def total(store: Store, name: str, precision: int = 60, **match: str) -> int:
    return sum(totals(store, name, precision, **match).values())


def by_label(
    store: Store, name: str, label: str, precision: int = 60, **match: str
) -> dict[str, int]:
    out: dict[str, int] = {}
    for series_id, n in totals(store, name, precision, **match).items():
        value = parse(series_id)[1].get(label, "")
        out[value] = out.get(value, 0) + n
    return out
