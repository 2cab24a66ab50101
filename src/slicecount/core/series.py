"""Series ids: validate, encode, parse and match, as docs/architecture.md's Redis layout says.

A series is a metric name plus labels. Its canonical id is the name alone when there are no
labels, else ``name{k1="v1",k2="v2"}`` with keys sorted and values escaped as in the Prometheus
text format. Pure: no Redis, no framework.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from slicecount.errors import ConfigurationError

MAX_LABEL_VALUE_LENGTH = 256
"""Longest label value accepted, in characters."""
MAX_NAME_LENGTH = 200
"""Longest metric name accepted, in characters."""
MAX_SERIES_ID_LENGTH = 4096
"""Longest series id accepted, in characters (every key of a series holds it)."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]*\Z")
_LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n"}
_UNESCAPES = {"\\": "\\", '"': '"', "n": "\n"}

LabelValue = str | int
Labels = Mapping[str, LabelValue]


def is_metric_name(text: str) -> bool:
    """True when ``text`` is a valid metric name: ``[A-Za-z_][A-Za-z0-9_.:-]*``."""
    return _NAME.match(text) is not None


def is_label_name(text: str) -> bool:
    """True when ``text`` is a valid label name: ``[A-Za-z_][A-Za-z0-9_]*``."""
    return _LABEL_NAME.match(text) is not None


def shown(text: object) -> str:
    """``repr`` of a value, cut short: messages never carry a megabyte of input."""
    if isinstance(text, str) and len(text) > 60:
        return f"{text[:40]!r}... ({len(text)} characters)"
    return repr(text)


def validate_name(name: object) -> str:
    """Return ``name`` if it is a valid metric name, else raise naming it."""
    if isinstance(name, str) and len(name) > MAX_NAME_LENGTH:
        raise ConfigurationError(
            f"metric name {shown(name)} is longer than {MAX_NAME_LENGTH} characters", "too_long"
        )
    if not isinstance(name, str) or not is_metric_name(name):
        raise ConfigurationError(
            f"invalid metric name {shown(name)}: expected [A-Za-z_][A-Za-z0-9_.:-]*", "invalid_name"
        )
    return name


def _label_value(key: str, value: object) -> str:
    # bool is an int subclass, but True/False as a label value is nearly always a bug.
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ConfigurationError(
            f"invalid value {shown(value)} for label {key!r}: expected a string or an integer",
            "invalid_label",
        )
    text = value if isinstance(value, str) else str(value)
    if len(text) > MAX_LABEL_VALUE_LENGTH:
        raise ConfigurationError(
            f"label {key!r} value is {len(text)} characters long "
            f"(at most {MAX_LABEL_VALUE_LENGTH}): {text[:40]!r}...",
            "too_long",
        )
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: no key can hold it
            raise ConfigurationError(
                f"label {key!r} value {shown(text)} is not valid Unicode text", "not_utf8"
            ) from None
    return text


def normalize_labels(labels: Labels | None) -> dict[str, str]:
    """Validate labels and return them as a str -> str dict sorted by key."""
    if not labels:
        return {}
    if not isinstance(labels, Mapping):
        raise ConfigurationError(f"labels must be a mapping, got {labels!r}")
    out: dict[str, str] = {}
    for key in sorted(labels, key=str):
        if not isinstance(key, str) or not is_label_name(key):
            raise ConfigurationError(
                f"invalid label name {shown(key)}: expected [A-Za-z_][A-Za-z0-9_]*", "invalid_label"
            )
        out[key] = _label_value(key, labels[key])
    return out


def escape(value: str) -> str:
    """Escape a label value as the Prometheus text format does."""
    if "\\" in value or '"' in value or "\n" in value:
        return "".join(_ESCAPES.get(ch, ch) for ch in value)
    return value


def encode(name: str, labels: Labels | None = None) -> str:
    """Validate and build the canonical series id."""
    validate_name(name)
    clean = normalize_labels(labels)
    if not clean:
        return name
    body = ",".join(f'{key}="{escape(value)}"' for key, value in clean.items())
    series_id = f"{name}{{{body}}}"
    if len(series_id) > MAX_SERIES_ID_LENGTH:
        raise ConfigurationError(
            f"series id {shown(series_id)} is longer than {MAX_SERIES_ID_LENGTH} characters",
            "too_long",
        )
    return series_id


def metric_name(series_id: str) -> str:
    """The metric name of a series id (everything before ``{``)."""
    brace = series_id.find("{")
    return series_id if brace < 0 else series_id[:brace]


def parse(series_id: str) -> tuple[str, dict[str, str]]:
    """Split a canonical series id into its name and labels; raise on malformed ids."""
    name = metric_name(series_id)
    validate_name(name)
    if len(name) == len(series_id):
        return name, {}
    labels: dict[str, str] = {}
    text = series_id
    pos = len(name) + 1
    end = len(text)
    if not text.endswith("}"):
        raise ConfigurationError(f"malformed series id {series_id!r}: missing closing brace")
    while pos < end - 1:
        eq = text.find("=", pos)
        if eq < 0 or eq + 1 >= end or text[eq + 1] != '"':
            raise ConfigurationError(f"malformed series id {series_id!r} at offset {pos}")
        key = text[pos:eq]
        if not is_label_name(key):
            raise ConfigurationError(f"malformed series id {series_id!r}: label {key!r}")
        value, pos = _read_quoted(text, eq + 2, series_id)
        if key in labels:
            raise ConfigurationError(f"malformed series id {series_id!r}: duplicate {key!r}")
        labels[key] = value
        if text[pos] == "," and pos < end - 2:
            pos += 1
        elif pos != end - 1:
            raise ConfigurationError(f"malformed series id {series_id!r} at offset {pos}")
    if not labels:
        raise ConfigurationError(f"malformed series id {series_id!r}: empty label set")
    return name, labels


def _read_quoted(text: str, pos: int, series_id: str) -> tuple[str, int]:
    """Read an escaped value that starts after an opening quote; return it and the next offset."""
    chars: list[str] = []
    while pos < len(text):
        ch = text[pos]
        if ch == '"':
            return "".join(chars), pos + 1
        if ch == "\\":
            nxt = text[pos + 1 : pos + 2]
            if nxt not in _UNESCAPES:
                raise ConfigurationError(f"malformed series id {series_id!r}: bad escape")
            chars.append(_UNESCAPES[nxt])
            pos += 2
        else:
            chars.append(ch)
            pos += 1
    raise ConfigurationError(f"malformed series id {series_id!r}: unterminated value")
