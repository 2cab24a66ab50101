"""How many series or hashes one cleaner script call takes, so that it holds Redis ~2 ms."""

from __future__ import annotations

from collections import deque

TARGET_CALL_SECONDS = 0.002
"""Aim of the adaptive chunk size: one trim call should hold Redis about this long (its server
time, which the script measures: the round trip blocks no one else)."""
MIN_CHUNK, MAX_CHUNK, FIRST_CHUNK = 4, 5000, 8
RECENT_CALLS = 8
"""Chunks are sized by the slowest per-hash cost of this many recent calls."""


class ChunkSizer:
    """How many hashes the next trim call of one (precision, mode) takes (or units of work, the
    next compaction call: blocks layout), so that the slowest
    of the recent calls, at its cost per hash, would have held Redis TARGET_CALL_SECONDS.
    Sizing by the slowest, not the last, keeps a lucky fast call from doubling the next one
    into a stall; growth is at most 2x per call (start small, learn the rate)."""

    def __init__(
        self,
        first: int = FIRST_CHUNK,
        minimum: int = MIN_CHUNK,
        maximum: int = MAX_CHUNK,
        target: float = TARGET_CALL_SECONDS,
    ) -> None:
        self.size = first
        self.minimum, self.maximum, self.target = minimum, maximum, target
        self.costs: deque[float] = deque(maxlen=RECENT_CALLS)  # seconds per hash

    def observe(self, hashes: int, held: float) -> None:
        if hashes < self.size // 2:
            return  # a walk's first call (a read) or its short tail: says little of the rate
        self.costs.append(held / hashes)
        wanted = self.target / max(max(self.costs), 1e-7)
        self.size = int(min(self.maximum, 2 * self.size, max(self.minimum, wanted)))
