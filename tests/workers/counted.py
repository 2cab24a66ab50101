"""What a store says the task workers counted, summed per label value at every precision (each
precision must say the same)."""

from __future__ import annotations

from collections import Counter

from slicecount.core.series import parse
from slicecount.store import Store


def totals(store: Store, metric: str, label: str) -> Counter[str]:
    """``metric``'s counts by the value of ``label``, the same at every precision."""
    found: list[Counter[str]] = []
    for precision in store.settings.precisions:
        by: Counter[str] = Counter()
        for series_id in store.series(metric, precision):
            name, labels = parse(series_id)
            by[labels.get(label, "")] += sum(n for _, n in store.get(name, precision, labels))
        found.append(+by)
    assert all(by == found[0] for by in found), found
    return found[0]


def observations(store: Store, histogram: str) -> int:
    """How many values a histogram holds (its buckets' counts summed)."""
    return sum(totals(store, f"{histogram}.bucket", "le").values())
