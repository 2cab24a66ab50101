"""Flask integration: ``SliceCount(app)`` or ``SliceCount().init_app(app)``.

Wraps ``app.wsgi_app`` with the WSGI middleware and labels each request with its URL rule
template (``/users/<int:id>``); a request that matched no rule is ``<unmatched>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from flask import Flask, request

from slicecount.config import Settings
from slicecount.histogram import DEFAULT_COUNT_BUCKETS, DEFAULT_DURATION_BUCKETS
from slicecount.middleware._core import UNMATCHED
from slicecount.middleware.wsgi import ROUTE_KEY, RouteResolver, SliceCountMiddleware
from slicecount.recorder import Recorder
from slicecount.series import LabelValue


def _remember_rule() -> None:
    rule = request.url_rule
    request.environ[ROUTE_KEY] = rule.rule if rule is not None else UNMATCHED


def _match_rule(app: Flask) -> RouteResolver:
    """Fallback when the before_request hook did not run (an earlier hook answered)."""

    def resolve(environ: dict[str, Any]) -> str | None:
        route = environ.get(ROUTE_KEY)
        if isinstance(route, str):
            return route
        try:
            rule, _ = app.url_map.bind_to_environ(environ).match(return_rule=True)
        except Exception:
            return None
        return str(rule.rule)

    return resolve


class SliceCount:
    """Counts requests, durations and queries per request of a Flask app."""

    def __init__(
        self,
        app: Flask | None = None,
        *,
        recorder: Recorder | None = None,
        settings: Settings | None = None,
        exclude_paths: Iterable[str] = (),
        labels: Mapping[str, LabelValue] | None = None,
        buckets: Iterable[float] = DEFAULT_DURATION_BUCKETS,
        query_buckets: Iterable[float] = DEFAULT_COUNT_BUCKETS,
    ) -> None:
        self.options: dict[str, Any] = {
            "recorder": recorder,
            "settings": settings,
            "exclude_paths": tuple(exclude_paths),
            "labels": labels,
            "buckets": tuple(buckets),
            "query_buckets": tuple(query_buckets),
        }
        self.middleware: SliceCountMiddleware | None = None
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Instrument ``app`` (once; a second call on the same app does nothing)."""
        if "slicecount" in app.extensions:
            return
        self.middleware = SliceCountMiddleware(
            app.wsgi_app, route_resolver=_match_rule(app), **self.options
        )
        app.wsgi_app = self.middleware  # type: ignore[method-assign]
        # First, so that an auth hook answering early cannot hide the route.
        app.before_request_funcs.setdefault(None, []).insert(0, _remember_rule)
        app.extensions["slicecount"] = self
