"""Django: ``"slicecount.middleware.django.SliceCountMiddleware"`` first in ``MIDDLEWARE``.

    SLICECOUNT = {"redis_url": "redis://localhost:6379/0", "track_queries": True}

Counts every request as the other shells do (``http.requests{method,route,status}``, the
``http.request.duration`` histogram ...), under WSGI and ASGI, for sync and async views: the
middleware is sync- and async-capable, so Django hands it the request in its own mode. The
route label is the URL pattern Django matched, joined across ``include()``, with a leading
``/``: ``/users/<int:id>/``; a ``re_path`` keeps its regex (``/articles/(?P<year>[0-9]{4})/$``),
an ``i18n_patterns`` prefix is ``<language>`` (``/<language>/about/``), and a request that
matched nothing is ``<unmatched>``. A view that raises is counted as the 500 Django renders.
A streaming response is counted when the server closes it (its last chunk sent).

``SLICECOUNT`` in the Django settings takes the ``slicecount.Settings`` keywords (they
configure the process-wide Recorder, so ``slicecount.event`` in a view counts into the same
Redis) and the middleware's options (``track_queries``, ``labels``, ``limits``, ...);
``SLICECOUNT_*`` variables apply to the settings it does not give. A bad value raises
``ImproperlyConfigured`` when Django loads the middleware, naming its key.

With ``track_queries`` every statement on every database alias is counted
(``db.queries{operation}``, ``db.query.duration``, and per request ``http.request.queries``)
by an execute wrapper Django runs around each query (``connection.execute_wrappers``: no
database backend is swapped), put on each connection as it opens.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import fields
from typing import Any, cast

from slicecount.config import Settings
from slicecount.core.exemplars import Trace
from slicecount.core.histogram import DEFAULT_DURATION_BUCKETS
from slicecount.errors import extra_imports
from slicecount.middleware.mapping import QueryMapping
from slicecount.middleware.shell import (
    InFlight,
    Options,
    RequestCounter,
    current_request,
    split_options,
)
from slicecount.middleware.throttle import Outcome
from slicecount.recording import default, lifecycle
from slicecount.recording.source import RecorderSource
from slicecount.recording.traces import wsgi_trace
from slicecount.throttle.answers import Answer, Headers
from slicecount.throttle.clients import Peer

with extra_imports("django", "the Django middleware"):
    from asgiref.sync import iscoroutinefunction, markcoroutinefunction
    from django.conf import settings as django_settings
    from django.conf.urls.i18n import is_language_prefix_patterns_used
    from django.core.exceptions import ImproperlyConfigured
    from django.db import connections
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.backends.signals import connection_created
    from django.http import HttpRequest, HttpResponse, HttpResponseBase

logger = logging.getLogger("slicecount")

SETTING = "SLICECOUNT"
"""The Django setting holding slicecount's settings and the middleware's options."""
LANGUAGE = "<language>"
"""What an ``i18n_patterns`` language prefix reads as in a route label."""
MAX_ROUTES = 4096
"""Route patterns whose labels are remembered (a site has a bounded number of them)."""

GetResponse = Callable[[HttpRequest], HttpResponseBase]
AsyncGetResponse = Callable[[HttpRequest], Awaitable[HttpResponseBase]]
_SETTINGS_KEYS = frozenset(f.name for f in fields(Settings) if f.init)
_OPTION_KEYS = frozenset(Options.__optional_keys__)


class SliceCountMiddleware:
    """Counts the requests of a Django site; put it first in ``MIDDLEWARE`` (it then times
    the other middleware too, and sees the response Django's handler made of an exception)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: GetResponse | AsyncGetResponse) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)
        options = configured_options()
        try:
            self.throttle, counting = split_options(options)
            self.counter = RequestCounter(**counting)
        except (ValueError, TypeError) as exc:  # a bad option: which one
            raise ImproperlyConfigured(_blame(exc, _given(), _middleware)) from None
        self.track_queries = self.counter.track_queries
        if self.track_queries:
            count_queries(self.counter.source)
        if self.throttle is not None:  # Django calls it once the URL is resolved
            self.process_view = self._throttled_async if self.is_async else self._throttled

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        if self.counter.excluded(request.path_info):
            return self.get_response(request)
        inflight = InFlight(self.track_queries)
        try:
            response = cast(GetResponse, self.get_response)(request)
        except BaseException:  # Django renders exceptions: only a broken handler gets here
            self._end(inflight, request, 500, self._trace(request))
            raise
        return self._answered(inflight, request, response)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        if not _chained:
            _chain_signals()
        if self.counter.excluded(request.path_info):
            return await cast(AsyncGetResponse, self.get_response)(request)
        inflight = InFlight(self.track_queries)
        try:
            response = await cast(AsyncGetResponse, self.get_response)(request)
        except BaseException:
            self._end(inflight, request, 500, self._trace(request))
            raise
        return self._answered(inflight, request, response)

    def _answered(
        self, inflight: InFlight, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        headers: Headers | None = getattr(request, "_slicecount_headers", None)
        if headers:
            for name, value in headers:
                if name not in response:  # a view's own limit said it first
                    response[name] = value
        inflight.leave()  # its queries were this request's; a streaming body's are not
        # its trace: the span current as the response comes back (an OpenTelemetry middleware
        # around this one keeps it), else its traceparent (META: WSGI's and ASGI's alike)
        trace = self._trace(request)
        if not response.streaming:
            self._end(inflight, request, response.status_code, trace)
            return response
        close = response.close
        counted: list[bool] = []

        def close_then_count() -> None:  # the server closes it after its last chunk
            try:
                close()
            finally:
                if not counted:  # once, however often it is closed
                    counted.append(True)
                    self._end(inflight, request, response.status_code, trace)

        response.close = close_then_count
        return response

    def _trace(self, request: HttpRequest) -> Trace | None:
        return wsgi_trace(request.META) if self.counter.exemplars else None

    def _end(
        self, inflight: InFlight, request: HttpRequest, status: int, trace: Trace | None = None
    ) -> None:
        route = route_label(request)
        peer = Peer.of_environ(request.META) if self.counter.unique_key is not None else None
        self.counter.end(inflight, request.method or "", route, status, peer, trace)
        if _stopping.is_set():  # the server is about to exit past the exit hooks
            lifecycle.flush_all()

    def _throttled(
        self, request: HttpRequest, view: object, args: object, kwargs: object
    ) -> HttpResponse | None:
        assert self.throttle is not None
        method = request.method or ""
        return _outcome(
            request,
            self.throttle.check(Peer.of_environ(request.META), method, route_label(request)),
        )

    async def _throttled_async(
        self, request: HttpRequest, view: object, args: object, kwargs: object
    ) -> HttpResponse | None:
        assert self.throttle is not None
        peer, method = Peer.of_environ(request.META), request.method or ""
        return _outcome(
            request, await self.throttle.check_async(peer, method, route_label(request))
        )


_stopping = threading.Event()
"""Set when the ASGI server took a SIGTERM or SIGINT: counts are written as they are made."""
_chained: list[bool] = []


def _chain_signals() -> None:
    """Write the counts before an ASGI server that shut down on a signal raises it again.
    Django's ASGI handler has no lifespan to flush at, and uvicorn re-raises the SIGTERM it
    shut down on once it has restored the handlers it found, which skips every exit hook: so
    its handlers are wrapped (once, from the main thread, where the server put them) to flush
    what is buffered and have every request ended during the shutdown write its counts."""
    _chained.append(True)
    if threading.current_thread() is not threading.main_thread():
        return
    for number in (signal.SIGTERM, signal.SIGINT):
        server = signal.getsignal(number)
        if callable(server):  # a server's own handler (SIG_DFL: nothing to chain before)
            signal.signal(number, _stopping_then(server))


def _stopping_then(server: Callable[[int, Any], Any]) -> Callable[[int, Any], Any]:
    def stop(number: int, frame: Any) -> Any:
        _stopping.set()
        threading.Thread(target=lifecycle.flush_all, name="slicecount-last-flush").start()
        return server(number, frame)

    return stop


def _outcome(request: HttpRequest, outcome: Outcome) -> HttpResponse | None:
    if outcome.answer is not None:
        return answer(outcome.answer)
    if outcome.headers:
        request._slicecount_headers = outcome.headers
    return None


def answer(refusal: Answer) -> HttpResponse:
    """A throttle's refusal (429, or 503 failing closed) as a Django response."""
    status, headers, body = refusal
    return HttpResponse(body, status=status, headers=dict(headers))


# -- route labels -------------------------------------------------------------------------------

_labels: dict[tuple[str, str | None], str] = {}


def route_label(request: HttpRequest) -> str | None:
    """The route template of a request Django resolved (``/users/<int:id>/``), else None."""
    match = getattr(request, "resolver_match", None)
    route = getattr(match, "route", None)
    if not isinstance(route, str):
        return None
    language = getattr(request, "LANGUAGE_CODE", None)
    key = (route, language if isinstance(language, str) else None)
    label = _labels.get(key)
    if label is None:
        label = template(route, key[1], _i18n_prefixed(getattr(request, "urlconf", None)))
        if len(_labels) < MAX_ROUTES:
            _labels[key] = label
    return label


def template(route: str, language: str | None = None, i18n: bool = False) -> str:
    """The label of a matched ``route``: a leading ``/``, a regex's ``^`` anchor dropped, and
    with ``i18n`` the active ``language``'s prefix made ``<language>``."""
    route = route.removeprefix("^")
    if i18n and language and route.startswith(language + "/"):
        route = f"{LANGUAGE}/{route[len(language) + 1 :]}"
    return "/" + route


_i18n: dict[object, bool] = {}


def _i18n_prefixed(urlconf: object) -> bool:
    """Whether ``urlconf`` (None: ``ROOT_URLCONF``) has ``i18n_patterns``: its routes begin
    with the language (remembered: URLconfs are code)."""
    found = _i18n.get(urlconf)
    if found is None:
        try:
            root = urlconf or django_settings.ROOT_URLCONF
            found = bool(is_language_prefix_patterns_used(cast(str, root))[0])
        except Exception:  # an URLconf that cannot be loaded: Django says so itself
            found = False
        _i18n[urlconf] = found
    return found


# -- settings -----------------------------------------------------------------------------------


def configured_settings() -> Settings | None:
    """The ``slicecount.Settings`` the ``SLICECOUNT`` Django setting gives (``SLICECOUNT_*``
    variables filling in the rest), or None when it gives none (the environment's then).
    ImproperlyConfigured names a bad key. A Celery worker of a Django site passes it on:
    ``instrument(app, settings=configured_settings())``."""
    given = _given()
    keywords = {k: v for k, v in given.items() if k in _SETTINGS_KEYS}
    if not keywords:
        return None
    try:
        return Settings.from_env(**keywords)
    except (ValueError, TypeError) as exc:
        raise ImproperlyConfigured(
            _blame(exc, keywords, lambda one: Settings.from_env(**one))
        ) from None


def configured_options() -> Options:
    """The middleware's options from the ``SLICECOUNT`` Django setting, with the Recorder of
    its settings (the process-wide one, configured with them)."""
    options: dict[str, Any] = {k: v for k, v in _given().items() if k in _OPTION_KEYS}
    settings = configured_settings()
    if settings is not None and "recorder" not in options:
        options["recorder"] = default.use(settings)
    return cast(Options, options)


def _middleware(options: dict[str, Any]) -> object:
    """What the middleware builds of its options (to find the one it refused)."""
    if not options.keys() & _OPTION_KEYS:
        return None  # a setting: checked with the Settings
    return RequestCounter(**split_options(cast(Options, options))[1])


def _given() -> dict[str, Any]:
    given = getattr(django_settings, SETTING, None) or {}
    if not isinstance(given, Mapping):
        raise ImproperlyConfigured(f"{SETTING} must be a dict, got {given!r}")
    unknown = sorted(set(given) - _SETTINGS_KEYS - _OPTION_KEYS, key=str)
    if unknown:
        known = ", ".join(sorted(_SETTINGS_KEYS | _OPTION_KEYS))
        raise ImproperlyConfigured(f"{SETTING}[{unknown[0]!r}] is not a setting ({known})")
    return dict(given)


def _blame(
    exc: Exception, given: Mapping[str, Any], build: Callable[[dict[str, Any]], object]
) -> str:
    """``SLICECOUNT['<key>']: <why>``, the key found by building with each alone (a refusal of
    two keys together names both)."""
    for key, value in given.items():
        try:
            build({key: value})
        except (ValueError, TypeError) as alone:
            return f"{SETTING}[{key!r}]: {alone}"
    keys = ", ".join(repr(k) for k in given)
    return f"{SETTING}[{keys}]: {exc}"


# -- queries ------------------------------------------------------------------------------------


class QueryWrapper:
    """The execute wrapper Django runs around every statement of a connection it is on."""

    def __init__(self, source: RecorderSource) -> None:
        self._warned = False
        self.use(source)

    def use(self, source: RecorderSource) -> None:
        """Count into ``source`` from now on (the last middleware loaded: a test client's
        new handler, a site's settings changed)."""
        mapping = QueryMapping(source.namer(), DEFAULT_DURATION_BUCKETS)
        source.watch(mapping.forget)
        self.source, self.mapping = source, mapping

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.record(sql, time.perf_counter() - started)

    def record(self, statement: str, seconds: float) -> None:
        """Count one statement, and into the request being served (``track_queries``).
        Never raises."""
        scope = current_request.get()
        if scope is not None:
            scope.queries += 1
        source, mapping = self.source, self.mapping
        recorder = source.fixed or source.get()
        if recorder is None:
            return
        try:
            text = statement if isinstance(statement, str) else ""
            recorder.add_ids(mapping.entries(text, seconds))
        except Exception as exc:  # never let counting reach the query
            recorder.refuse(exc)
            if not self._warned:
                self._warned = True
                logger.exception("slicecount could not record a query: %s", exc)

    def attach(self, connection: BaseDatabaseWrapper) -> None:
        """Outermost, once: a wrapper the app enters later is popped before it (Django's
        ``execute_wrapper`` pops the last one at its exit)."""
        if self not in connection.execute_wrappers:
            connection.execute_wrappers.insert(0, self)


_wrapper: list[QueryWrapper] = []


def count_queries(source: RecorderSource) -> QueryWrapper:
    """Count every statement on every database connection of this process into ``source``
    (one wrapper a process: a later middleware's source replaces an earlier one's)."""
    if _wrapper:
        _wrapper[0].use(source)
        return _wrapper[0]
    wrapper = QueryWrapper(source)
    _wrapper.append(wrapper)

    def created(sender: object, connection: BaseDatabaseWrapper, **_: object) -> None:
        wrapper.attach(connection)

    connection_created.connect(created, weak=False, dispatch_uid="slicecount.queries")
    for connection in connections.all(initialized_only=True):  # opened before: this thread's
        wrapper.attach(connection)
    return wrapper
