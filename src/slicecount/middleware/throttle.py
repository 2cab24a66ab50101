"""``Throttle``: which limits a request of a route meets, against whose key, and the answer.

The shells (WSGI, ASGI, Flask, the ``limit`` decorator) ask ``check()`` / ``check_async()``
with the request's peer, method and route template before the app runs; a refused request is
answered here (429, or 503 when Redis fails and the limiter fails closed) and counted as
``http.throttled{method,route,limit}``; the request middleware counts its response as any other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from slicecount.errors import ConfigurationError
from slicecount.middleware.mapping import KNOWN_METHODS, OTHER_METHOD, UNMATCHED
from slicecount.throttle.answers import Answer, Headers, rate_headers, refusal
from slicecount.throttle.clients import KeyFunction, Peer, check_names, client_address
from slicecount.throttle.decision import Decision
from slicecount.throttle.limits import Limit, parse_limits

if TYPE_CHECKING:
    from slicecount.recording.recorder import Recorder
    from slicecount.throttle.limiter import Limiter, Verdict

logger = logging.getLogger("slicecount")

THROTTLED_METRIC = "http.throttled"
"""Counter of refused requests, labels method, route, limit."""
SCOPES = ("route", "shared")
OnThrottled = Callable[[Peer, "Decision | None", int], Answer]
"""(peer, the decision or None when Redis failed, 429 or 503) -> (status, headers, body)."""


@dataclass(frozen=True)
class Outcome:
    """``answer``: send this instead of running the app; else add ``headers`` to its response."""

    answer: Answer | None = None
    headers: Headers = field(default_factory=list)


PASS = Outcome()


class Throttle:
    """Rate limits for the routes of an app (see ``slicecount.limit`` for one view).

    ``limits``: limit text for every route ("100/minute; 10/second"), or a mapping from route
    template to limit text (routes not in it are not limited); ``exempt``: route templates
    never limited; ``key``: who a request counts against (``clients.py``); ``scope``:
    "route" (a key's count per route) or "shared" (one count across the routes);
    ``headers``: RateLimit-* headers on admitted responses too; ``on_throttled``: build the
    refusal yourself; ``limiter``: where and how to count (default: one process-wide
    ``Limiter`` from the ``SLICECOUNT_*`` settings); ``recorder``: where ``http.throttled``
    goes (default: the process-wide Recorder). Bad limit text is a ValueError now."""

    def __init__(
        self,
        limits: str | Mapping[str, str] | None = None,
        *,
        exempt: Iterable[str] = (),
        key: KeyFunction = client_address,
        scope: str = "route",
        headers: bool = False,
        on_throttled: OnThrottled | None = None,
        limiter: Limiter | None = None,
        recorder: Recorder | None = None,
        namespace: str = "",
    ) -> None:
        if scope not in SCOPES:
            raise ConfigurationError(f"scope must be one of {SCOPES}, got {scope!r}")
        if not callable(key):
            raise ConfigurationError(f"key must be a function of the request, got {key!r}")
        self.default: tuple[Limit, ...] | None = None
        self.routes: dict[str, tuple[Limit, ...]] = {}
        if isinstance(limits, str):
            self.default = parse_limits(limits)
        elif isinstance(limits, Mapping):
            for route in check_names(limits, "the keys of limits"):
                try:
                    self.routes[route] = parse_limits(limits[route])
                except ValueError as exc:
                    raise ConfigurationError(f"limits of route {route!r}: {exc}") from None
        elif limits is not None:
            raise ConfigurationError(f"limits must be text or a mapping, got {limits!r}")
        self.exempt = frozenset(check_names(exempt, "exempt"))
        self.key, self.scope, self.headers = key, scope, headers
        self.namespace = namespace  # keeps apart the counts of two throttles on one route
        self.on_throttled = on_throttled or (
            lambda peer, decision, status: refusal(status, decision)
        )
        # made now: bad SLICECOUNT_* settings are an error at start-up, not in a request
        self._limiter = limiter
        if limiter is None:
            default_limiter()
        self.recorder = recorder
        self._warned = False

    @property
    def limiter(self) -> Limiter:
        """The limiter given, else the process-wide one when first asked (at the first
        request: a decorator is made when its module is imported, maybe before the app
        configured slicecount, through ``slicecount.configure`` or Django's settings)."""
        limiter = self._limiter
        if limiter is None:
            limiter = self._limiter = default_limiter()
        return limiter

    async def aclose(self) -> None:
        """Close the limiter's asyncio connections (an ASGI app's shutdown: they belong to
        its event loop); the limiter makes new ones if it is used again."""
        await self.limiter.aclose()

    def limits_for(self, route: str | None) -> tuple[Limit, ...] | None:
        if route in self.exempt:
            return None
        return self.routes.get(route, self.default) if route is not None else self.default

    def check(self, peer: Peer, method: str, route: str | None) -> Outcome:
        """What to do with a request (blocking; at most about the limiter's deadline)."""
        asked = self._asked(peer, route)
        if asked is None:
            return PASS
        limits, identity = asked
        try:
            verdict = self.limiter.check(limits, identity)
        except Exception as exc:  # the limiter fails open on Redis errors; anything else too
            self._warn("the throttle failed, serving the request: %s", exc)
            return PASS
        return self._outcome(peer, method, route, verdict)

    async def check_async(self, peer: Peer, method: str, route: str | None) -> Outcome:
        """``check()`` without blocking the event loop."""
        asked = self._asked(peer, route)
        if asked is None:
            return PASS
        limits, identity = asked
        try:
            verdict = await self.limiter.check_async(limits, identity)
        except Exception as exc:
            self._warn("the throttle failed, serving the request: %s", exc)
            return PASS
        return self._outcome(peer, method, route, verdict)

    def _asked(self, peer: Peer, route: str | None) -> tuple[tuple[Limit, ...], str] | None:
        limits = self.limits_for(route)
        if not limits:
            return None
        try:
            key = self.key(peer)
        except Exception as exc:  # a key function's bug must not fail the request
            self._warn("the throttle's key function raised: %s", exc)
            return None
        if key is None:
            return None
        where = route or UNMATCHED if self.scope == "route" else "*"
        return limits, f"{self.namespace}{where}|{key}"

    def _outcome(self, peer: Peer, method: str, route: str | None, verdict: Verdict) -> Outcome:
        decision = verdict.decision
        if verdict.status is None:
            return Outcome(None, rate_headers(decision) if self.headers and decision else [])
        if decision is not None:
            self._count(method, route, decision.limit)
        try:
            return Outcome(self.on_throttled(peer, decision, verdict.status))
        except Exception as exc:
            self._warn("on_throttled raised, answering the default: %s", exc)
            return Outcome(refusal(verdict.status, decision))

    def _count(self, method: str, route: str | None, limit: Limit) -> None:
        recorder = self.recorder
        try:
            if recorder is None:
                from slicecount.recording.default import get_recorder

                recorder = get_recorder()
        except Exception:  # bad SLICECOUNT_* settings: throttle all the same
            return
        labels = {
            "method": method if method in KNOWN_METHODS else OTHER_METHOD,
            "route": route or UNMATCHED,
            "limit": limit.text,
        }
        recorder.add(THROTTLED_METRIC, 1, labels)

    def _warn(self, message: str, exc: Exception) -> None:
        if not self._warned:
            self._warned = True
            logger.error(message, exc)


_defaults: dict[str, Limiter] = {}
"""The process-wide Limiters, by the settings they were made on (``repr``: settings hold a
mapping); one a configuration the process had, so that none is dropped with its connections
open."""


def default_limiter() -> Limiter:
    """The process-wide Limiter: on the settings of the process-wide Recorder once one is
    made (``slicecount.configure``, the Django ``SLICECOUNT`` setting), else on the
    ``SLICECOUNT_*`` environment."""
    from slicecount.recording import default

    recorder = default.current()
    on = recorder.store.settings if recorder is not None else None
    key = repr(on)
    limiter = _defaults.get(key)
    if limiter is None:
        from slicecount.throttle.limiter import Limiter

        limiter = _defaults[key] = Limiter(on)
    return limiter
