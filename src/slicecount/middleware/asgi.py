"""Pure ASGI middleware: counts every HTTP request of any ASGI app (Starlette, FastAPI, ...).

Not ``BaseHTTPMiddleware``: the status is caught by wrapping ``send``, streaming responses are
timed to their last body chunk, websocket scopes pass straight through, and lifespan passes
through with the Recorder flushed when the app finishes shutting down.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import Any

import anyio.to_thread

from slicecount.config import Settings
from slicecount.histogram import DEFAULT_COUNT_BUCKETS, DEFAULT_DURATION_BUCKETS
from slicecount.middleware._core import RequestMetrics
from slicecount.middleware.routes import starlette_route
from slicecount.recorder import Recorder
from slicecount.series import LabelValue

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
        recorder: Recorder | None = None,
        settings: Settings | None = None,
        exclude_paths: Iterable[str] = (),
        labels: Mapping[str, LabelValue] | None = None,
        buckets: Iterable[float] = DEFAULT_DURATION_BUCKETS,
        query_buckets: Iterable[float] = DEFAULT_COUNT_BUCKETS,
        route_resolver: RouteResolver = starlette_route,
    ) -> None:
        self.app = app
        self.metrics = RequestMetrics(
            recorder,
            settings,
            buckets=buckets,
            query_buckets=query_buckets,
            labels=labels,
            exclude_paths=exclude_paths,
        )
        self.route_resolver = route_resolver

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http":
            if kind == "lifespan":
                await self.app(scope, receive, self._lifespan_send(send))
            else:
                await self.app(scope, receive, send)
            return
        if self.metrics.excluded(scope["path"]):
            await self.app(scope, receive, send)
            return

        metrics = self.metrics
        entry_root = scope.get("root_path", "")
        inflight = metrics.begin()
        status = 0
        trailers = False
        done = False

        def finish(final_status: int) -> None:
            nonlocal done
            done = True
            try:
                route = self.route_resolver(scope, entry_root)
            except Exception:
                route = None
            metrics.end(inflight, scope.get("method", ""), route, final_status)

        async def timed_send(message: Message) -> None:
            nonlocal status, trailers
            kind = message["type"]
            if kind == "http.response.start":
                status = message["status"]
                trailers = bool(message.get("trailers", False))
            await send(message)
            if done:
                return
            if (
                (kind == "http.response.body" and not message.get("more_body") and not trailers)
                or (kind == "http.response.trailers" and not message.get("more_trailers"))
                or kind in ("http.response.pathsend", "http.response.zerocopysend")
            ):
                finish(status)

        try:
            await self.app(scope, receive, timed_send)
        except BaseException:
            if not done:
                finish(500 if not status else status)
            raise
        if not done:  # the app returned early (client gone, or it never answered)
            finish(status or 500)

    def _lifespan_send(self, send: Send) -> Send:
        async def lifespan_send(message: Message) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                recorder = self.metrics.source.get()
                if recorder is not None:  # write the last counts before the server exits
                    await anyio.to_thread.run_sync(recorder.flush)
            await send(message)

        return lifespan_send
