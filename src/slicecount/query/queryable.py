"""What the query loop asks of the storage, and nothing more: the loop (``planning``,
``execute``) is written against this, as Prometheus's engine is against
``storage.Queryable``, so it runs on the datasource's Reader (``reads/reader.py``) or on any
other storage a test gives it, with no HTTP server and no Redis. Pure. (Not
``recording/source.py``: where a shell's counts go.)"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, Protocol

from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.operations.unique_reading import Group
from slicecount.reads.chunks import Read, SliceRange
from slicecount.reads.listing import SeriesInfo
from slicecount.reads.repeats import Repeats


class Queryable(Protocol):
    """The series and slices a query reads, and how requests share the work."""

    @property
    def settings(self) -> Settings:
        """Precisions, retention and layout: what a query may read and how it is charged."""

    @property
    def limits(self) -> Limits: ...

    clock: Callable[[], float]
    """Now, in epoch seconds: where the grid of a query ending now ends."""

    async def listings(self) -> tuple[list[SeriesInfo], list[SeriesInfo]]:
        """Every counter series and every unique series: what names can be matched."""

    async def series_of_each(
        self, wanted: Sequence[tuple[str, int, bool]]
    ) -> list[list[SeriesInfo]]:
        """The series of each (stored metric, precision, unique?), in order. An unchanged
        answer is the same list at every call (what is derived from it is remembered)."""

    async def read_slices(
        self, ids: Sequence[str], span: SliceRange, since: float | None = None
    ) -> Read:
        """The counts of ``ids`` over ``span``; ``since``: shared with the same read of
        another request that started after this moment (``time.monotonic()``)."""

    async def count_unions(self, precision: int, groups: Sequence[Group]) -> list[int]:
        """The distinct count of each group's union of unique slices, in order."""

    def request(self) -> AbstractContextManager[float]:
        """A request under way; gives the moment it arrived."""

    def shared_results(self, read: object) -> dict[Any, Any] | None:
        """Where what is computed from a shared read is kept for every request it answers."""

    @property
    def repeats(self) -> Repeats:
        """The answers remembered with the counts they were computed from."""

    def heavy(self) -> AbstractAsyncContextManager[None]:
        """A turn of the few heavy requests evaluated at once (the others wait)."""
