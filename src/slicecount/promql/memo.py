"""What is worked out from a list of label sets alone, remembered by the sets' identity.

A selector's series come from the discovery cache as the same dicts at every request while
the cache holds (``values.REMEMBERED``: label dicts are never changed once made), so a
dashboard refreshed every few seconds asks again and again which group each series falls in
and whether two share their labels: the answer is the same until discovery finds other
series. An entry holds the dicts it was made from, so their ids stay theirs while it lives.
Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from slicecount.promql.values import Labels

T = TypeVar("T")
REMEMBERED = 200_000
"""Label sets the entries hold at most (a dashboard's panels need a few thousand); past it,
every entry is forgotten."""
_entries: dict[tuple[Hashable, tuple[int, ...]], tuple[object, Sequence[Labels]]] = {}
_held = [0]


def remembered(what: Hashable, labels: Sequence[Labels], make: Callable[[], T]) -> T:
    """``make()``, or what it returned for ``what`` and these very label sets before."""
    key = (what, tuple(map(id, labels)))
    hit = _entries.get(key)
    if hit is not None:
        found: T = hit[0]  # type: ignore[assignment]
        return found
    made = make()
    if _held[0] + len(labels) > REMEMBERED:
        _entries.clear()  # threads may race here: at worst one is made again
        _held[0] = 0
    _entries[key] = (made, list(labels))
    _held[0] += len(labels)
    return made
