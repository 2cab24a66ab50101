"""Which precision answers a PromQL query, and which slices it reads. Pure.

The precision is the finest whose retention covers the query's times minus its longest
window, preferring one whose slice divides every window, offset and the step (answers are
then exact at every evaluation time); what was chosen and rounded is said in ``infos``. A
query reading unique series picks among the unique precisions, the coarsest dividing the
step first: each point is then one slice (exact in exact mode), not a union of several.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from slicecount.config import Settings
from slicecount.core.frames import FRAME_SLICES
from slicecount.core.slices import oldest_kept, slice_start
from slicecount.errors import QueryError
from slicecount.promql.ast import Call, MatrixSelector, Node, VectorSelector, walk
from slicecount.promql.durations import format_duration
from slicecount.promql.values import Grid, boundary, window

ABSOLUTE_FUNCTIONS = frozenset(
    {"sum_over_time", "avg_over_time", "max_over_time", "min_over_time", "last_over_time"}
)
"""Range functions that see the running totals themselves, not only their differences."""
SUMMABLE = frozenset({"increase", "rate"})
"""Range functions of a window's total alone (``irate`` sees its last slice, ``count_over_time``
its number of slices): a query of only these answers the same on coarser sums of slices."""


@dataclass(frozen=True)
class Need:
    """What one selector asks of the data: a window (0 for an instant selector) and whether
    it needs totals since the oldest retained slice, not only differences. ``distinct``: the
    selector's unique series, whose points are the union of the slices of ``span`` (the
    step; 0: one slice) ending with each time."""

    selector: VectorSelector
    span: float
    absolute: bool
    distinct: bool = False
    function: str = ""  # the range function over the window ("": an instant selector)


def needs(node: Node, point: float = 0.0) -> list[Need]:
    """Every selector of a tree with its window (``point`` for one written without a range,
    ``x[0]``: the simPod targets' window of a point's slices)."""
    out: list[Need] = []
    in_windows: set[int] = set()
    items = walk(node)
    for item in items:
        if isinstance(item, Call) and item.args and isinstance(item.args[0], MatrixSelector):
            window = item.args[0]
            in_windows.add(id(window.vector))
            span = window.range or point
            absolute, function = item.func in ABSOLUTE_FUNCTIONS, item.func
            out.append(Need(window.vector, span, absolute, function=function))
    for item in items:
        if isinstance(item, VectorSelector) and id(item) not in in_windows:
            out.append(Need(item, 0.0, True))
    return out


@dataclass(frozen=True)
class Choice:
    """The grid a query is evaluated on and what was chosen; ``stored``: the precision its
    slices are read at (0: the grid's), of which the grid's slices are whole sums. What was
    chosen and rounded is worded (``infos``) only for an answer that says it: the simPod
    targets' answers never do."""

    grid: Grid
    wanted: tuple[Need, ...] = ()
    step: float | None = None
    stored: int = 0
    retained: int = 0  # seconds of slices the precision read keeps
    # no precision covers the query: (the one chosen, the oldest boundary read, its oldest kept)
    uncovered: tuple[int, int, int] | None = None

    @functools.cached_property
    def infos(self) -> tuple[str, ...]:
        if not self.wanted:
            return ()
        return tuple(dict.fromkeys(_worded(self)))

    @property
    def precision(self) -> int:
        return self.grid.precision

    @property
    def read_precision(self) -> int:
        return self.stored or self.grid.precision


def _earliest(wanted: Sequence[Need], start: float, p: int) -> int:
    """The oldest boundary the query reads at precision ``p``."""
    earliest = slice_start(start, p) + p
    for need in wanted:
        a = boundary(start - need.selector.offset, p)
        earliest = min(earliest, a - (window(need.span, p) if need.span else p))
    return earliest


def _divides(wanted: Sequence[Need], step: float | None, p: int) -> tuple[bool, bool]:
    """(p divides every window and offset, p divides the step too)."""
    windows = all(n.span % p == 0 and n.selector.offset % p == 0 for n in wanted)
    return windows, windows and (step is None or step % p == 0)


def choose(
    settings: Settings,
    wanted: Sequence[Need],
    times: Sequence[float],
    step: float | None,
    now: float,
    max_slices: int,
    among: Sequence[int] | None = None,
    partial: bool = False,
) -> Choice:
    """The precision (and its grid) for evaluating at ``times``. ``among``: the precisions to
    choose from (one pinned); ``partial``: the simPod targets' grid (``Grid.partial``), on the
    coarsest precision dividing the step (each point reads its own slices, the fewest)."""
    start, end = times[0], times[-1]
    distinct = any(need.distinct for need in wanted)
    precisions = settings.unique_precisions if distinct else settings.precisions
    if among is not None:
        precisions = tuple(among)
    if not wanted:  # no selector (Grafana's 1+1 health check): no slice is read
        p = settings.precisions[0]
        newest = slice_start(now, p) + p
        return Choice(Grid(tuple(times), p, newest, newest, newest))

    known: dict[int, tuple[int, int, int]] = {}
    retention = settings.unique_retention_for if distinct else settings.retention_for

    def edges(p: int) -> tuple[int, int, int]:
        """(the oldest boundary kept, the oldest the query reads, the first it reads)."""
        found = known.get(p)
        if found is None:
            earliest = _earliest(wanted, start, p)
            kept = oldest_kept(p, retention(p), now)
            first = kept if any(need.absolute for need in wanted) else max(kept, earliest)
            found = known[p] = (kept, earliest, first)
        return found

    def oldest(p: int) -> int:
        return edges(p)[0]

    def slices(p: int) -> int:
        last = min(slice_start(now, p) + p, slice_start(end, p) + p)
        return max(0, (last - edges(p)[2]) // p)

    covering = [p for p in precisions if oldest(p) <= edges(p)[1] and slices(p) <= max_slices]
    chosen = None
    uncovered = None
    if _totals_only(wanted, times, step, among, partial):
        # the precision kept longest (the finest of equals): there is no window to divide
        longest = min(precisions, key=lambda p: (oldest(p), p))
        covering = [longest] if oldest(longest) <= edges(longest)[1] else []
    for rank in (1, 0):  # dividing windows and step, then windows only
        dividing = [p for p in covering if _divides(wanted, step, p)[rank]]
        if dividing:
            # unique series: one slice per step beats a union (exact in exact mode); an
            # instant query reads the slice holding t, the finest
            coarsest = (distinct or partial) and step is not None
            chosen = dividing[-1] if coarsest else dividing[0]
            break
    if chosen is None and covering:
        chosen = covering[0]
    if chosen is None:
        fitting = [p for p in precisions if slices(p) <= max_slices]
        chosen = fitting[-1] if fitting else precisions[-1]
        uncovered = (chosen, edges(chosen)[1], oldest(chosen))
    p = summed = chosen
    if settings.layout == "blocks" and among is None and not partial and not distinct:
        summed = grouped(wanted, times, step, p, edges(p)[2])
        # read the coarsest stored precision the sums are made of: the fewest slices
        p = max(
            q
            for q in [p, *covering]
            if summed % q == 0 and FRAME_SLICES % (summed // q) == 0 and edges(q)[2] == edges(p)[2]
        )
    grid = Grid(
        tuple(times),
        summed,
        first=edges(p)[2],
        oldest=oldest(p),
        newest=slice_start(now, summed) + summed,
        now=now,
        partial=partial,
        point=int(step or 0) if partial else 0,
    )
    return Choice(grid, tuple(wanted), step, p, p * retention(p), uncovered)


def _worded(choice: Choice) -> Iterator[str]:
    """What a choice chose and rounded, in words (``Choice.infos``)."""
    p, step = choice.read_precision, choice.step
    retained = format_duration(choice.retained)
    yield f"answered from the slices of precision {p} s ({retained} retained)"
    if choice.uncovered is not None:
        chosen, earliest, kept = choice.uncovered
        yield (
            f"no precision keeps slices back to {earliest}: precision {chosen} s keeps them "
            f"from {kept}; earlier times have no samples"
        )
    for need in choice.wanted:
        rounded = window(need.span, p)
        if need.distinct:
            many = f"the union of the {rounded // p} slices" if rounded > p else "the slice"
            yield (
                f"a unique series' point is the distinct count of {many} of {p} s ending with "
                "it; sum over unique series is their union"
            )
        elif need.span and rounded != need.span:
            yield (
                f"range [{format_duration(need.span)}] is not a whole number of {p} s slices: "
                f"counted over [{format_duration(rounded)}]"
            )
        offset = need.selector.offset
        if offset % p:
            yield (
                f"offset {format_duration(offset)} is not a whole number of {p} s slices: "
                "each time reads up to the end of the slice holding it, offset"
            )
    if step is not None and step % p and len(choice.grid.times) > 1:
        yield (
            f"step {format_duration(step)} is not a multiple of the precision {p} s: "
            f"values change once per slice"
        )


def grouped(
    wanted: Sequence[Need], times: Sequence[float], step: float | None, p: int, first: int
) -> int:
    """The coarsest multiple of the stored precision ``p`` whose slices hold every window,
    offset, evaluation time and the first slice read whole (and a frame of the blocks layout
    a whole number of them): a query evaluated on its sums answers the same, over fewer
    slices. A 1 h panel at a 15 s step with [1m] windows reads 5 s slices and evaluates on
    15 s ones: a third of the columns to sum, copy and total. ``p`` itself when none is."""
    if step is None or len(times) < 2 or any(n.function not in SUMMABLE for n in wanted):
        return p
    numbers = [step, times[0], first] + [x for n in wanted for x in (n.span, n.selector.offset)]
    if any(x != int(x) for x in numbers):
        return p
    common = math.gcd(*(int(x) for x in numbers))
    if common % p:
        return p
    group = max(
        k for k in range(1, FRAME_SLICES + 1) if FRAME_SLICES % k == 0 and common % (p * k) == 0
    )
    return p * group


def _totals_only(
    wanted: Sequence[Need],
    times: Sequence[float],
    step: float | None,
    among: Sequence[int] | None,
    partial: bool,
) -> bool:
    """An instant query whose selectors are all instant (``count(x)``, ``x``, ``topk(5, x)``):
    each series' value is its running total, and every series with counts in retention is
    one, as a Prometheus counter stays exposed while it is quiet. It reads the precision kept
    longest, whatever its slice (there is no window to divide)."""
    instant = step is None and len(times) == 1 and among is None and not partial
    return instant and all(n.span == 0 and n.absolute and not n.distinct for n in wanted)


def last_boundary(grid: Grid, wanted: Sequence[Need]) -> int:
    """The newest boundary the query reads (the end of the slices to read)."""
    end = grid.times[-1]
    latest = max((grid.boundary(end, n.selector.offset) for n in wanted), default=grid.first)
    return max(grid.first, min(latest, grid.newest))


def evaluation_times(
    start: float, end: float, step: float, limit: int | None = None
) -> list[float]:
    """``start + k * step`` up to ``end`` (at most ``limit`` of them), counted in whole
    milliseconds as Prometheus does (float steps would drift: 0 to 0.3 by 0.1 is four)."""
    first, last, every = (round(x * 1000) for x in (start, end, step))
    count = (last - first) // every + 1
    return [(first + k * every) / 1000 for k in range(min(count, limit or count))]


def panel_step(
    settings: Settings, start: float, now: float, wanted: float, unique: bool, pinned: int | None
) -> tuple[int, tuple[int, ...] | None]:
    """The step of a simPod panel (a point per step, at least ``wanted`` seconds: Grafana's
    interval) and the precisions it may be read at (None: ``choose`` picks among those that
    divide it). Counters: the finest precision covering ``start`` at least as wide, each point
    one slice. Unique series: a multiple of the coarsest unique precision covering ``start``
    that fits in it, each point the union of its slices."""
    kept = settings.unique_precisions if unique else settings.precisions
    if pinned is not None:
        if unique and pinned not in kept:
            raise QueryError(
                f"unique counts are kept at precisions {kept}, not {pinned} s: pin one of them "
                "or let the precision be chosen"
            )
        return settings.check_precision(pinned), (pinned,)
    retention = settings.unique_retention_for if unique else settings.retention_for
    covering = [p for p in kept if oldest_kept(p, retention(p), now) <= start]
    if unique:
        fitting = [p for p in covering if p <= wanted]
        p = fitting[-1] if fitting else covering[0] if covering else kept[-1]
        return max(1, math.ceil(wanted / p)) * p, None
    p = next((p for p in covering if p >= wanted), covering[-1] if covering else kept[-1])
    return p, (p,)
