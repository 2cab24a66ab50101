"""The walk of ``slicecount reshard --from N``: every counter and annotation written under
another shard count, moved to the store's layout by the pure operations of ``resharding``."""

from __future__ import annotations

from dataclasses import dataclass

from slicecount.operations.resharding import (
    PAGE,
    members,
    move_annotations,
    move_counter,
    old_layout,
)
from slicecount.store import Store


@dataclass
class Report:
    counters: int = 0
    slices: int = 0
    left: int = 0
    annotations: int = 0


def reshard(store: Store, shards: int) -> Report:
    """Move every counter and annotation written under ``shards`` to the store's layout."""
    ctx = store.context
    old = old_layout(ctx, shards)
    report = Report()
    for shard in range(shards):
        start = "-"
        while page := store.run(members(ctx, old, shard, start)):
            for member in page:
                try:
                    moved = store.run(move_counter(ctx, old, shard, member))
                except ValueError:
                    continue  # not a member slicecount wrote: left where it is
                if moved is None:
                    continue
                report.counters += 1
                report.slices += moved.slices
                report.left += moved.left
            if len(page) < PAGE:
                break
            start = old.lex_after(page[-1])
    report.annotations = store.run(move_annotations(ctx, old))
    return report
