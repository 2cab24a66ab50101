"""Rate limits as text, in the notation of the ``limits`` library (flask-limiter, slowapi). Pure.

    100/minute      10 per second      5/2 minutes      1000/hour; 50/minute

One limit is ``<amount> (/ | per) [<n>] <unit>``: a unit of second, minute, hour or day (a plural
``s`` and any case allowed), ``n`` of them per window (1 when left out). Several limits are
separated by ``;``, ``,`` or ``|`` and all apply. Month and year are refused: windows are
aligned to the epoch, so a "month" would be 30 days starting on no calendar boundary; write
"30 days" if that is what you mean.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slicecount.errors import ConfigurationError

UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86_400}
"""Seconds in each unit a limit may name."""
MAX_AMOUNT = 2**53 - 1
"""The largest amount: the Lua scripts compare counts as doubles, exact up to 2**53."""
MAX_WINDOW = 366 * 86_400
"""The longest window: a year's worth of days (its keys' TTL stays an ordinary number)."""

_SEPARATORS = re.compile(r"[;,|]")
_ONE = re.compile(r"\s*([0-9]+)\s*(?:/|per\b)\s*([0-9]+)?\s*([A-Za-z]+)\s*", re.IGNORECASE)


@dataclass(frozen=True)
class Limit:
    """At most ``amount`` hits per window of ``seconds``; ``text`` is the limit written in its
    canonical form ("10 per second" becomes "10/second"), the label it is counted under."""

    amount: int
    seconds: int
    text: str

    def __post_init__(self) -> None:
        if self.amount.__class__ is not int or not 1 <= self.amount <= MAX_AMOUNT:
            raise ConfigurationError(
                f"a limit's amount must be an integer 1 .. {MAX_AMOUNT}, got {self.amount!r}"
            )
        if self.seconds.__class__ is not int or not 1 <= self.seconds <= MAX_WINDOW:
            raise ConfigurationError(
                f"a limit's window must be a whole number of seconds 1 .. {MAX_WINDOW}, got "
                f"{self.seconds!r}"
            )

    def __str__(self) -> str:
        return self.text


def parse_limit(text: str, within: str | None = None) -> Limit:
    """One limit, e.g. ``"100/minute"`` or ``"5 per 2 hours"``; ConfigurationError (a
    ValueError) naming the text (and the ``within`` it came from) otherwise."""
    shown = repr(text.strip()) + ("" if within is None else f" in {within!r}")
    match = _ONE.fullmatch(text)
    if match is None:
        raise ConfigurationError(
            f"cannot read the rate limit {shown}: expected '<amount>/<unit>' or "
            f"'<amount> per [<n>] <units>', e.g. '100/minute' or '5 per 2 hours'"
        )
    digits, multiple, word = match.groups()
    unit = word.lower()
    if unit not in UNITS and unit.endswith("s"):
        unit = unit[:-1]
    if unit in ("month", "year"):
        raise ConfigurationError(
            f"{word!r} in the rate limit {shown} is refused: windows are aligned to the "
            f"epoch, not to calendar {unit}s; write a number of days (e.g. '30 days')"
        )
    if unit not in UNITS:
        raise ConfigurationError(
            f"unknown unit {word!r} in the rate limit {shown}: expected second, minute, "
            f"hour or day (or their plurals)"
        )
    # (lengths first: int() of thousands of digits raises an error naming nothing)
    amount = int(digits) if len(digits) <= 16 else MAX_AMOUNT + 1
    if not 1 <= amount <= MAX_AMOUNT:
        raise ConfigurationError(f"the amount of the rate limit {shown} must be 1 .. {MAX_AMOUNT}")
    n = 1 if multiple is None else int(multiple) if len(multiple) <= 12 else MAX_WINDOW + 1
    if not 1 <= n * UNITS[unit] <= MAX_WINDOW:
        raise ConfigurationError(
            f"the window of the rate limit {shown} must last 1 second .. {MAX_WINDOW // 86_400} "
            "days"
        )
    canonical = f"{amount}/{unit}" if n == 1 else f"{amount}/{n} {unit}s"
    return Limit(amount, n * UNITS[unit], canonical)


def parse_limits(text: str) -> tuple[Limit, ...]:
    """Every limit of ``"1000/hour; 50/minute"`` (separated by ``;``, ``,`` or ``|``), in the
    order given; ConfigurationError naming the bad text, an empty piece or a limit given twice
    (the same amount per the same window, however written: both would count each hit)."""
    if not isinstance(text, str):
        raise ConfigurationError(
            f"rate limits must be text such as '100/minute', got {type(text).__name__} {text!r}"
        )
    pieces = _SEPARATORS.split(text)
    limits: list[Limit] = []
    for piece in pieces:
        if not piece.strip():
            what = "an empty rate limit in" if len(pieces) > 1 else "no rate limit in"
            raise ConfigurationError(
                f"{what} {text!r}: expected limits such as '100/minute' or '1000/hour; 50/minute'"
            )
        limit = parse_limit(piece, text if len(pieces) > 1 else None)
        twin = next((seen for seen in limits if same_window(seen, limit)), None)
        if twin is not None:
            raise ConfigurationError(
                f"the rate limit {piece.strip()!r} is given twice in {text!r} (as {twin.text!r})"
            )
        limits.append(limit)
    return tuple(limits)


def same_window(a: Limit, b: Limit) -> bool:
    """True when two limits count in the same Redis counters (same amount, same window)."""
    return a.amount == b.amount and a.seconds == b.seconds
