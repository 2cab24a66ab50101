"""Whether a request (or a task run) is traced, and by which trace, looked for on its path. No
framework: the request middleware and the task shells ask here.

A request is traced when OpenTelemetry's current span is valid and sampled (when
``opentelemetry-api`` is installed: imported on first use, never required), or else when it
came with a W3C ``traceparent`` header whose sampled flag is set: then its trace id and its
parent id are the exemplar's ``trace_id`` and ``span_id``. A task run likewise: the span
current when it starts, else the ``traceparent`` its message carried.

The request's path only notes what it found (a ``core.exemplars.Trace``: the span's context,
or the header's value when its form is right and its flags say sampled: a few C-level string
checks, no regex); the ids are read when the buffer is flushed (``labels_of``), once per
(bucket series, minute), where the rest is checked (no zero id; a later version's fields). A
header that is not a valid ``traceparent`` is ignored, and counted nowhere: it is the
client's, not a loss of ours; one that looks right here (all zeros) and not there costs its
minute's exemplar at most.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from slicecount.core.exemplars import SpanIds, Trace

_SAMPLED = frozenset(b"13579bdf")
"""The last digit of the flags when the sampled bit (bit 0) is set."""
LENGTH = 55
"""A ``traceparent``'s length (version 00; a later version may add fields after)."""
_HEX = b"0123456789abcdef"


def sampled(traceparent: bytes | str) -> bool:
    """Whether a ``traceparent`` is worth noting: its flags say sampled and, as version 00
    has it, it is lower-case hex but for a dash at 2, 35 and 52 (one C-level translate()
    finds anything else); a later version's, longer, is checked at the flush only."""
    # (a character outside ASCII becomes "?": no hex digit, so not noted)
    raw = traceparent.encode("ascii", "replace") if isinstance(traceparent, str) else traceparent
    if len(raw) != LENGTH:
        return len(raw) > LENGTH and raw[54] in _SAMPLED
    return (
        raw[54] in _SAMPLED
        and raw[2] == raw[35] == raw[52] == 45  # "-"
        and raw.translate(None, _HEX) == b"---"
    )


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
    # Every request asks, traced or not: two of OpenTelemetry's own (unexported) names make
    # it one C call when no span is current (its context variable's get, 0.13 -> 0.03 us),
    # and a span's look-up 8x cheaper than get_current_span(); without them, the public API.
    var = getattr(getattr(context, "_RUNTIME_CONTEXT", None), "_current_context", None)
    get_current = var.get if isinstance(var, ContextVar) else context.get_current
    key = getattr(propagation, "_SPAN_KEY", None)
    if key is None:
        current_span = _span_lookup(get_current, trace.get_current_span)
    else:
        current_span = _span_lookup(get_current, lambda current: current.get(key))
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


def prepare() -> None:
    """Import OpenTelemetry now, if it is installed and not imported yet (a shell does as it is
    built: the import, 35-60 ms, is then no request's cost, and processes forked after it, a
    Celery prefork child or an RQ work-horse each running a few tasks, inherit it)."""
    if current_span is _first_lookup:
        _first_lookup()


def asgi_trace(headers: Any) -> Trace | None:
    """An ASGI request's trace: the current span's, else its first ``traceparent`` header's
    when sampled (an ASGI scope's header names are lower case). Never raises."""
    span = current_span()
    if span is not None:
        return span
    try:
        for name, value in headers:
            if name == b"traceparent":
                # sampled(), inlined for version 00 (the header any sender writes)
                if len(value) == LENGTH and value[54] in _SAMPLED and value[2] == 45:
                    if value[35] == value[52] == 45 and value.translate(None, _HEX) == b"---":
                        return value  # type: ignore[no-any-return]
                    return None
                return value if sampled(value) else None
    except Exception:  # headers an ASGI server would never send: no trace, the request goes on
        return None
    return None


def wsgi_trace(environ: dict[str, Any]) -> Trace | None:
    """A WSGI request's trace (a Django request's too: its ``META``): the current span's,
    else its ``traceparent`` header's when sampled. Never raises."""
    return traced(environ.get("HTTP_TRACEPARENT"))


def traced(traceparent: object) -> Trace | None:
    """The current span's trace, else ``traceparent``'s (a header's value, text or bytes)
    when sampled; None for anything else. Never raises."""
    span = current_span()
    if span is not None:
        return span
    if traceparent.__class__ is str or traceparent.__class__ is bytes:
        return traceparent if sampled(traceparent) else None
    return None
