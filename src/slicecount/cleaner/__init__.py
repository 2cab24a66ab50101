"""The sidecar cleaner: trims samples past retention and forgets counters that became empty.

``Cleaner`` and ``PassStats`` load on first use, so ``slicecount.cleaner.schedule`` stays pure.

It may import store/, operations/, core/, config and errors.

The whole house, and what each layer may import: docs/architecture.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slicecount.cleaner.daemon import Cleaner, PassStats

__all__ = ["Cleaner", "PassStats"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from slicecount.cleaner import daemon

        return getattr(daemon, name)
    raise AttributeError(f"module 'slicecount.cleaner' has no attribute {name!r}")
