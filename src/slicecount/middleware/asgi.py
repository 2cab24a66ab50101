"""Pure ASGI middleware: counts every HTTP request of any ASGI app (Starlette, FastAPI, ...).

Not ``BaseHTTPMiddleware``: the status is caught by wrapping ``send``, streaming responses are
timed to their last body chunk, websocket scopes pass straight through, and lifespan passes
through with the Recorder flushed when the app finishes shutting down. A traced request's trace
(``traces``) is looked for when it ends, in the context of the app's last ``send``: the span an
OpenTelemetry middleware inside or around this one keeps current there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from slicecount.errors import extra_imports
from slicecount.middleware.routes import starlette_route
from slicecount.middleware.shell import InFlight, Options, RequestCounter, split_options
from slicecount.middleware.throttle import PASS, Outcome
from slicecount.recording.traces import asgi_trace
from slicecount.throttle.answers import Answer, Headers
from slicecount.throttle.clients import Peer

with extra_imports("asgi", "the ASGI middleware"):
    import anyio.to_thread

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack is 3.11+; only mypy reads it

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
RouteResolver = Callable[[Scope, str], "str | None"]
"""(scope after the app ran, the root_path the request arrived with) -> route template."""


class SliceCountMiddleware:
    """``app.add_middleware(SliceCountMiddleware)`` in Starlette/FastAPI, or wrap any ASGI app."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        route_resolver: RouteResolver = starlette_route,
        **options: Unpack[Options],
    ) -> None:
        self.app = app
        self.throttle, counting = split_options(options)
        self.counter = RequestCounter(**counting)
        self.route_resolver = route_resolver

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http":
            if kind == "lifespan":
                await self.app(scope, receive, self._lifespan_send(send))
            else:
                await self.app(scope, receive, send)
            return
        outcome = PASS if self.throttle is None else await self._throttled(scope)
        if self.counter.excluded(scope["path"]):
            if outcome.answer is not None:
                await _send_answer(outcome.answer, send)
            else:
                await self.app(scope, receive, _with_headers(send, outcome.headers))
            return

        exchange = _Exchange(self, scope, send)
        if outcome.answer is not None:
            await _send_answer(outcome.answer, exchange.send)
            return
        try:
            await self.app(scope, receive, _with_headers(exchange.send, outcome.headers))
        except BaseException:
            if not exchange.done:
                exchange.finish(exchange.status or 500)
            raise
        if not exchange.done:  # the app returned early (client gone, or it never answered)
            exchange.finish(exchange.status or 500)

    async def _throttled(self, scope: Scope) -> Outcome:
        assert self.throttle is not None
        # before the app runs: its routes walked (Starlette sets scope["app"] inside itself;
        # a middleware wrapping it from outside names the app it wraps)
        probe = (
            scope
            if "app" in scope or not hasattr(self.app, "routes")
            else {**scope, "app": self.app}
        )
        try:
            route = self.route_resolver(probe, scope.get("root_path", ""))
        except Exception:
            route = None
        method = scope.get("method", "")
        return await self.throttle.check_async(Peer.of_scope(scope), method, route)

    def _lifespan_send(self, send: Send) -> Send:
        async def lifespan_send(message: Message) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                if self.throttle is not None:  # its asyncio connections belong to this loop
                    await self.throttle.aclose()
                recorder = self.counter.source.get()
                if recorder is not None:  # write the last counts before the server exits
                    await anyio.to_thread.run_sync(recorder.flush)
            await send(message)

        return lifespan_send


async def _send_answer(answer: Answer, send: Send) -> None:
    status, headers, body = answer
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def _with_headers(send: Send, extra: Headers) -> Send:
    """``send`` adding the throttle's RateLimit-* headers to the response's start."""
    if not extra:
        return send
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in extra]

    async def send_with_headers(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", ()))
            present = {name.lower() for name, _ in headers}  # the view's own limit's first
            headers += [h for h in raw if h[0] not in present]
            message = {**message, "headers": headers}
        await send(message)

    return send_with_headers


_FINAL_KINDS = frozenset({"http.response.pathsend", "http.response.zerocopysend"})


class _Exchange(InFlight):
    """One HTTP request/response: wraps ``send`` to see the status and the last chunk."""

    __slots__ = (
        "asgi_scope",
        "done",
        "entry_app",
        "entry_root",
        "middleware",
        "status",
        "trailers",
        "upstream",
    )

    def __init__(self, middleware: SliceCountMiddleware, scope: Scope, upstream: Send) -> None:
        super().__init__(middleware.counter.track_queries)
        self.middleware = middleware
        self.asgi_scope = scope
        self.entry_root = scope.get("root_path", "")
        self.entry_app = scope.get("app")  # a mounted app sets its own: the walk starts here
        self.upstream = upstream
        self.status = 0
        self.trailers = False
        self.done = False

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.status = message["status"]
            self.trailers = bool(message.get("trailers", False))
            await self.upstream(message)
            return
        await self.upstream(message)
        if self.done:
            return
        if kind == "http.response.body":
            if message.get("more_body") or self.trailers:
                return
        elif kind == "http.response.trailers":
            if message.get("more_trailers"):
                return
        elif kind not in _FINAL_KINDS:
            return
        self.finish(self.status)

    def finish(self, status: int) -> None:
        self.done = True
        middleware, scope = self.middleware, self.asgi_scope
        if self.entry_app is not None and scope.get("app") is not self.entry_app:
            scope = {**scope, "app": self.entry_app}  # (a mounted FastAPI or Starlette app)
        try:
            route = middleware.route_resolver(scope, self.entry_root)
        except Exception:
            route = None
        counter = middleware.counter
        peer = Peer.of_scope(scope) if counter.unique_key is not None else None
        trace = asgi_trace(scope.get("headers", ())) if counter.exemplars else None
        counter.end(self, scope.get("method", ""), route, status, peer, trace)
