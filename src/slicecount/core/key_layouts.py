"""Where a series lives, as ``KeySpace`` (``keys.py``) hands it out: its registry member and
keys at each precision, and its shard. Values only: every key in them was built by ``keys.py``.
"""

from __future__ import annotations

from typing import NamedTuple


class Counter(NamedTuple):
    """One series at one precision: its registry member and its hash."""

    precision: int
    member: str
    key: str


class Layout(NamedTuple):
    """Where a series lives: its registry, its counter at every precision, its shard."""

    registry: str
    counters: tuple[Counter, ...]
    shard: int


class SeriesKeys(NamedTuple):
    """Blocks layout: where a series lives: its shard, its block and its open hash."""

    shard: int
    block: str
    open: str


class Member(NamedTuple):
    """A parsed registry member."""

    precision: int
    series_id: str


class UniqueSlot(NamedTuple):
    """One unique series at one precision: its registry member and its keys' common start."""

    precision: int
    member: str
    hll_base: str
    set_base: str

    def hll(self, start: int) -> str:
        """The HyperLogLog of the slice starting at ``start``."""
        return f"{self.hll_base}{start}"

    def members(self, start: int) -> str:
        """The exact-mode SET of the slice starting at ``start``."""
        return f"{self.set_base}{start}"


class UniqueLayout(NamedTuple):
    """Where a unique series lives: its registry, one slot per precision, its shard."""

    registry: str
    slots: tuple[UniqueSlot, ...]
    shard: int
