"""The Prometheus API's routes: GET or POST on every endpoint, parameters from the query
string and the form merged, errors as Prometheus' envelopes with its status codes."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from slicecount import errors
from slicecount.datasource.prometheus import api, lookups, query_exemplars, results
from slicecount.datasource.prometheus.params import Params
from slicecount.promql.values import EvaluationError
from slicecount.reads.reader import Reader

with errors.extra_imports("datasource", "the datasource"):
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute, Route

logger = logging.getLogger("slicecount.datasource")

PREFIX = "/api/v1"
Handler = Callable[[Reader, Params], Awaitable[Any]]
ENDPOINTS: dict[str, Handler] = {
    "/query": api.query,
    "/query_range": api.query_range,
    "/labels": lookups.labels,
    "/series": lookups.series,
    "/metadata": lookups.metadata,
    "/status/buildinfo": lookups.buildinfo,
    "/rules": lookups.rules,
    "/query_exemplars": query_exemplars.query_exemplars,
    "/label/{name}/values": lookups.label_values,
}
METHODS = ["GET", "POST"]


def routes(reader: Reader, respond: Callable[[Any, int], Response]) -> list[BaseRoute]:
    """Every endpoint under ``/api/v1``; ``respond(body, status)`` encodes an answer."""

    def endpoint(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            return await answer(request, reader, handler, respond)

        return run

    return [
        Route(PREFIX + path, endpoint(handler), methods=METHODS)
        for path, handler in ENDPOINTS.items()
    ]


async def answer(
    request: Request, reader: Reader, handler: Handler, respond: Callable[[Any, int], Response]
) -> Response:
    try:
        params = await read_params(request, reader.limits.max_body_bytes)
        return respond(await handler(reader, params), 200)
    except (errors.LimitExceeded, EvaluationError) as exc:
        return respond(*results.error("execution", str(exc)))
    except (errors.QueryError, errors.ConfigurationError) as exc:
        return respond(*results.error("bad_data", str(exc)))
    except errors.StoreError as exc:
        logger.warning("redis unavailable: %s", exc)
        return respond(*results.error("unavailable", f"redis unavailable: {exc.failure}"))
    except Exception as exc:  # a bug: answered here, so the connection stays open
        logger.exception("prometheus api failed on %s", request.url.path)
        return respond(*results.error("internal", f"internal error: {type(exc).__name__}"))


async def read_params(request: Request, max_bytes: int) -> Params:
    """The form's parameters (``application/x-www-form-urlencoded``), then the query
    string's, and the path's."""
    pairs: list[tuple[str, str]] = []
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if request.method == "POST" and kind == "application/x-www-form-urlencoded":
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes:
                raise errors.QueryError(f"request body is more than the limit of {max_bytes} bytes")
            chunks.append(chunk)
        try:
            text = b"".join(chunks).decode("utf-8")
            pairs += parse_qsl(text, keep_blank_values=True, strict_parsing=False)
        except (UnicodeDecodeError, ValueError) as exc:
            raise errors.QueryError(f"cannot parse the form: {exc}") from None
    pairs += request.query_params.multi_items()
    return Params(pairs, request.path_params)
