"""What a throttled request is answered, and the headers an admitted one may carry. Pure.

Headers as the IETF draft and the ``limits`` family write them: ``RateLimit-Limit`` (the
deciding limit's amount), ``RateLimit-Remaining``, ``RateLimit-Reset`` (whole seconds to the
end of its window, rounded up) and, on a 429, ``Retry-After`` (whole seconds, rounded up).
"""

from __future__ import annotations

import json
import math

from slicecount.throttle.decision import Decision

Headers = list[tuple[str, str]]
Answer = tuple[int, Headers, bytes]
"""(status, headers, body): what the shells send for a refused request."""
REASONS = {429: "Too Many Requests", 503: "Service Unavailable"}


def rate_headers(decision: Decision) -> Headers:
    return [
        ("RateLimit-Limit", str(decision.limit.amount)),
        ("RateLimit-Remaining", str(decision.remaining)),
        ("RateLimit-Reset", str(max(0, math.ceil(decision.reset)))),
    ]


def refusal(status: int, decision: Decision | None) -> Answer:
    """The default answer: a 429 naming the limit and when to retry, or a 503 when Redis did
    not answer and the throttle fails closed."""
    if decision is None:
        body = {"error": "rate limiting is unavailable", "status": status}
        return status, [("Content-Type", "application/json"), ("Retry-After", "1")], _json(body)
    body = {
        "error": "too many requests",
        "limit": str(decision.limit),
        "retry_after": decision.retry_after,
    }
    headers = [
        ("Content-Type", "application/json"),
        ("Retry-After", str(decision.retry_after)),
        *rate_headers(decision),
    ]
    return status, headers, _json(body)


def _json(body: object) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()
