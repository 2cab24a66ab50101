"""The checks at the boundary of a write: counts Redis can hold, times a slice can take, values
a unique series can take. Pure.

Each check raises (or, on the Recorder's hot path, returns) a ``ConfigurationError`` naming the
bad value, with the ``reason`` it is counted under in ``slicecount.rejected``.
"""

from __future__ import annotations

from slicecount.core.series import shown
from slicecount.errors import ConfigurationError
from slicecount.operations.batches import Context

MIN_TIME = 946_684_800
"""2000-01-01T00:00:00Z: no count is older (a smaller time is a unit mistake)."""
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""What Redis's HINCRBY takes (and a hash value holds)."""
MAX_VALUE_LENGTH = 1024
"""Longest value (in characters) a unique series takes: values are ids, not documents."""


def bad_count(n: object) -> ConfigurationError:
    """The refusal of a count Redis cannot hold (not an integer, or past 64 bits)."""
    if n.__class__ is not int:
        return ConfigurationError(f"count must be an integer, got {shown(n)}", "not_a_count")
    return ConfigurationError(f"count {shown(n)} is outside the signed 64-bit range", "count_range")


def check_count(n: object) -> int:
    """Counts are integers that Redis can hold; refuse anything else naming the value."""
    if n.__class__ is not int or not INT64_MIN <= n <= INT64_MAX:
        raise bad_count(n)
    return n


def time_error(seconds: float, now: float, max_future: float, shown_as: object) -> Exception | None:
    """The refusal of a time before 2000 or more than ``max_future`` ahead of ``now`` (a
    far-future slice would outlive retention and push real ones out), else None."""
    if MIN_TIME <= seconds <= now + max_future:
        return None
    return ConfigurationError(
        f"time {shown(shown_as)} is outside 2000-01-01 .. now + {max_future:g} s", "time_range"
    )


def check_epoch(when: object, what: str) -> float:
    """A number of seconds since the epoch (not before it), else ConfigurationError."""
    if isinstance(when, bool) or not isinstance(when, int | float) or not when >= 0:
        raise ConfigurationError(
            f"{what} must be an epoch time in seconds, got {shown(when)}", "time_range"
        )
    return when


def check_time(ctx: Context, when: object, what: str = "now") -> float:
    """An epoch time in seconds from 2000 up to ``max_future`` ahead of the clock."""
    seconds = check_epoch(when, what)
    error = time_error(seconds, ctx.clock(), ctx.settings.max_future, seconds)
    if error is not None:
        raise error
    return seconds


def value_error(value: object) -> ConfigurationError | None:
    """The refusal of a value a unique series cannot take (not a string, too long, not
    encodable), else None."""
    if not isinstance(value, str):
        return ConfigurationError(
            f"a unique value must be a string, got {shown(value)}", "not_a_value"
        )
    if len(value) > MAX_VALUE_LENGTH:
        return ConfigurationError(
            f"a unique value is {len(value)} characters long (at most {MAX_VALUE_LENGTH})",
            "too_long",
        )
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            return ConfigurationError(f"unique value {shown(value)} is not UTF-8", "not_utf8")
    return None
