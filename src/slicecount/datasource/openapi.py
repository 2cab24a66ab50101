"""``/openapi.json``: the datasource's endpoints described as OpenAPI 3.0. Pure."""

from __future__ import annotations

from typing import Any

from slicecount import __version__
from slicecount.config import Settings
from slicecount.datasource.limits import Limits
from slicecount.datasource.protocol import FUNCTIONS

_TIME = {"type": "string", "description": "ISO-8601 (2024-06-06T09:05:02.250Z) or epoch ms"}
_RANGE = {
    "type": "object",
    "required": ["from", "to"],
    "properties": {"from": _TIME, "to": _TIME, "raw": {"type": "object"}},
}
_FILTER = {
    "type": "object",
    "required": ["key", "value"],
    "properties": {
        "key": {"type": "string"},
        "operator": {"type": "string", "enum": ["=", "!=", "=~", "!~", "<", ">"]},
        "value": {"type": "string"},
    },
}
_ERROR = {
    "description": "invalid request or limit exceeded",
    "content": {
        "application/json": {
            "schema": {"type": "object", "properties": {"message": {"type": "string"}}}
        }
    },
}


def _json_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _ok(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "200": {"description": description, "content": {"application/json": {"schema": schema}}},
        "400": _ERROR,
        "422": _ERROR,
        "503": {"description": "redis unavailable"},
    }


def openapi_document(settings: Settings, limits: Limits) -> dict[str, Any]:
    """The document, with the configured precisions and limits filled in."""
    target = {
        "type": "object",
        "required": ["target"],
        "properties": {
            "target": {"type": "string", "example": "sum by (status) (rate(http.requests))"},
            "refId": {"type": "string"},
            "type": {"type": "string", "enum": ["timeserie", "table"]},
            "hide": {"type": "boolean"},
            "payload": {
                "type": "object",
                "properties": {
                    "function": {"type": "string", "enum": list(FUNCTIONS)},
                    "precision": {
                        "type": "string",
                        "enum": ["auto", *(str(p) for p in settings.precisions)],
                    },
                    "group_by": {"type": "array", "items": {"type": "string"}},
                },
                "additionalProperties": {
                    "description": "label filter (regex), one value or a list",
                    "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                },
            },
        },
    }
    query = {
        "type": "object",
        "required": ["range", "targets"],
        "properties": {
            "range": _RANGE,
            "intervalMs": {"type": "number", "minimum": 0},
            "maxDataPoints": {"type": "integer", "minimum": 0},
            "targets": {"type": "array", "items": target, "maxItems": limits.max_targets},
            "adhocFilters": {"type": "array", "items": _FILTER},
            "filters": {"type": "array", "items": _FILTER},
        },
    }
    datapoints = {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "target": {"type": "string"},
                "refId": {"type": "string"},
                "datapoints": {"type": "array", "items": {"type": "array"}},
            },
        },
    }
    strings = {"type": "array", "items": {"type": "string"}}
    objects = {"type": "array", "items": {"type": "object"}}
    paths: dict[str, Any] = {
        "/": {"get": {"summary": "health check (Grafana's Save & test; a browser, whose "
                      "Accept names text/html, gets the built-in page)", "responses": {
            "200": {"description": "a query would work: the token is right, Redis answers"},
            "401": {**_ERROR, "description": "the token is missing or wrong"},
            "503": {**_ERROR, "description": "redis unavailable"}}}},
        "/readyz": {"get": {"summary": "readiness probe, open: 200 when Redis answers",
                            "responses": {"200": {"description": "ready"},
                                          "503": {**_ERROR, "description": "redis unavailable"}}}},
        "/livez": {"get": {"summary": "liveness probe, open: the process serves (no Redis call)",
                           "responses": {"200": {"description": "alive"}}}},
        "/query": {"post": {
            "summary": "time series or tables for the visible targets of a panel",
            "requestBody": _json_body(query),
            "responses": _ok("one frame per series (or a table per target)", datapoints)}},
        "/search": {"post": {
            "summary": "metric names (legacy metric picker and variable queries)",
            "requestBody": _json_body({"type": "object", "properties": {
                "target": {"type": "string"}}}),
            "responses": _ok("metric names", strings)}},
        "/metrics": {"post": {
            "summary": "simpod metric picker with builder payloads",
            "requestBody": _json_body({"type": "object", "properties": {
                "metric": {"type": "string"}, "payload": {"type": "object"}}}),
            "responses": _ok("metrics and their payload definitions", objects)}},
        "/metric-payload-options": {"post": {
            "summary": "options of one builder payload",
            "requestBody": _json_body({"type": "object", "required": ["metric", "name"],
                "properties": {"metric": {"type": "string"}, "name": {"type": "string"},
                               "payload": {"type": "object"}}}),
            "responses": _ok("options", objects)}},
        "/variable": {"post": {
            "summary": "template variable values: metrics(), label_names(m), label_values(m, l)",
            "requestBody": _json_body({"type": "object", "properties": {
                "payload": {"type": "object", "properties": {"target": {"type": "string"}}},
                "range": _RANGE}}),
            "responses": _ok("values as __text/__value", objects)}},
        "/tag-keys": {"post": {
            "summary": "label names for ad-hoc filters",
            "requestBody": _json_body({"type": "object"}),
            "responses": _ok("label names", objects)}},
        "/tag-values": {"post": {
            "summary": "values of one label for ad-hoc filters",
            "requestBody": _json_body({"type": "object", "required": ["key"], "properties": {
                "key": {"type": "string"}}}),
            "responses": _ok("label values", objects)}},
        "/annotations": {"post": {
            "summary": "legacy annotations (deploy markers recorded with slicecount annotate)",
            "requestBody": _json_body({"type": "object", "required": ["range"], "properties": {
                "range": _RANGE, "annotation": {"type": "object", "properties": {
                    "query": {"type": "string"}}}}}),
            "responses": _ok("annotations", objects)}},
    }  # fmt: skip
    paths.update(_prometheus_paths())
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "slicecount datasource",
            "version": __version__,
            "description": (
                "Grafana JSON datasource (SimpleJSON and simpod-json-datasource) and the "
                "Prometheus HTTP query API (/api/v1/..., for Grafana's built-in Prometheus "
                "datasource) answering from slicecount's Redis counters. Limits: body "
                f"{limits.max_body_bytes} bytes, {limits.max_targets} targets, "
                f"{limits.max_series} series per query, {limits.max_points} points per series; "
                f"work budget of a request: {limits.max_request_points} points read (series x "
                f"points per series, summed over its targets), {limits.max_computed_points} "
                f"computed by its functions and operators, and {limits.max_answer_points} in "
                "its answer (series x times, and their labels; 422 past any)."
            ),
        },
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def _prometheus_paths() -> dict[str, Any]:
    """The Prometheus API's endpoints, in their GET form (POST takes the same parameters as
    an ``application/x-www-form-urlencoded`` body)."""

    def param(name: str, example: str, required: bool = False) -> dict[str, Any]:
        schema = {"type": "string", "example": example}
        return {"name": name, "in": "query", "required": required, "schema": schema}

    query = param("query", "sum by (status) (rate(http_requests_total[5m]))", True)
    start, end = param("start", "1700000000"), param("end", "1700003600")
    match = {
        "name": "match[]",
        "in": "query",
        "schema": {"type": "array", "items": {"type": "string", "example": "http_requests_total"}},
        "style": "form",
        "explode": True,
    }
    envelope = {
        "type": "object",
        "required": ["status"],
        "properties": {
            "status": {"type": "string", "enum": ["success", "error"]},
            "data": {},
            "errorType": {"type": "string"},
            "error": {"type": "string"},
            "warnings": {"type": "array", "items": {"type": "string"}},
            "infos": {"type": "array", "items": {"type": "string"}},
        },
    }
    answer = {"application/json": {"schema": envelope}}
    responses = {
        "200": {"description": "success envelope", "content": answer},
        "400": {"description": "bad_data", "content": answer},
        "422": {"description": "execution error or limit exceeded", "content": answer},
        "503": {"description": "redis unavailable", "content": answer},
    }

    def get(summary: str, *params: dict[str, Any]) -> dict[str, Any]:
        return {"get": {"summary": summary, "parameters": list(params), "responses": responses}}

    return {
        "/api/v1/query": get("PromQL at one time", query, param("time", "1700000000")),
        "/api/v1/query_range": get(
            "PromQL at start + k * step up to end",
            query,
            {**start, "required": True},
            {**end, "required": True},
            param("step", "15", True),
        ),
        "/api/v1/labels": get("label names", start, end, match),
        "/api/v1/label/{name}/values": get(
            "values of one label (__name__: metric names)",
            {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
            start,
            end,
            match,
        ),
        "/api/v1/series": get("label sets matching match[]", start, end, match),
        "/api/v1/metadata": get("type and help per metric family"),
        "/api/v1/status/buildinfo": get("the Prometheus API version served"),
        "/api/v1/rules": get("rules (none: Grafana evaluates alerts)"),
    }
