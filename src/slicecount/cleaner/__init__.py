"""The sidecar cleaner: trims samples past retention and forgets counters that became empty."""

from slicecount.cleaner.daemon import Cleaner, PassStats

__all__ = ["Cleaner", "PassStats"]
