"""Reading a request body as strict JSON. Pure.

Python's ``json`` accepts what Grafana never sends and what would fail later as a 500: the
literals ``NaN`` and ``Infinity``, numbers that overflow to ``inf`` (``1e400``) and nesting deep
enough to exhaust the recursion limit while parsing, echoing or encoding. Each is refused here
with a ``QueryError`` (400) naming the problem.
"""

from __future__ import annotations

import json
import math
from typing import Any

from slicecount.errors import QueryError

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in a body (Grafana's nest about 5 deep)."""


def _refuse_constant(name: str) -> Any:
    raise QueryError(f"request body contains {name}, which JSON does not allow: send a number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise QueryError(f"number {text[:40]} in the request body is out of range")
    return value


def parse_json(raw: bytes) -> Any:
    """The JSON value of ``raw``; QueryError for anything Grafana could not have sent."""
    try:
        value = json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite)
    except RecursionError:
        raise QueryError(_too_deep()) from None
    except QueryError:
        raise  # from the hooks above: already says what is wrong
    except (ValueError, UnicodeDecodeError) as exc:
        raise QueryError(f"request body is not valid JSON: {exc}") from None
    # Depth cannot exceed the number of openers: most bodies skip the walk.
    if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH and deeper_than(value, MAX_JSON_DEPTH):
        raise QueryError(_too_deep())
    return value


def deeper_than(value: Any, limit: int) -> bool:
    """True when arrays and objects nest more than ``limit`` deep in ``value`` (no recursion:
    the walk stops at the first container past the limit)."""
    if not isinstance(value, dict | list):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if level > limit:
            return True
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return False


def _too_deep() -> str:
    return f"request body nests arrays and objects more than {MAX_JSON_DEPTH} deep"
