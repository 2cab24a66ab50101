"""PromQL durations: ``5m``, ``1h30m``, ``500ms``, and Go's ``Duration.String()`` form that
Grafana writes for ``$__rate_interval`` (``1m0s``, ``2h0m0s``). Pure."""

from __future__ import annotations

import re

UNITS = {"y": 365 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
_ORDER = list(UNITS)
_PART = re.compile(r"(\d+)(ms|[ywdhms])")
MAX_MILLIS = (1 << 63) - 1
"""Prometheus keeps durations in int64 milliseconds."""
PATTERN = r"(?:\d+(?:ms|[ywdhms]))+"
"""A duration as the lexer finds it (checked by ``parse_duration``)."""


def parse_duration(text: str) -> float:
    """Seconds in ``text``; ValueError naming it when it is not a duration (units largest
    first, each at most once, as Prometheus requires) or is longer than Prometheus allows."""
    pos, millis, last = 0, 0, -1
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        rank = _ORDER.index(match.group(2))
        if rank <= last:
            raise ValueError(f"invalid duration {text!r}: units must go from largest to smallest")
        last = rank
        millis += int(match.group(1)) * round(UNITS[match.group(2)] * 1000)
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"invalid duration {text[:40]!r}: expected e.g. 30s, 5m, 1h30m")
    if millis > MAX_MILLIS:
        raise ValueError(f"duration {text[:40]!r} is out of range")
    return millis / 1000


def format_duration(seconds: float) -> str:
    """The shortest PromQL form of ``seconds`` (``90`` -> ``1m30s``, ``0.5`` -> ``500ms``)."""
    millis = round(seconds * 1000)
    if millis == 0:
        return "0s"
    sign, millis = ("-", -millis) if millis < 0 else ("", millis)
    parts = []
    for unit, size in UNITS.items():
        unit_ms = round(size * 1000)
        if millis >= unit_ms:
            parts.append(f"{millis // unit_ms}{unit}")
            millis %= unit_ms
    return sign + "".join(parts)
