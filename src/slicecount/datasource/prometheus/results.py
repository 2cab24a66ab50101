"""The Prometheus API's JSON envelopes, field for field. Pure.

{"status":"success","data":{"resultType":"matrix","result":[{"metric":{...},
 "values":[[1700000000,"3"],...]}]},"infos":[...]}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slicecount.datasource.numbers import sample_texts
from slicecount.datasource.render import ENCODER, Fragment
from slicecount.promql.arrays import Block
from slicecount.promql.engine import Result, as_block, as_scalar, as_vector
from slicecount.promql.values import Series, Value, format_time, format_value

ERROR_STATUS = {"bad_data": 400, "execution": 422, "unavailable": 503, "timeout": 503}
ERROR_STATUS |= {"not_found": 404, "internal": 500, "canceled": 499, "unauthorized": 401}
"""Prometheus's error types and statuses; ``unauthorized`` is ours (Prometheus has no auth of
its own; Grafana shows any envelope's ``error``)."""


def success(data: Any, warnings: Sequence[str] = (), infos: Sequence[str] = ()) -> dict[str, Any]:
    body: dict[str, Any] = {"status": "success", "data": data}
    if warnings:
        body["warnings"] = list(warnings)
    if infos:
        body["infos"] = list(infos)
    return body


def error(kind: str, message: str) -> tuple[dict[str, Any], int]:
    return {"status": "error", "errorType": kind, "error": message}, ERROR_STATUS[kind]


def instant(result: Result, kind: str, t: float) -> dict[str, Any]:
    """``/api/v1/query``'s data: a vector, a scalar or a string at ``t``."""
    when = format_time(t)
    if isinstance(result, str):
        return {"resultType": "string", "result": [when, result]}
    if kind == "scalar":
        return {"resultType": "scalar", "result": [when, format_value(as_scalar(result)[0])]}
    return {
        "resultType": "vector",
        "result": [
            {"metric": s.labels, "value": [when, format_value(s.values[0])]}
            for s in as_vector(result)
            if s.values[0] is not None
        ],
    }


def matrix(result: Result, kind: str, times: Sequence[float]) -> dict[str, Any]:
    """``/api/v1/query_range``'s data: every series with its samples (a scalar becomes one
    series without labels, as in Prometheus), sorted by labels. The samples are written as
    JSON text in bulk (``numbers``), spliced into the answer by ``render``."""
    if kind == "scalar":
        lines = Block.of([Series({}, list[Value](as_scalar(result)))], len(times))
    else:
        lines = as_block(result, len(times))
    stamps = [ENCODER.encode(format_time(t)) for t in times]
    texts = sample_texts(lines.values)
    steps = len(times)
    complete = "[" + ",".join([f'[{stamp},"%s"]' for stamp in stamps]) + "]"
    out = []
    present = lines.present.tolist()
    order = sorted(range(len(lines)), key=lambda i: sorted(lines.labels[i].items()))
    for i in order:
        row, mask = texts[i * steps : (i + 1) * steps], present[i]
        if all(mask):
            values = complete % tuple(row)
        elif any(mask):
            found = zip(stamps, row, mask, strict=True)
            values = "[" + ",".join([f'[{t},"{v}"]' for t, v, m in found if m]) + "]"
        else:
            continue
        out.append('{"metric":' + ENCODER.encode(lines.labels[i]) + ',"values":' + values + "}")
    return {"resultType": "matrix", "result": Fragment.array(out)}
