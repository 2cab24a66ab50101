"""Settings' values parsed from what they are given (keyword arguments, the environment's text,
the command line's) and checked, each error naming the setting and the value. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType

from slicecount.config.defaults import DEFAULT_RETENTION, UNIQUE_MIN_PRECISION
from slicecount.config.topology import parse_url
from slicecount.errors import ConfigurationError


def integer(name: str, value: object, minimum: int = 1) -> int:
    """``value`` (an int, or its text) if it is at least ``minimum``, else raise naming it."""
    if isinstance(value, bool):
        raise ConfigurationError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ConfigurationError(f"{name} must be an integer, got {value!r}") from None
    if not isinstance(value, int):
        raise ConfigurationError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ConfigurationError(f"{name} must be >= {minimum}, got {value!r}")
    return value


def positive(name: str, value: object) -> float:
    """``value`` (a number, or its text) if it is finite and above 0, else raise naming it."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigurationError(f"{name} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(number) or number <= 0:
        raise ConfigurationError(f"{name} must be a positive number, got {value!r}")
    return number


def parse_precisions(value: object) -> tuple[int, ...]:
    """``"1,5,60"`` or an iterable of ints -> sorted tuple; rejects non-integers and duplicates."""
    items: list[object]
    if isinstance(value, str):
        items = [part for part in value.replace(" ", "").split(",")]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise ConfigurationError(f"precisions must be a list of integers, got {value!r}")
    if not items or items == [""]:
        raise ConfigurationError(f"precisions must not be empty, got {value!r}")
    precisions = [integer("precision", item) for item in items]
    seen: set[int] = set()
    for precision in precisions:
        if precision in seen:
            raise ConfigurationError(f"duplicate precision {precision} in {value!r}")
        seen.add(precision)
    return tuple(sorted(precisions))


def parse_retention(
    value: object, precisions: tuple[int, ...], base: Mapping[int, int] | int = DEFAULT_RETENTION
) -> Mapping[int, int]:
    """``120``, ``"120"``, ``"1=300,60=1440"`` or a mapping -> slices kept for every precision
    (those not given keep ``base``'s, or the default given in ``value``: ``"200,60=10"``)."""
    per_precision: dict[int, int] = {}
    default: Mapping[int, int] | int = base
    if isinstance(value, Mapping):
        items = [
            (integer("precision", k), integer(f"retention for precision {k}", v))
            for k, v in value.items()
        ]
    elif isinstance(value, str) and "=" in value:
        items = []
        for part in value.replace(" ", "").split(","):
            key, sep, kept = part.partition("=")
            if not sep:
                default = integer("retention", key)
                continue
            items.append((integer("precision", key), integer(f"retention for {key}", kept)))
    else:
        default = integer("retention", value)
        items = []
    for given, count in items:
        if given not in precisions:
            raise ConfigurationError(
                f"retention given for precision {given}, which is not one of {precisions}"
            )
        per_precision[given] = count
    if isinstance(default, int):
        return MappingProxyType({p: per_precision.get(p, default) for p in precisions})
    fallback = {p: per_precision.get(p, default.get(p, DEFAULT_RETENTION)) for p in precisions}
    return MappingProxyType(fallback)


def unique_precisions(value: object, precisions: tuple[int, ...]) -> tuple[int, ...]:
    """The precisions of unique counts: ``value``'s, all among ``precisions``; none given:
    those from ``UNIQUE_MIN_PRECISION`` up (the coarsest if none is)."""
    if value is None or value == "" or value == ():
        coarse = tuple(p for p in precisions if p >= UNIQUE_MIN_PRECISION)
        return coarse or precisions[-1:]
    chosen = parse_precisions(value)
    missing = [p for p in chosen if p not in precisions]
    if missing:
        raise ConfigurationError(
            f"unique_precisions {missing} are not among the precisions {precisions}"
        )
    return chosen


def validate_url(url: object) -> str:
    """Return ``url`` if its scheme is one slicecount can connect with, else raise naming it."""
    if not isinstance(url, str) or not url:
        raise ConfigurationError(f"redis URL must be a non-empty string, got {url!r}")
    parse_url(url)  # the URL's shape is checked here, once
    return url
