"""WSGI middleware: counts every request of any WSGI app (Flask, Django, Falcon, ...).

The duration covers the whole body iteration, to its last chunk; the status comes from
``start_response``. An app that raises is counted as 500 and the exception propagates
unchanged; a client that goes away (or a body never read to its end) is counted when the
server closes the body. A traced request's trace (``traces``) is looked for in
``start_response``, which the app calls while its OpenTelemetry span is current (Flask's
instrumentation ends it before the body is read).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

from slicecount.core.exemplars import Trace
from slicecount.middleware.shell import InFlight, Options, RequestCounter, split_options
from slicecount.middleware.throttle import PASS, Outcome
from slicecount.recording import traces
from slicecount.throttle.answers import REASONS, Answer, Headers
from slicecount.throttle.clients import Peer

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack is 3.11+; only mypy reads it

Environ = dict[str, Any]
ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]
StartResponse = Callable[..., Callable[[bytes], object]]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]
RouteResolver = Callable[[Environ], "str | None"]

ROUTE_KEY = "slicecount.route"
"""Environ key where a framework integration leaves the matched route template."""


def environ_route(environ: Environ) -> str | None:
    """The default resolver: the template a framework integration put in the environ."""
    route = environ.get(ROUTE_KEY)
    return route if isinstance(route, str) else None


class SliceCountMiddleware:
    """``app.wsgi_app = SliceCountMiddleware(app.wsgi_app)``; see ``slicecount.middleware.flask``
    for route templates in Flask."""

    def __init__(
        self,
        app: WSGIApp,
        *,
        route_resolver: RouteResolver = environ_route,
        **options: Unpack[Options],
    ) -> None:
        self.app = app
        self.throttle, counting = split_options(options)
        if self.throttle is not None and route_resolver is environ_route:
            if self.throttle.routes or self.throttle.exempt:
                raise TypeError(
                    "limits per route and exempt= need a route_resolver that names the route "
                    "before the app runs (the Flask extension has one); without one, give one "
                    "limit text: it counts a client across every route"
                )
            self.throttle.scope = "shared"  # no route is known before the app: say so
        self.counter = RequestCounter(**counting)
        self.route_resolver = route_resolver

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        outcome = PASS if self.throttle is None else self._throttled(environ)
        if self.counter.excluded(environ.get("PATH_INFO", "")):
            if outcome.answer is not None:
                return _answer(outcome.answer, start_response)
            return self.app(environ, _with_headers(start_response, outcome.headers))
        call = _Call(self, environ, start_response)
        if outcome.answer is not None:
            call.body = _answer(outcome.answer, call.start_response)
            return call
        try:
            call.body = self.app(environ, _with_headers(call.start_response, outcome.headers))
        except BaseException:
            call.finish(error=True)
            raise
        return call

    def _throttled(self, environ: Environ) -> Outcome:
        assert self.throttle is not None
        try:
            route = self.route_resolver(environ)
        except Exception:
            route = None
        method = environ.get("REQUEST_METHOD", "")
        return self.throttle.check(Peer.of_environ(environ), method, route)


def _answer(answer: Answer, start_response: StartResponse) -> list[bytes]:
    status, headers, body = answer
    reason = REASONS.get(status, "")
    start_response(f"{status} {reason}", [*headers, ("Content-Length", str(len(body)))])
    return [body]


def _with_headers(start_response: StartResponse, extra: Headers) -> StartResponse:
    """``start_response`` adding the throttle's RateLimit-* headers (when there are any)."""
    if not extra:
        return start_response

    def start(
        status: str, headers: list[tuple[str, str]], exc_info: ExcInfo | None = None
    ) -> Callable[[bytes], object]:
        present = {name.lower() for name, _ in headers}  # a view's own limit said them first
        return start_response(
            status, [*headers, *(h for h in extra if h[0].lower() not in present)], exc_info
        )

    return start


class _Call(InFlight):
    """One request: its start_response, then its body, recorded when the server closes it."""

    __slots__ = ("body", "environ", "middleware", "status", "trace", "traced", "upstream")

    def __init__(
        self, middleware: SliceCountMiddleware, environ: Environ, upstream: StartResponse
    ) -> None:
        super().__init__(middleware.counter.track_queries)
        self.middleware = middleware
        self.environ = environ
        self.upstream = upstream
        self.status = 0
        self.body: Iterable[bytes] = ()
        self.traced = False  # looked for (in start_response, or at the end without one)
        self.trace: Trace | None = None

    def start_response(
        self, status: str, headers: list[tuple[str, str]], exc_info: ExcInfo | None = None
    ) -> Callable[[bytes], object]:
        try:
            self.status = int(status[:3])
        except (TypeError, ValueError):
            self.status = 0
        middleware = self.middleware  # (None once the request was counted)
        if not self.traced and middleware is not None and middleware.counter.exemplars:
            self.traced = True
            self.trace = traces.wsgi_trace(self.environ)
        if exc_info is None:
            return self.upstream(status, headers)
        return self.upstream(status, headers, exc_info)

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self.body
        except BaseException as exc:
            # GeneratorExit: the server stopped early (client gone); close() records that.
            if not isinstance(exc, GeneratorExit):
                self.finish(error=True)
            raise
        # read to its end: counted now, not at close() (a test client reads a response and
        # may never close it); close() then only closes the body
        self.finish()

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            self.finish()

    def finish(self, error: bool = False) -> None:
        middleware = self.middleware
        if middleware is None:
            return  # close() after an error already counted, or close() called twice
        self.middleware = None  # type: ignore[assignment]
        status = 500 if error or not self.status else self.status
        try:
            route = middleware.route_resolver(self.environ)
        except Exception:
            route = None
        counter = middleware.counter
        peer = Peer.of_environ(self.environ) if counter.unique_key is not None else None
        if not self.traced and counter.exemplars:
            self.trace = traces.wsgi_trace(self.environ)
        counter.end(self, self.environ.get("REQUEST_METHOD", ""), route, status, peer, self.trace)
