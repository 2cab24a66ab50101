"""PromQL's tokens: numbers, durations, strings, identifiers, operators. Pure."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
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
_DOTTED = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*(?:\.[A-Za-z0-9_:]+)+")
"""A slicecount name written as stored (``http.requests``), where PromQL wants its exposed
name."""
_SPACE = re.compile(r"(?:\s+|#[^\n]*)+")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_STRING_ESCAPE = re.compile(
    r"\\(?:([abfnrtv\\'\"])|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([0-7]{3})|(.))"
)


class DottedName(QueryError):
    """A name with dots (``http.requests``): ``name`` is it, for a caller that knows how
    names are exposed to suggest the right one."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name


class Token(NamedTuple):
    kind: str  # duration number string ident op punct end
    text: str
    pos: int


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text`` and a final ``end``; QueryError at the first character that
    starts no token."""
    return scan(text, MAX_QUERY_LENGTH, _TOKEN, _SPACE, _unexpected)


def scan(
    text: str,
    longest: int,
    token: re.Pattern[str],
    space: re.Pattern[str],
    unexpected: Callable[[str, int, Token | None], QueryError],
) -> list[Token]:
    """``text`` cut into ``token``'s named groups between runs of ``space``, and a final
    ``end``; ``unexpected(text, pos, last token)`` is raised at a character that starts none.
    One scanner for PromQL and the simPod targets, each with its own tokens and errors."""
    if len(text) > longest:
        raise QueryError(f"query is {len(text)} characters long (limit {longest})")
    tokens: list[Token] = []
    pos = 0
    while True:
        blank = space.match(text, pos)
        if blank:
            pos = blank.end()
        if pos >= len(text):
            break
        match = token.match(text, pos)
        if match is None:
            raise unexpected(text, pos, tokens[-1] if tokens else None)
        tokens.append(Token(match.lastgroup or "", match.group(), pos))
        pos = match.end()
    tokens.append(Token("end", "", len(text)))
    return tokens


def _unexpected(text: str, pos: int, last: Token | None) -> QueryError:
    """The error for the character at ``pos``; a dot inside a name says whose."""
    message = f"parse error at char {pos + 1}: unexpected character {text[pos]!r}"
    if text[pos] == "." and last is not None and last.kind == "ident":
        dotted = _DOTTED.match(text, last.pos)
        if dotted and last.pos + len(last.text) == pos:
            name = dotted.group()
            return DottedName(f"{message} in {name!r} (PromQL writes '.' as '_')", name)
    return QueryError(message)


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


def number(text: str) -> float:
    """A number token's value (decimal, scientific or hexadecimal)."""
    value = float(int(text, 16)) if text[:2].lower() == "0x" else float(text)
    if math.isinf(value) and "inf" not in text.lower():
        raise QueryError(f"number {text[:40]} is out of range")
    return value


def shown(token: Token) -> str:
    """A token as an error message names it."""
    return "end of input" if token.kind == "end" else repr(token.text)


class Tokens:
    """A cursor over the tokens of a query, with the checks every grammar rule uses and a
    bound on how deep the parse may nest (``descend``)."""

    def __init__(self, text: str, max_depth: int) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.level = 0  # open parentheses, calls and operator chains: bounds the recursion
        self.max_depth = max_depth

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def next(self) -> Token:
        token = self.peek()
        self.i += 1
        return token

    def at(self, *texts: str) -> bool:
        """Whether the next token is one of ``texts`` (keywords in any case, as PromQL)."""
        token = self.peek()
        if token.kind == "ident":
            return token.text.lower() in texts
        return token.kind in ("op", "punct") and token.text in texts

    def error(self, message: str, token: Token | None = None) -> QueryError:
        token = token or self.peek()
        return QueryError(f"parse error at char {token.pos + 1}: {message}")

    def expect(self, kind: str, text: str | None = None) -> Token:
        token = self.peek()
        if token.kind != kind or (text is not None and token.text != text):
            want = repr(text) if text is not None else kind
            raise self.error(f"expected {want}, found {shown(token)}")
        return self.next()

    def descend(self) -> None:
        self.level += 1
        if self.level > self.max_depth:
            raise QueryError(f"query nests more than {self.max_depth} levels deep")
