"""What is worked out from a list of objects alone, remembered by their identity.

A selector's series come from the discovery cache as the same objects at every request while
the cache holds (label dicts and derived series are never changed once made:
``values.REMEMBERED``), so a dashboard refreshed every few seconds asks again and again which
group each series falls in, whether two share their labels, how a histogram's buckets are
made of stored series: the answer is the same until discovery finds other series. An entry
holds the objects it was made from, so their ids stay theirs while it lives. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")
REMEMBERED = 200_000
"""What the entries hold at most, a collection counting as its length (a list of a thousand
series: a thousand; an empty one: one), anything else as one (a dashboard's panels need a
few tens of thousands); past it, every entry is forgotten."""
COLLECTIONS = (list, tuple, dict, set, frozenset)
_entries: dict[tuple[Hashable, tuple[int, ...]], tuple[object, Sequence[object]]] = {}
_held = [0]


def remembered(what: Hashable, members: Sequence[object], make: Callable[[], T]) -> T:
    """``make()``, or what it returned for ``what`` and these very members before."""
    key = (what, tuple(map(id, members)))
    hit = _entries.get(key)
    if hit is not None:
        found: T = hit[0]  # type: ignore[assignment]
        return found
    made = make()
    weight = sum(max(1, len(m)) if isinstance(m, COLLECTIONS) else 1 for m in members)
    if _held[0] + weight > REMEMBERED:
        _entries.clear()  # threads may race here: at worst one is made again
        _held[0] = 0
    _entries[key] = (made, list(members))
    _held[0] += weight
    return made


def by_identity(function: Callable[[A, B], T]) -> Callable[[A, B], T]:
    """``function`` of two arguments, remembered by their identity (``remembered``)."""

    def remembering(first: A, second: B) -> T:
        return remembered(function, [first, second], lambda: function(first, second))

    remembering.__doc__, remembering.__name__ = function.__doc__, function.__name__
    return remembering
