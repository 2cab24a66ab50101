"""Request bodies read as strict JSON: what Python's json accepts but Grafana never sends is a
QueryError (400), not a 500 later. Pure: no Redis."""

from __future__ import annotations

import pytest

from slicecount.datasource.body import MAX_JSON_DEPTH, deeper_than, parse_json
from slicecount.errors import QueryError


def test_ordinary_bodies_parse_as_json_does() -> None:
    raw = b'{"range": {"from": 1.5e3, "to": 2000}, "targets": [{"target": "x"}], "a": null}'
    assert parse_json(raw) == {
        "range": {"from": 1500.0, "to": 2000},
        "targets": [{"target": "x"}],
        "a": None,
    }
    nested = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH  # exactly at the limit
    assert deeper_than(parse_json(nested), MAX_JSON_DEPTH - 1)


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b'{"a": NaN}', "contains NaN"),
        (b'{"a": [Infinity]}', "contains Infinity"),
        (b'{"a": -Infinity}', "contains -Infinity"),
        (b'{"a": 1e400}', "number 1e400 in the request body is out of range"),
        (b'{"a": -1e400}', "out of range"),
        (b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1), "more than 64 deep"),
        (b'{"a":' * 100 + b"1" + b"}" * 100, "more than 64 deep"),
        (b"[" * 100_000, "more than 64 deep"),  # json.loads itself would hit RecursionError
        (b'{"a": ' + b"9" * 5000 + b"}", "not valid JSON"),
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_what_grafana_never_sends_is_refused(raw: bytes, fragment: str) -> None:
    with pytest.raises(QueryError, match=fragment.replace("[", r"\[")):
        parse_json(raw)


def test_depth_is_measured_without_recursion() -> None:
    deep: list[object] = []
    inner = deep
    for _ in range(5000):  # deeper than Python's recursion limit
        inner.append([])
        inner = inner[0]  # type: ignore[assignment]
    assert deeper_than(deep, 4999) and not deeper_than(deep, 5001)
    assert not deeper_than(5, 0) and not deeper_than("[[[", 0)
    assert deeper_than({"a": {"b": 1}}, 1) and not deeper_than({"a": {"b": [1]}}, 3)
