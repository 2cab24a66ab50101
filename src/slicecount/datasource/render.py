"""Encoding answers as JSON bytes, in pieces. Pure.

The bytes are those of Starlette's ``JSONResponse`` (compact separators, UTF-8, no ``NaN``),
with two differences that only show where it would fail: text holding a lone surrogate (echoed
from a request's ``\\ud800``) is escaped instead of raising, and a ``Fragment`` (a time series'
datapoints, rendered by ``simpod/shapes`` or ``prometheus/results`` in one pass) is spliced in
as it is.

A large answer is never one string: it is encoded in pieces of about ``PIECE_CHARS`` and sent
piece by piece. Joining a 20 MB answer, then wrapping and encoding it, is three copies that each
hold the interpreter lock for 5-25 ms, and ``GET /`` waited behind them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_SURROGATE = re.compile("[\ud800-\udfff]")
PIECE_CHARS = 1 << 18


class Fragment:
    """JSON text already rendered, in parts written one after another; ``render`` inserts it
    where it stands as a value (plain ``json.dumps`` refuses it, so it is never quoted by
    mistake)."""

    __slots__ = ("parts",)

    def __init__(self, text: str) -> None:
        self.parts: tuple[str, ...] = (text,)

    @classmethod
    def array(cls, items: Sequence[str]) -> Fragment:
        """The JSON array of ``items`` (each already JSON text), never joined into one string."""
        fragment = cls("[")
        parts = ["["]
        for i, item in enumerate(items):
            parts += (",", item) if i else (item,)
        parts.append("]")
        fragment.parts = tuple(parts)
        return fragment

    def __repr__(self) -> str:
        return f"Fragment({''.join(self.parts[:3])[:60]!r})"


class Rendered(NamedTuple):
    """An answer already encoded (a large one is encoded in a worker thread), in pieces."""

    pieces: list[bytes]

    @property
    def body(self) -> bytes:
        """The pieces joined (what a client reads)."""
        return b"".join(self.pieces)


def render(content: Any) -> bytes:
    """``content`` as UTF-8 JSON; ValueError if it holds a non-finite float."""
    if not _holds_fragment(content):
        return _encode(ENCODER.encode(content))
    return b"".join(pieces(content))


def pieces(content: Any) -> list[bytes]:
    """``render(content)`` in pieces of about ``PIECE_CHARS`` characters (a fragment's part
    longer than that is a piece of its own)."""
    if not _holds_fragment(content):
        return [_encode(ENCODER.encode(content))]
    out: list[bytes] = []
    held: list[str] = []
    size = 0
    for text in _texts(content):
        held.append(text)
        size += len(text)
        if size >= PIECE_CHARS:
            out.append(_encode("".join(held)))
            held, size = [], 0
    if held or not out:
        out.append(_encode("".join(held)))
    return out


def _encode(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: JSON can carry it as an escape
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def _holds_fragment(item: object) -> bool:
    """A Fragment, or a dict or list holding one among its values (at any depth of dicts, and
    of lists of dicts: rows of numbers are not walked)."""
    if isinstance(item, Fragment):
        return True
    if isinstance(item, dict):
        return any(_holds_fragment(v) for v in item.values())
    if isinstance(item, list):
        return any(isinstance(v, dict | Fragment) and _holds_fragment(v) for v in item)
    return False


def _texts(item: Any) -> Iterator[str]:
    """The JSON text of ``item`` in parts: a fragment's own parts, the rest encoded whole."""
    if isinstance(item, Fragment):
        yield from item.parts
    elif not _holds_fragment(item):
        yield ENCODER.encode(item)
    elif isinstance(item, dict):
        for i, (key, value) in enumerate(item.items()):
            yield ("{" if i == 0 else ",") + ENCODER.encode(key) + ":"
            yield from _texts(value)
        yield "}"
    else:
        yield "["
        for i, value in enumerate(item):
            if i:
                yield ","
            yield from _texts(value)
        yield "]"
