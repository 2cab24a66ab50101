"""Flask integration: ``SliceCount(app)`` or ``SliceCount().init_app(app)``.

Wraps ``app.wsgi_app`` with the WSGI middleware and labels each request with its URL rule
template (``/users/<int:id>``); a request that matched no rule is ``<unmatched>``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from slicecount.errors import extra_imports
from slicecount.middleware.mapping import UNMATCHED
from slicecount.middleware.shell import Options, reusable
from slicecount.middleware.wsgi import ROUTE_KEY, RouteResolver, SliceCountMiddleware

with extra_imports("flask", "the Flask middleware"):
    from flask import Flask, Request
    from werkzeug.routing import Rule

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack is 3.11+; only mypy reads it


def _rule_recording_request(base: type[Request]) -> type[Request]:
    """A subclass of the app's request class that copies the matched URL rule into the WSGI
    environ the moment Flask's routing assigns it: no hook to run, no proxy to resolve, and it
    is set even when a before_request hook answers early."""

    def get_rule(self: Request) -> Rule | None:
        return self.__dict__.get("_slicecount_rule")

    def set_rule(self: Request, rule: Rule | None) -> None:
        self.__dict__["_slicecount_rule"] = rule
        if rule is not None:
            self.environ[ROUTE_KEY] = rule.rule

    namespace = {"url_rule": property(get_rule, set_rule), "__module__": __name__}
    return type(f"SliceCount{base.__name__}", (base,), namespace)


def _match_rule(app: Flask) -> RouteResolver:
    """The rule the request class recorded; when there is none (no rule matched, or the
    app's request class was replaced after ``init_app``) match the URL map again."""

    def resolve(environ: dict[str, Any]) -> str | None:
        route = environ.get(ROUTE_KEY)
        if route is not None:
            return route  # type: ignore[no-any-return]
        try:
            rule, _ = app.url_map.bind_to_environ(environ).match(return_rule=True)
        except Exception:
            return UNMATCHED
        return str(rule.rule)

    return resolve


class SliceCount:
    """Counts requests, durations and queries per request of a Flask app."""

    def __init__(self, app: Flask | None = None, **options: Unpack[Options]) -> None:
        self.options = reusable(options)
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
        app.request_class = _rule_recording_request(app.request_class)
        app.extensions["slicecount"] = self
