"""Exemplars: one observation of a histogram bucket kept with the trace it came from. Pure.

An exemplar is what Prometheus keeps beside a bucket: its labels (``trace_id`` and ``span_id``,
as prometheus_client writes them, or what the app gave), the value observed and when. slicecount
keeps the last one of every (bucket series, minute) that had one, in a sorted set per shard
(``keys.py`` names it and each member's slot); this module writes and reads what a member holds
after its slot: ``<ms into the minute>:<value>:<labels>``.

The labels of a traced request (a 32-digit trace id, a 16-digit span id, lower-case hex) are
written as ``t`` and the 48 digits; any others as compact JSON. A member costs Redis about a
hundred bytes more than what it holds (docs/exemplars.md).

A request's path only notes its trace as it found it (a ``Trace``: the current span's ids, or
the ``traceparent`` header's text); ``labels_of`` turns what is kept of it into labels when
the buffer is flushed, once per (series, minute), not once per request. A ``traceparent`` is
read as the W3C Trace Context says (level 1): anything else is no trace.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import NamedTuple, Protocol

from slicecount.core.series import is_label_name, shown
from slicecount.errors import ConfigurationError

TRACE_ID = "trace_id"
"""The label of a trace's id (prometheus_client's and Grafana's name for it)."""
SPAN_ID = "span_id"
"""The label of the span's id."""
PERIOD = 60
"""Seconds of one exemplar slot: a bucket series keeps its last exemplar of every minute."""
MAX_LABEL_CHARACTERS = 128
"""OpenMetrics' bound on an exemplar's labels, names and values together."""

ExemplarLabels = tuple[tuple[str, str], ...]
"""An exemplar's labels, sorted by name."""


class SpanIds(Protocol):
    """What an OpenTelemetry span's context holds (read by ``labels_of``, at the flush)."""

    @property
    def trace_id(self) -> int: ...

    @property
    def span_id(self) -> int: ...


Trace = ExemplarLabels | SpanIds | bytes | str
"""How an observation's trace is noted on its path: labels (an app's), an OpenTelemetry
span's context, or a ``traceparent`` header's value (``labels_of`` reads them)."""

_TRACE = re.compile(r"t([0-9a-f]{32})([0-9a-f]{16})\Z")
_TRACEPARENT = re.compile(
    r"[ \t]*([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[ -~]*)?[ \t]*\Z", re.ASCII
)
"""version-traceid-parentid-flags, a later version's fields after (W3C Trace Context)."""
_ZEROS_32, _ZEROS_16 = "0" * 32, "0" * 16


class Exemplar(NamedTuple):
    """One observation: its labels, its value and its time (epoch seconds, to the ms)."""

    labels: ExemplarLabels
    value: float
    time: float


def trace_labels(trace_id: str, span_id: str) -> ExemplarLabels:
    """The labels of a traced observation (ids as lower-case hex, unchecked: the caller
    parsed them)."""
    return ((SPAN_ID, span_id), (TRACE_ID, trace_id))


def traceparent_labels(value: str | bytes) -> ExemplarLabels | None:
    """The labels of a sampled ``traceparent`` (its trace id and parent id); None when it is
    malformed or not sampled. Never raises."""
    if isinstance(value, bytes):
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            return None
    found = _TRACEPARENT.match(value) if isinstance(value, str) else None
    if found is None:
        return None
    version, trace_id, parent_id, flags, more = found.groups()
    if version == "ff" or (version == "00" and more is not None):
        return None  # ff is forbidden; version 00 has exactly four fields
    if trace_id == _ZEROS_32 or parent_id == _ZEROS_16 or not int(flags, 16) & 1:
        return None
    return trace_labels(trace_id, parent_id)


def labels_of(trace: Trace) -> ExemplarLabels | None:
    """The labels a noted trace stands for; None for a ``traceparent`` that is not a
    sampled one (ignored: the client's, counted nowhere)."""
    if isinstance(trace, bytes | str):
        return traceparent_labels(trace)
    if isinstance(trace, tuple) and all(isinstance(pair, tuple) for pair in trace):
        return trace  # labels already  # type: ignore[return-value]
    try:
        trace_id, span_id = trace.trace_id, trace.span_id  # type: ignore[union-attr]
    except AttributeError:
        return None
    if not (isinstance(trace_id, int) and isinstance(span_id, int)):
        return None
    if not 0 < trace_id < 1 << 128 or not 0 < span_id < 1 << 64:
        return None  # no valid span has a zero id
    return trace_labels(format(trace_id, "032x"), format(span_id, "016x"))


def check_labels(labels: Mapping[str, str]) -> ExemplarLabels:
    """An app's exemplar labels, sorted; ConfigurationError for a name or value Prometheus
    would refuse, or past ``MAX_LABEL_CHARACTERS``."""
    if not isinstance(labels, Mapping) or not labels:
        raise ConfigurationError(f"exemplar labels must be a non-empty mapping, got {labels!r}")
    size = 0
    for name, value in labels.items():
        if not isinstance(name, str) or not is_label_name(name):
            raise ConfigurationError(f"invalid exemplar label name {shown(name)}", "invalid_label")
        if not isinstance(value, str):
            raise ConfigurationError(
                f"exemplar label {name!r} must be a string, got {shown(value)}", "invalid_label"
            )
        size += len(name) + len(value)
    if size > MAX_LABEL_CHARACTERS:
        raise ConfigurationError(
            f"exemplar labels hold {size} characters, more than {MAX_LABEL_CHARACTERS}", "too_long"
        )
    return tuple(sorted(labels.items()))


def slot_of(time: float) -> int:
    """The slot (epoch minute) an exemplar of ``time`` belongs to (by its millisecond, as
    ``encode`` keeps it)."""
    return round(time * 1000) // (PERIOD * 1000)


def encode(exemplar: Exemplar) -> str:
    """What a member holds after its slot. The time is kept to the millisecond, as
    Prometheus keeps it."""
    labels, value, time = exemplar
    millis = round(time * 1000) % (PERIOD * 1000)
    text = _compact(labels) or json.dumps(dict(labels), separators=(",", ":"), sort_keys=True)
    return f"{millis}:{value!r}:{text}"


def decode(slot: int, text: str) -> Exemplar:
    """The exemplar a member of slot ``slot`` holds (``text``: after the slot); ValueError
    for anything ``encode`` did not write."""
    millis, value, labels = text.split(":", 2)
    if not millis.isdigit() or not int(millis) < PERIOD * 1000:
        raise ValueError(f"malformed exemplar time {millis[:20]!r}")
    number = float(value)
    found = _TRACE.match(labels)
    if found is not None:
        pairs: ExemplarLabels = ((SPAN_ID, found[2]), (TRACE_ID, found[1]))
    else:
        parsed = json.loads(labels)
        if not isinstance(parsed, dict) or not all(isinstance(v, str) for v in parsed.values()):
            raise ValueError(f"malformed exemplar labels {labels[:80]!r}")
        pairs = tuple(sorted(parsed.items()))
    return Exemplar(pairs, number, (slot * PERIOD * 1000 + int(millis)) / 1000)


def _compact(labels: ExemplarLabels) -> str | None:
    """``t`` and the trace's and span's ids when they are all there is, as a traced request
    has them; else None."""
    if len(labels) != 2 or labels[0][0] != SPAN_ID or labels[1][0] != TRACE_ID:
        return None
    text = f"t{labels[1][1]}{labels[0][1]}"
    return text if _TRACE.match(text) else None
