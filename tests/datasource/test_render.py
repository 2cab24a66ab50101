"""Answers encoded as Starlette's JSONResponse would, and where it would fail. Pure."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.responses import JSONResponse

from slicecount.datasource.render import Fragment, render

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
