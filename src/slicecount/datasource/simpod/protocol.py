"""Reading Grafana's request bodies (SimpleJSON and simpod-json-datasource shapes). Pure.

Everything here turns loosely-typed JSON into checked values, raising ``QueryError`` with a
message that names the offending field, so the app can answer 4xx and never 5xx.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from slicecount.config.request_limits import Limits
from slicecount.errors import LimitExceeded, QueryError
from slicecount.promql.ast import Aggregate, Call, Matcher, Node, NumberLiteral
from slicecount.targets.grammar import parse
from slicecount.targets.grammar import regex_escape as regex_escape  # the builder escapes
from slicecount.targets.rewrites import buckets, per_second, with_matchers

FUNCTIONS = ("count", "rate", "p50", "p90", "p95", "p99")
"""Builder payload ``function`` values: raw counts, per-second rate, histogram quantiles."""
RESERVED_PAYLOAD = frozenset({"function", "group_by", "precision", "format"})
"""Builder payload keys that are not label filters."""
_MATCHES_NOTHING = r"[^\x00-\x{10FFFF}]"  # a class no character is in: RE2 has no (?!)


MAX_EPOCH_MS = 253_402_300_799_999
"""The last millisecond of year 9999: later times (and huge digit strings) are refused."""
MAX_NUMBER = 1e15
"""Largest ``intervalMs`` or ``maxDataPoints`` accepted (a float can hold it exactly)."""


@dataclass(frozen=True)
class Target:
    """One visible target of a /query request."""

    ref_id: str
    text: str
    table: bool
    payload: Mapping[str, Any] = field(default_factory=dict)


def require_object(body: object, what: str = "request body") -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise QueryError(f"{what} must be a JSON object, got {type(body).__name__}")
    return body


def parse_time(value: object, what: str) -> float:
    """ISO-8601 (``2024-06-06T09:05:02.250Z``) or epoch milliseconds -> epoch seconds, from
    1970 to the end of year 9999."""
    if isinstance(value, bool):
        raise QueryError(_not_a_time(value, what))
    if isinstance(value, int | float):
        millis: float = value
    elif isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit():  # isdigit() alone admits "²", which int() refuses
            # Past 16 digits it is out of range anyway: never convert a huge digit string.
            millis = int(text) if len(text) <= 16 else math.inf
        else:
            try:
                seconds = datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
            except (ValueError, OverflowError, OSError):  # naive year-1 times overflow mktime
                raise QueryError(f"{what} is not an ISO-8601 time: {_short(value)}") from None
            millis = seconds * 1000  # only checked: the seconds are returned as parsed
            if 0 <= millis <= MAX_EPOCH_MS:
                return seconds
    else:
        raise QueryError(_not_a_time(value, what))
    if not 0 <= millis <= MAX_EPOCH_MS:  # NaN fails too
        raise QueryError(
            f"{what} is out of range: {_short(value)} (from 1970 to year 9999, or epoch "
            f"milliseconds up to {MAX_EPOCH_MS})"
        )
    return millis / 1000


def _not_a_time(value: object, what: str) -> str:
    return f"{what} must be an ISO-8601 time or epoch milliseconds, got {_short(value)}"


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def parse_range(body: Mapping[str, Any], limits: Limits, key: str = "range") -> tuple[float, float]:
    """``range.from`` and ``range.to`` as epoch seconds, checked."""
    raw = body.get(key)
    if raw is None and key == "range":
        raw = body.get("timeRange")
    span = require_object(raw, f"'{key}'")
    start = parse_time(span.get("from"), f"{key}.from")
    end = parse_time(span.get("to"), f"{key}.to")
    if start > end:
        raise QueryError(f"{key}.from ({span.get('from')}) is after {key}.to ({span.get('to')})")
    if end - start > limits.max_range_seconds:
        raise LimitExceeded(
            f"{key} spans {(end - start) / 86400:.0f} days, more than the limit of "
            f"{limits.max_range_seconds / 86400:.0f}"
        )
    return start, end


def positive_number(body: Mapping[str, Any], key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not 0 <= value <= MAX_NUMBER:
        raise QueryError(
            f"'{key}' must be a number from 0 to {MAX_NUMBER:.0e}, got {_short(value)}"
        )
    return float(value) or None


def payload_of(target: Mapping[str, Any]) -> Mapping[str, Any]:
    """simPod's payload: an object (>= 0.6), ``""`` (0.3-0.5) or missing; ``data`` before 0.3."""
    payload = target.get("payload", target.get("data"))
    if payload is None or payload == "":
        return {}
    if isinstance(payload, str):
        return {}  # unparsable JSON from the code editor: simPod itself treats it as {}
    return require_object(payload, "'payload'")


def visible_targets(body: Mapping[str, Any], limits: Limits) -> list[Target]:
    """The targets to answer: hidden ones and the legacy placeholder skipped."""
    raw = body.get("targets")
    if not isinstance(raw, list):
        raise QueryError(f"'targets' must be a list, got {type(raw).__name__}")
    if len(raw) > limits.max_targets:
        raise LimitExceeded(f"{len(raw)} targets, more than the limit of {limits.max_targets}")
    out = []
    for index, item in enumerate(raw):
        target = require_object(item, f"targets[{index}]")
        if target.get("hide") is True:
            continue
        text = target.get("target", "")
        if not isinstance(text, str):
            raise QueryError(f"targets[{index}].target must be a string, got {text!r}")
        if text in ("", "select metric"):
            continue  # the legacy editor's placeholder, or a target not filled in yet
        ref_id = target.get("refId", "")
        payload = payload_of(target)
        table = target.get("type") == "table" or payload.get("format") == "table"
        out.append(Target(str(ref_id) if ref_id is not None else "", text, table, payload))
    return out


def adhoc_matchers(body: Mapping[str, Any]) -> tuple[Matcher, ...]:
    """Ad-hoc filters (Grafana >= 10.1 ``filters``, else ``adhocFilters``) as matchers."""
    raw = body.get("filters")
    if not raw:
        raw = body.get("adhocFilters")
    if not raw:
        return ()
    if not isinstance(raw, list):
        raise QueryError(f"ad-hoc filters must be a list, got {type(raw).__name__}")
    matchers = []
    for index, item in enumerate(raw):
        flt = require_object(item, f"filters[{index}]")
        key, op = flt.get("key"), flt.get("operator", "=")
        if not isinstance(key, str) or not isinstance(op, str):
            raise QueryError(f"filters[{index}] needs a string key and operator")
        if op in ("=|", "!=|"):
            values = flt.get("values")
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise QueryError(f"filters[{index}] with {op} needs a list of string values")
            pattern = "|".join(regex_escape(v) for v in values) or _MATCHES_NOTHING
            matchers.append(Matcher.make(key, "=~" if op == "=|" else "!~", pattern))
            continue
        value = flt.get("value", "")
        if not isinstance(value, str):
            value = str(value)
        matchers.append(Matcher.make(key, op, value))
    return tuple(matchers)


def _payload_list(payload: Mapping[str, Any], key: str) -> list[str]:
    value = payload.get(key)
    if value in (None, ""):
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v for v in value if v]
    raise QueryError(f"payload.{key} must be a string or a list of strings, got {value!r}")


def compile_target(target: Target, adhoc: tuple[Matcher, ...]) -> tuple[Node, int | None]:
    """The query tree of a target (its text, then the builder payload, then ad-hoc filters)
    and the precision the payload pins (None for auto)."""
    node = parse(target.text)
    payload = target.payload
    filters = []
    for key in payload:
        if key in RESERVED_PAYLOAD:
            continue
        values = _payload_list(payload, key)
        if values:  # builder label filters are regexes (options are sent escaped)
            pattern = values[0] if len(values) == 1 else "|".join(f"(?:{v})" for v in values)
            filters.append(Matcher.make(key, "=~", pattern))
    node = with_matchers(node, tuple(filters) + adhoc)
    function = payload.get("function", "")
    if function not in ("", *FUNCTIONS):
        raise QueryError(f"payload.function must be one of {FUNCTIONS}, got {function!r}")
    group_by = tuple(_payload_list(payload, "group_by"))
    if function.startswith("p"):  # a quantile of counts equals the quantile of their rate
        inner: Node = Aggregate("sum", node, grouping=group_by) if group_by else node
        q = NumberLiteral(int(function[1:]) / 100)
        node = Call("histogram_quantile", (q, buckets(inner)))
    else:
        if function == "rate":
            node = per_second(node)
        if group_by:
            node = Aggregate("sum", node, grouping=group_by)
    return node, _pinned_precision(payload)


def _pinned_precision(payload: Mapping[str, Any]) -> int | None:
    value = payload.get("precision")
    if value in (None, "", "auto"):
        return None
    try:
        return int(str(value))
    except ValueError:
        raise QueryError(f"payload.precision must be 'auto' or seconds, got {value!r}") from None


def is_annotation_query(body: Mapping[str, Any], target: Target) -> bool:
    """simPod sends annotation queries to /query with refId ``Anno``."""
    scoped = body.get("scopedVars")
    return target.ref_id == "Anno" or (isinstance(scoped, Mapping) and "__annotation" in scoped)


def annotation_tags(query: object) -> list[str]:
    """An annotation query is space- or comma-separated tags, ``#`` optional; empty = all."""
    if not isinstance(query, str):
        return []
    tags = [t.lstrip("#") for t in re.split(r"[\s,]+", query) if t.lstrip("#")]
    for tag in tags:
        if not tag.isascii():
            try:
                tag.encode("utf-8")  # a tag is sent to Redis: a lone surrogate cannot be
            except UnicodeEncodeError:
                raise QueryError(f"annotation tag {tag!r} is not valid Unicode text") from None
    return tags
