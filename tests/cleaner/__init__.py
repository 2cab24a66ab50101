"""Helpers of the cleaner's tests."""

from __future__ import annotations

from slicecount.operations.trimming import save_cleaner_sweep
from slicecount.store import Store


def record_sweeps(store: Store, at: int) -> None:
    """As if a cleaner's pass starting at ``at`` had swept every precision: a pass after it
    sweeps only a period later (``at`` long ago: the next pass sweeps)."""
    for precision in store.settings.precisions:
        store.run(save_cleaner_sweep(store.context, precision, at))
