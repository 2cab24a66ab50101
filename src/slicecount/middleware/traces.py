"""Which trace a request belongs to, when it is traced: the exemplar's labels. No framework.

A request is traced when OpenTelemetry's current span is valid and sampled (when
``opentelemetry-api`` is installed: imported on first use, never required), or else when it
came with a W3C ``traceparent`` header whose sampled flag is set: then its trace id and its
parent id are the exemplar's ``trace_id`` and ``span_id``. A header that is not a valid
``traceparent`` is ignored, and counted nowhere: it is the client's, not a loss of ours.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from slicecount.core.exemplars import ExemplarLabels, trace_labels

_TRACEPARENT = re.compile(
    r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[ -~]*)?\Z", re.ASCII
)
"""version-traceid-parentid-flags (W3C Trace Context, level 1), a later version's fields after."""
_ZEROS_32, _ZEROS_16 = "0" * 32, "0" * 16
HEADER = b"traceparent"
"""The header's name as an ASGI scope lists it."""


def from_traceparent(value: str | bytes | None) -> ExemplarLabels | None:
    """The labels of a sampled ``traceparent``; None when it is absent, malformed, or not
    sampled. Never raises."""
    if value is None:
        return None
    if isinstance(value, bytes):
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            return None
    found = _TRACEPARENT.match(value.strip(" \t"))
    if found is None:
        return None
    version, trace_id, parent_id, flags, more = found.groups()
    if version == "ff" or (version == "00" and more is not None):
        return None  # ff is forbidden; version 00 has exactly four fields
    if trace_id == _ZEROS_32 or parent_id == _ZEROS_16 or not int(flags, 16) & 1:
        return None
    return trace_labels(trace_id, parent_id)


def _no_span() -> ExemplarLabels | None:
    return None


def _first_lookup() -> ExemplarLabels | None:
    """The first call: import OpenTelemetry if it is there, and put the right lookup in
    ``current_span``'s place (a process without it then pays one call that returns None)."""
    global current_span
    try:
        from opentelemetry import context, trace
    except ImportError:
        current_span = _no_span
        return None
    current_span = _span_lookup(context.get_current, trace.get_current_span)
    return current_span()


def _span_lookup(
    get_current: Callable[[], Any], get_current_span: Callable[[Any], Any]
) -> Callable[[], ExemplarLabels | None]:
    def lookup() -> ExemplarLabels | None:
        current = get_current()
        if not current:  # an empty context (no span anywhere): the usual untraced request
            return None
        span = get_current_span(current).get_span_context()
        if not span.trace_flags & 1 or not span.is_valid:
            return None
        return trace_labels(format(span.trace_id, "032x"), format(span.span_id, "016x"))

    return lookup


current_span: Callable[[], ExemplarLabels | None] = _first_lookup
"""The labels of OpenTelemetry's current span when it is valid and sampled, else None."""


def trace_of(traceparent: str | bytes | None) -> ExemplarLabels | None:
    """The labels of a request's trace: the current span's, else its ``traceparent``'s."""
    return current_span() or from_traceparent(traceparent)


def asgi_traceparent(headers: Any) -> bytes | None:
    """The ``traceparent`` header of an ASGI scope's headers (the first one), else None."""
    for name, value in headers:
        if name == HEADER:
            return value  # type: ignore[no-any-return]
    return None
