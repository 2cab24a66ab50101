"""Request parameters of the Prometheus API: the query string and the form merged, times as
Unix seconds or RFC 3339, steps as seconds or durations. Pure.

Every problem is a ``BadData`` naming the parameter (answered 400 ``bad_data``)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime

from slicecount.errors import QueryError
from slicecount.promql.durations import parse_duration

MIN_TIME = -9_223_372_036.854775  # Prometheus' bounds (int64 milliseconds)
MAX_TIME = 9_223_372_036.854775
WIDEST_TIME = 9_223_372_036_854_775.0
"""The latest time Prometheus parses anywhere (int64 milliseconds, in seconds): Grafana's
exemplar probe sends milliseconds, which Prometheus takes for seconds far ahead."""


class BadData(QueryError):
    """A parameter is missing or malformed."""


class Params:
    """The parameters of one request: the form's first, then the query string's (a value in
    the body wins, as Go's ``FormValue``); ``path`` holds the URL's own (a label name)."""

    def __init__(
        self, pairs: Sequence[tuple[str, str]], path: Mapping[str, str] | None = None
    ) -> None:
        self.pairs = list(pairs)
        self.path = dict(path or {})

    def get(self, name: str) -> str | None:
        for key, value in self.pairs:
            if key == name:
                return value
        return None

    def all(self, name: str) -> list[str]:
        return [value for key, value in self.pairs if key == name]

    def required(self, name: str) -> str:
        value = self.get(name)
        if value is None or value == "":
            raise BadData(f"invalid parameter {name!r}: missing")
        return value

    def time(self, name: str, default: float | None = None, limit: float = MAX_TIME) -> float:
        value = self.get(name)
        if value is None or value == "":
            if default is None:
                raise BadData(f"invalid parameter {name!r}: missing")
            return default
        try:
            return parse_time(value, limit)
        except ValueError as exc:
            raise BadData(f"invalid parameter {name!r}: {exc}") from None

    def duration(self, name: str) -> float:
        value = self.required(name)
        try:
            return parse_step(value)
        except ValueError as exc:
            raise BadData(f"invalid parameter {name!r}: {exc}") from None


_DECIMAL = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", re.ASCII)


def _decimal(text: str) -> float:
    """A plain decimal number (Python's ``float`` also takes ``1_000`` and other digits)."""
    if not _DECIMAL.fullmatch(text):
        raise ValueError(text)
    return float(text)


def parse_time(text: str, limit: float = MAX_TIME) -> float:
    """``1700000000.123`` or RFC 3339 (``2023-11-14T22:13:20.123Z``), to the millisecond,
    within ``-limit`` and ``limit``."""
    try:
        value = _decimal(text)
    except ValueError:
        try:
            value = datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise ValueError(f"cannot parse {text[:60]!r} to a valid timestamp") from None
        if "T" not in text or (text[-1] != "Z" and "+" not in text[10:] and "-" not in text[10:]):
            raise ValueError(f"cannot parse {text[:60]!r}: RFC 3339 needs a time zone") from None
    if math.isnan(value) or not -limit <= value <= limit:
        raise ValueError(f"cannot parse {text[:60]!r} to a valid timestamp")
    return round(value * 1000) / 1000  # Prometheus keeps milliseconds


def parse_step(text: str) -> float:
    """``15``, ``0.5`` (seconds) or ``1m``, ``1m30s``, to the millisecond."""
    try:
        value = _decimal(text)
    except ValueError:
        try:
            return parse_duration(text)
        except ValueError:
            raise ValueError(f"cannot parse {text[:60]!r} to a valid duration") from None
    if not math.isfinite(value) or not MIN_TIME <= value <= MAX_TIME:
        raise ValueError(f"cannot parse {text[:60]!r} to a valid duration")
    return round(value * 1000) / 1000  # Prometheus keeps milliseconds
