"""PromQL's tokens: numbers, durations, strings, identifiers, operators. Pure."""

from __future__ import annotations

import re
from typing import NamedTuple

from slicecount.errors import QueryError
from slicecount.promql.durations import PATTERN as DURATION

MAX_QUERY_LENGTH = 16_000
"""Longest query accepted (Grafana's dashboards rarely pass 1 000 characters)."""

_TOKEN = re.compile(
    rf"""
      (?P<duration>{DURATION})(?![A-Za-z0-9_.])
    | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?![A-Za-z0-9_])
    | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`)
    | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
    | (?P<op>==|!=|<=|>=|=~|!~|[-+*/%^<>=])
    | (?P<punct>[(){{}}\[\],@])
    """,
    re.VERBOSE,
)
_SPACE = re.compile(r"(?:\s+|#[^\n]*)+")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_STRING_ESCAPE = re.compile(
    r"\\(?:([abfnrtv\\'\"])|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([0-7]{3})|(.))"
)


class Token(NamedTuple):
    kind: str  # duration number string ident op punct end
    text: str
    pos: int


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text`` and a final ``end``; QueryError at the first character that
    starts no token."""
    if len(text) > MAX_QUERY_LENGTH:
        raise QueryError(f"query is {len(text)} characters long (limit {MAX_QUERY_LENGTH})")
    tokens: list[Token] = []
    pos = 0
    while True:
        space = _SPACE.match(text, pos)
        if space:
            pos = space.end()
        if pos >= len(text):
            break
        match = _TOKEN.match(text, pos)
        if match is None:
            raise QueryError(f"parse error at char {pos + 1}: unexpected character {text[pos]!r}")
        kind = match.lastgroup or ""
        tokens.append(Token(kind, match.group(), pos))
        pos = match.end()
    tokens.append(Token("end", "", len(text)))
    return tokens


def unquote(token: str) -> str:
    """A string literal's value: Go escapes in ``"..."`` and ``'...'``, none in backticks."""
    body = token[1:-1]
    if token[0] == "`" or "\\" not in body:
        return body

    def one(match: re.Match[str]) -> str:
        simple, hex2, hex4, hex8, octal, other = match.groups()
        if simple:
            return _ESCAPES.get(simple, simple)
        if hex2 or hex4 or hex8:
            code = int(hex2 or hex4 or hex8, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise QueryError(f"invalid Unicode code point in {token[:40]}")
            return chr(code)
        if octal:
            return chr(int(octal, 8))
        raise QueryError(f"unknown escape sequence '\\{other}' in {token}")

    return _STRING_ESCAPE.sub(one, body)
