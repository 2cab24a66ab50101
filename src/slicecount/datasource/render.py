"""Encoding answers as JSON bytes. Pure.

The bytes are those of Starlette's ``JSONResponse`` (compact separators, UTF-8, no ``NaN``),
with two differences that only show where it would fail: text holding a lone surrogate (echoed
from a request's ``\\ud800``) is escaped instead of raising, and a ``Fragment`` (a time series'
datapoints, rendered by ``simpod/shapes`` in one pass) is spliced in as it is.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_SURROGATE = re.compile("[\ud800-\udfff]")


class Fragment:
    """JSON text already rendered; ``render`` inserts it where it stands as a value of a dict
    (plain ``json.dumps`` refuses it, so it is never quoted by mistake)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Fragment({self.text[:60]!r})"


class Rendered(NamedTuple):
    """An answer already encoded (a large one is encoded in a worker thread)."""

    body: bytes


def render(content: Any) -> bytes:
    """``content`` as UTF-8 JSON; ValueError if it holds a non-finite float."""
    if isinstance(content, list) and any(_has_fragment(item) for item in content):
        text = "[" + ",".join(_item(item) for item in content) + "]"
    elif _holds_fragment(content):  # an envelope holding one (the Prometheus API's result)
        text = _nested(content)
    else:
        text = ENCODER.encode(content)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: JSON can carry it as an escape
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def _has_fragment(item: object) -> bool:
    return isinstance(item, dict) and any(isinstance(v, Fragment) for v in item.values())


def _item(item: Any) -> str:
    if not _has_fragment(item):
        return ENCODER.encode(item)
    fields = (
        ENCODER.encode(key) + ":" + (v.text if isinstance(v, Fragment) else ENCODER.encode(v))
        for key, v in item.items()
    )
    return "{" + ",".join(fields) + "}"


def _holds_fragment(item: object) -> bool:
    """A dict holding a Fragment as a value, or in a dict it holds (at any depth)."""
    return isinstance(item, dict) and any(
        isinstance(v, Fragment) or _holds_fragment(v) for v in item.values()
    )


def _nested(item: Any) -> str:
    if isinstance(item, Fragment):
        return item.text
    if not _holds_fragment(item):
        return ENCODER.encode(item)
    return "{" + ",".join(ENCODER.encode(k) + ":" + _nested(v) for k, v in item.items()) + "}"
