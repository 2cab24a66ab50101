"""Answers encoded as Starlette's JSONResponse would, and where it would fail. Pure."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.responses import JSONResponse

from slicecount.datasource.render import PIECE_CHARS, Fragment, pieces, render

ANSWERS: list[Any] = [
    [],
    {"status": "ok"},
    [{"target": 'a{b="c"}', "refId": "A", "tags": {"b": "é ☃ 𝄞"}, "datapoints": [[1, 2]]}],
    [{"type": "table", "rows": [[None, 0.5, 1e16, -3]]}, "x", 5],
]


@pytest.mark.parametrize("answer", ANSWERS)
def test_the_bytes_of_jsonresponse(answer: Any) -> None:
    assert render(answer) == JSONResponse(answer).body


def test_fragments_are_spliced_in_as_they_are() -> None:
    frames = [
        {"target": "a", "refId": "A", "datapoints": Fragment("[[1,2]]")},
        {"type": "table", "rows": []},
        {"target": "b", "refId": "é", "datapoints": Fragment("[]")},
    ]
    plain = [
        {"target": "a", "refId": "A", "datapoints": [[1, 2]]},
        {"type": "table", "rows": []},
        {"target": "b", "refId": "é", "datapoints": []},
    ]
    assert render(frames) == JSONResponse(plain).body
    with pytest.raises(TypeError):  # never quoted by mistake
        json.dumps(frames[0])


def test_a_lone_surrogate_is_escaped_not_an_error() -> None:
    answer = [{"refId": "\ud800", "annotation": {"name": "a\udfffb"}, "ok": "é"}]
    with pytest.raises(UnicodeEncodeError):
        JSONResponse(answer)  # what answered 500 before
    body = render(answer)
    assert body == '[{"refId":"\\ud800","annotation":{"name":"a\\udfffb"},"ok":"é"}]'.encode()
    assert json.loads(body) == answer
    spliced = render([{"refId": "\udc00", "datapoints": Fragment("[]")}])
    assert json.loads(spliced) == [{"refId": "\udc00", "datapoints": []}]


def test_not_finite_is_refused() -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        render([1.0, float("inf")])


@pytest.mark.slow
def test_a_large_answer_is_encoded_in_pieces_never_joined() -> None:
    """Pieces of about PIECE_CHARS each (a fragment's part is never cut), the same bytes as
    one encoding: an answer of 20 MB is never one string holding the interpreter lock (here
    3.4 MB: more than ten pieces)."""
    points = ",".join(f"[{i},{i * 1000}]" for i in range(20_000))
    frames = [
        {"target": f"s{i}", "refId": "é", "datapoints": Fragment(f"[{points}]")} for i in range(12)
    ]
    matrix = {"status": "success", "data": {"result": Fragment.array(['{"a":1}'] * 3)}}
    assert render(matrix) == b'{"status":"success","data":{"result":[{"a":1},{"a":1},{"a":1}]}}'
    found = pieces(frames)
    assert b"".join(found) == render(frames)
    assert json.loads(render(frames))[11]["datapoints"][19_999] == [19_999, 19_999_000]
    assert len(found) > 10
    part = len(points) + 2
    assert all(len(p) < PIECE_CHARS + part + 100 for p in found)
    assert pieces([]) == [b"[]"] and pieces({"ok": Fragment("[]")}) == [b'{"ok":[]}']
