"""Whether a request is traced, and by which trace, looked for on its path. No framework.

A request is traced when OpenTelemetry's current span is valid and sampled (when
``opentelemetry-api`` is installed: imported on first use, never required), or else when it
came with a W3C ``traceparent`` header whose sampled flag is set: then its trace id and its
parent id are the exemplar's ``trace_id`` and ``span_id``.

The request's path only notes what it found (a ``core.exemplars.Trace``: the span's two ids,
or the header's value when its flags say sampled); the header is read whole when the buffer
is flushed (``labels_of``), once per (bucket series, minute). A header that is not a valid
``traceparent`` is ignored then, and counted nowhere: it is the client's, not a loss of ours.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slicecount.core.exemplars import SpanIds, Trace

_SAMPLED = frozenset(b"13579bdf") | frozenset("13579bdf")
"""The last digit of the flags when the sampled bit (bit 0) is set (an ASGI header's byte or
a WSGI environ's character)."""
SHORTEST = 55
"""A ``traceparent``'s length (version 00; a later version may add fields after)."""


def sampled(traceparent: bytes | str) -> bool:
    """Whether a ``traceparent``'s flags say sampled, read where version 00 puts them (the
    whole header is checked later: ``core.exemplars.traceparent_labels``)."""
    return len(traceparent) >= SHORTEST and traceparent[54] in _SAMPLED


def _no_span() -> SpanIds | None:
    return None


def _first_lookup() -> SpanIds | None:
    """The first call: import OpenTelemetry if it is there, and put the right lookup in
    ``current_span``'s place (a process without it then pays one call that returns None)."""
    global current_span
    try:
        from opentelemetry import context, trace
        from opentelemetry.trace import propagation
    except ImportError:
        current_span = _no_span
        return None
    # The span is kept in the context under this key; reading it is 8x cheaper than
    # trace.get_current_span(), which a version without the key still gets.
    key = getattr(propagation, "_SPAN_KEY", None)
    if key is None:
        current_span = _span_lookup(context.get_current, trace.get_current_span)
    else:
        current_span = _span_lookup(context.get_current, lambda current: current.get(key))
    return current_span()


def _span_lookup(
    get_current: Callable[[], Any], get_span: Callable[[Any], Any]
) -> Callable[[], SpanIds | None]:
    def lookup() -> SpanIds | None:
        try:
            current = get_current()
            if not current:  # an empty context (no span anywhere): the usual untraced request
                return None
            span = get_span(current)
            if span is None:
                return None
            ids = span.get_span_context()
            # the ids are read at the flush (labels_of), where a zero one is no trace
            return ids if ids.trace_flags & 1 else None
        except Exception:  # a foreign object in the context: no trace, never a failed request
            return None

    return lookup


current_span: Callable[[], SpanIds | None] = _first_lookup
"""OpenTelemetry's current span's context (its ids) when it is sampled, else None."""


def asgi_trace(headers: Any) -> Trace | None:
    """An ASGI request's trace: the current span's, else its first ``traceparent`` header's
    when sampled (an ASGI scope's header names are lower case)."""
    span = current_span()
    if span is not None:
        return span
    for name, value in headers:
        if name == b"traceparent":  # (sampled() inlined: this is every request's path)
            return value if len(value) >= SHORTEST and value[54] in _SAMPLED else None
    return None


def wsgi_trace(environ: dict[str, Any]) -> Trace | None:
    """A WSGI request's trace: the current span's, else its ``traceparent`` header's when
    sampled."""
    span = current_span()
    if span is not None:
        return span
    value = environ.get("HTTP_TRACEPARENT")
    if value.__class__ is str and len(value) >= SHORTEST and value[54] in _SAMPLED:
        return value
    return None
