"""Requests sent straight to a WSGI app in-process, as a server would (body read and closed):
the per-request time the WSGI benchmarks compare."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

StartResponse = Callable[..., Any]


def ignore(status: str, headers: Any, exc_info: Any = None) -> Any:
    """A ``start_response`` that keeps nothing."""
    return None


def time_wsgi(
    app: Callable[..., Iterable[bytes]],
    environ: dict[str, Any],
    requests: int,
    start_response: StartResponse = ignore,
    after: Callable[[], object] | None = None,
) -> float:
    """µs a request: ``requests`` times ``environ``, each answer read to its end and closed,
    then ``after()`` (a flush the measured middleware owes) inside the timed region."""
    started = time.perf_counter()
    for _ in range(requests):
        body = app(dict(environ), start_response)
        for _chunk in body:
            pass
        close = getattr(body, "close", None)
        if close is not None:
            close()
    if after is not None:
        after()
    return (time.perf_counter() - started) / requests * 1e6
