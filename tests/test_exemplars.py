"""Exemplars without a server: what a ``traceparent`` says, what a request's path notes of its
trace, how an exemplar is written in a member and read back, and where members sort."""

from __future__ import annotations

import math
import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from slicecount.core import exemplars
from slicecount.core.exemplars import (
    Exemplar,
    check_labels,
    labels_of,
    slot_of,
    trace_labels,
    traceparent_labels,
)
from slicecount.core.keys import KeySpace
from slicecount.errors import ConfigurationError
from slicecount.recording import traces

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"
SAMPLED = f"00-{TRACE}-{PARENT}-01"
LABELS = (("span_id", PARENT), ("trace_id", TRACE))
HEX = "0123456789abcdef"


def test_a_sampled_traceparent_gives_its_trace_and_parent_ids() -> None:
    assert traceparent_labels(SAMPLED) == LABELS
    assert traceparent_labels(SAMPLED.encode()) == LABELS  # as an ASGI header holds it
    assert traceparent_labels(f" {SAMPLED}\t") == LABELS  # optional white space around
    assert traceparent_labels(f"00-{TRACE}-{PARENT}-03") == LABELS  # another flag beside


@pytest.mark.parametrize(
    "header",
    [
        f"00-{TRACE}-{PARENT}-00",  # not sampled
        f"00-{TRACE}-{PARENT}-02",  # another flag, not sampled
        f"00-{'0' * 32}-{PARENT}-01",  # no trace
        f"00-{TRACE}-{'0' * 16}-01",  # no parent
        f"ff-{TRACE}-{PARENT}-01",  # a version that is forbidden
        f"00-{TRACE}-{PARENT}-01-extra",  # version 00 has four fields
        f"00-{TRACE.upper()}-{PARENT}-01",  # upper case
        f"00-{TRACE[:-1]}-{PARENT}-01",  # short
        f"00-{TRACE}0-{PARENT}-01",  # long
        f"00-{TRACE}-{PARENT}-1",
        f"00_{TRACE}_{PARENT}_01",
        f"00-{TRACE[:-1]}g-{PARENT}-01",
        f"00-{TRACE}-{PARENT[:-1]}--01",
        "",
        "garbage",
        "00-" + "é" * 32 + f"-{PARENT}-01",
    ],
)
def test_anything_else_is_no_trace(header: str) -> None:
    assert traceparent_labels(header) is None
    assert traceparent_labels(header.encode("utf-8")) is None


def test_a_later_version_is_read_as_version_00() -> None:
    assert traceparent_labels(f"01-{TRACE}-{PARENT}-01-what-comes-later") == LABELS
    assert traceparent_labels(f"01-{TRACE}-{PARENT}-01") == LABELS
    assert traceparent_labels(f"01-{TRACE}-{PARENT}-01x") is None  # a field needs its dash


@given(st.one_of(st.text(max_size=80), st.binary(max_size=80)))
def test_reading_a_header_never_raises(header: str | bytes) -> None:
    found = traceparent_labels(header)
    assert found is None or (len(found) == 2 and found[1][0] == "trace_id")
    assert labels_of(header) == found


@given(
    st.text(HEX, min_size=32, max_size=32).filter(lambda t: t != "0" * 32),
    st.text(HEX, min_size=16, max_size=16).filter(lambda s: s != "0" * 16),
    st.integers(0, 255),
)
def test_every_valid_header_is_read_by_its_flag(trace_id: str, parent: str, flags: int) -> None:
    header = f"00-{trace_id}-{parent}-{flags:02x}"
    expected = trace_labels(trace_id, parent) if flags & 1 else None
    assert traceparent_labels(header) == expected
    # the request's path keeps exactly the headers whose flags say sampled
    environ = {"HTTP_TRACEPARENT": header}
    assert (traces.wsgi_trace(environ) is not None) == bool(flags & 1)


def test_the_path_notes_a_header_only_when_its_flags_say_sampled() -> None:
    headers = [(b"host", b"x"), (b"traceparent", SAMPLED.encode())]
    assert traces.asgi_trace(headers) == SAMPLED.encode()
    assert traces.asgi_trace([(b"traceparent", f"00-{TRACE}-{PARENT}-00".encode())]) is None
    assert traces.asgi_trace([(b"traceparent", b"short")]) is None
    assert traces.asgi_trace([(b"host", b"x")]) is None
    assert traces.wsgi_trace({"HTTP_TRACEPARENT": SAMPLED}) == SAMPLED
    assert traces.wsgi_trace({}) is None
    # malformed but sampled by its flags: not even noted
    assert traces.wsgi_trace({"HTTP_TRACEPARENT": "x" * 54 + "1"}) is None
    assert traces.asgi_trace([(b"traceparent", f"00-{TRACE}-{PARENT}-0-1".encode())]) is None
    assert traces.asgi_trace([(b"traceparent", f"00-{TRACE}-{PARENT}+01".encode())]) is None
    # right in form, a zero id: noted, and dropped when read at the flush
    zeros = f"00-{'0' * 32}-{PARENT}-01"
    noted = traces.wsgi_trace({"HTTP_TRACEPARENT": zeros})
    assert noted == zeros and labels_of(noted) is None
    # a later version's header: noted, its fields read at the flush
    later = f"01-{TRACE}-{PARENT}-01-more"
    assert traces.asgi_trace([(b"traceparent", later.encode())]) == later.encode()


@pytest.mark.parametrize(
    "headers", [None, [(b"traceparent",)], [("traceparent", SAMPLED)], [(b"traceparent", None)], 3]
)
def test_headers_no_server_sends_are_no_trace_and_no_failure(headers: Any) -> None:
    assert traces.asgi_trace(headers) is None


@pytest.mark.parametrize("value", ["\udcff" * 55, "é" * 55, f"00-{TRACE}-{PARENT}-0\u0661", 7])
def test_a_wsgi_header_of_any_text_is_no_trace_and_no_failure(value: Any) -> None:
    assert traces.wsgi_trace({"HTTP_TRACEPARENT": value}) is None


@pytest.fixture(scope="module")
def tracer() -> trace.Tracer:
    provider = TracerProvider()
    return provider.get_tracer("tests")


def test_the_current_sampled_span_is_the_trace(tracer: trace.Tracer) -> None:
    assert traces.current_span() is None  # no span anywhere
    with tracer.start_as_current_span("request") as span:
        ids = span.get_span_context()
        noted = traces.current_span()
        assert noted is not None
        assert labels_of(noted) == trace_labels(f"{ids.trace_id:032x}", f"{ids.span_id:016x}")
        # the span wins over a header of another trace
        headers = [(b"traceparent", SAMPLED.encode())]
        assert labels_of(traces.asgi_trace(headers)) == labels_of(noted)  # type: ignore[arg-type]
    unsampled = SpanContext(int(TRACE, 16), int(PARENT, 16), False, TraceFlags(0))
    with trace.use_span(NonRecordingSpan(unsampled)):
        assert traces.current_span() is None
        # then a sampled header still makes it traced
        assert traces.asgi_trace([(b"traceparent", SAMPLED.encode())]) == SAMPLED.encode()
    invalid = SpanContext(0, 0, False, TraceFlags(1))
    with trace.use_span(NonRecordingSpan(invalid)):
        noted = traces.current_span()
        assert noted is not None and labels_of(noted) is None  # zero ids: no trace


class Odd:
    """Something else in the place of a span's context."""

    trace_id = "not a number"
    span_id = 1


@pytest.mark.parametrize("noted", [Odd(), object(), 3])
def test_a_foreign_object_is_no_trace(noted: Any) -> None:
    assert labels_of(noted) is None


label_text = st.text(string.ascii_letters + string.digits + ' :,"{}\\\n-é', max_size=20)


@given(
    st.one_of(
        st.tuples(
            st.text(HEX, min_size=32, max_size=32), st.text(HEX, min_size=16, max_size=16)
        ).map(lambda ids: trace_labels(ids[0], ids[1])),
        st.dictionaries(
            st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True), label_text,
            min_size=1, max_size=3,
        ).map(lambda d: tuple(sorted(d.items()))),
    ),
    st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(10**9), 10**9),
    st.integers(946_684_800_000, 4_102_444_800_000),
)  # fmt: skip
def test_a_member_gives_back_its_exemplar(labels: Any, value: float, millis: int) -> None:
    time = millis / 1000
    exemplar = Exemplar(labels, float(value), time)
    text = exemplars.encode(exemplar)
    back = exemplars.decode(slot_of(time), text)
    assert back == exemplar


def test_a_traced_requests_labels_are_written_compactly() -> None:
    text = exemplars.encode(Exemplar(LABELS, 0.0123, 1_700_000_000.5))
    assert text == f"20500:0.0123:t{TRACE}{PARENT}"
    other = exemplars.encode(Exemplar((("trace_id", "abc"),), 3.0, 1_700_000_000.0))
    assert other == '20000:3.0:{"trace_id":"abc"}'


@pytest.mark.parametrize(
    "text", ["x:1:t", "60000:1:t" + "0" * 48, "1:nope:t" + "0" * 48, "1:1:[1]", "1:1:{", "1"]
)
def test_what_was_not_written_so_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        exemplars.decode(1, text)


def test_a_millisecond_rounded_up_falls_in_its_minute() -> None:
    time = 1_700_000_039.9996  # 59.9996 s into its minute: 60.000 once kept to the ms
    back = exemplars.decode(slot_of(time), exemplars.encode(Exemplar(LABELS, 1.0, time)))
    assert back.time == 1_700_000_040.0 and slot_of(time) == 28_333_334


@pytest.mark.parametrize(
    ("labels", "reason"),
    [
        ({}, "invalid"),
        ({"1x": "a"}, "invalid_label"),
        ({"a": 1}, "invalid_label"),
        ({"trace_id": "x" * 121}, "too_long"),
    ],
)
def test_an_apps_labels_are_checked_as_prometheus_would(
    labels: dict[str, Any], reason: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        check_labels(labels)
    assert raised.value.reason == reason


def test_an_apps_labels_are_sorted() -> None:
    assert check_labels({"trace_id": "t", "span_id": "s"}) == (("span_id", "s"), ("trace_id", "t"))


def test_members_sort_by_minute_then_series() -> None:
    keys = KeySpace("P:", 4)
    first, last = keys.exemplar_slot(9, 'b{le="1"}'), keys.exemplar_slot(10, "a")
    assert first < last and first.startswith("0000000009:") and first.endswith(":")
    low, high = keys.lex_range_slot(first)  # "[" takes the bound in, "(" leaves it out
    assert low == "[" + first and high[0] == "("
    assert low[1:] <= first + "anything" < high[1:] and not low[1:] <= last < high[1:]
    low, high = keys.lex_range_slots(9, 9)
    assert low[1:] <= first + "x" < high[1:] and not last < high[1:]
    low, high = keys.lex_range_before(10)
    assert first < high[1:] <= last and low == "-"
    assert keys.parse_exemplar_member(first + "rest:more") == (
        9, keys.exemplar_digest('b{le="1"}'), "rest:more"
    )  # fmt: skip
    with pytest.raises(ValueError):
        keys.parse_exemplar_member("9:short:x")
    assert keys.exemplars(3) == "P:exemplars:{3}" and KeySpace().exemplars() == "exemplars:"


def test_time_to_slot() -> None:
    assert slot_of(119.999) == 1 and slot_of(120) == 2 and not math.isnan(slot_of(0))
