"""``/openapi.json``: the datasource's endpoints described as OpenAPI 3.0. Pure.

The document is data (``openapi.json`` beside this module); what depends on the package and
its configuration is filled in here: the version, the precisions and builder functions a
target may name, and the limits."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from slicecount import __version__
from slicecount.config import Settings
from slicecount.config.request_limits import Limits
from slicecount.datasource.simpod.protocol import FUNCTIONS


@cache
def _document() -> str:
    return resources.files(__package__).joinpath("openapi.json").read_text(encoding="utf-8")


def openapi_document(settings: Settings, limits: Limits) -> dict[str, Any]:
    """The document, with the configured precisions and limits filled in."""
    document: dict[str, Any] = json.loads(_document())
    info = document["info"]
    info["version"] = __version__
    info["description"] += (
        f" Limits: body {limits.max_body_bytes} bytes, {limits.max_targets} targets, "
        f"{limits.max_series} series per query, {limits.max_points} points per series; "
        f"work budget of a request: {limits.max_request_points} points read (series x "
        f"points per series, summed over its targets), {limits.max_computed_points} "
        f"computed by its functions and operators, and {limits.max_answer_points} in "
        "its answer (series x times, and their labels; 422 past any)."
    )
    body = document["paths"]["/query"]["post"]["requestBody"]["content"]["application/json"]
    targets = body["schema"]["properties"]["targets"]
    targets["maxItems"] = limits.max_targets
    payload = targets["items"]["properties"]["payload"]["properties"]
    payload["function"]["enum"] = list(FUNCTIONS)
    payload["precision"]["enum"] = ["auto", *(str(p) for p in settings.precisions)]
    return document
