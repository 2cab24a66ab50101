"""``slicecount.limit("5/minute")``: a rate limit on one Flask view, Starlette/FastAPI
endpoint or Django view (a function, or a class-based view's method), sync or async.

A Flask view is limited inside its request context; a Starlette endpoint takes the request
(FastAPI: declare a ``request: Request`` parameter, else the decorator raises TypeError at
once, naming the endpoint); a Django view is handed its ``HttpRequest``. A refused request
is answered 429 with ``Retry-After`` and the ``RateLimit-*`` headers (``headers=True`` puts
those on admitted responses too, when the view returns a response object or, in Flask,
anything ``make_response`` takes); with the request middleware around the app it is counted
in ``http.requests`` with status 429 besides ``http.throttled``.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar, cast

from slicecount.middleware.routes import starlette_route
from slicecount.middleware.throttle import OnThrottled, Outcome, Throttle
from slicecount.throttle.answers import Answer, Headers
from slicecount.throttle.clients import KeyFunction, Peer

F = TypeVar("F", bound=Callable[..., Any])
VIEW = "view:"
"""The decorator's counts live apart from a middleware's on the same route."""


def limit(
    text: str,
    *,
    key: KeyFunction | None = None,
    scope: str | None = None,
    headers: bool | None = None,
    on_throttled: OnThrottled | None = None,
    throttle: Throttle | None = None,
) -> Callable[[F], F]:
    """Limit the decorated view to ``text`` ("5/minute", "100/hour; 10/second") per ``key``
    (default: the client address); bad text is a ValueError now, at import. ``throttle``
    gives every other option at once (its key, limiter, recorder...). The view's counts are
    its own: a middleware limit on the same route is counted apart and applies too."""
    given = {"key": key, "scope": scope, "headers": headers, "on_throttled": on_throttled}
    if throttle is None:
        options = {name: value for name, value in given.items() if value is not None}
        guard = Throttle(text, namespace=VIEW, **options)  # type: ignore[arg-type]
    elif any(value is not None for value in given.values()):
        raise TypeError("give key=, scope=, headers= and on_throttled= to the Throttle")
    else:
        guard = Throttle(
            text,
            key=throttle.key,
            scope=throttle.scope,
            headers=throttle.headers,
            on_throttled=throttle.on_throttled,
            limiter=throttle.limiter,
            recorder=throttle.recorder,
            namespace=VIEW,
        )

    def decorate(view: F) -> F:
        check_request_findable(view)
        if inspect.iscoroutinefunction(view):

            @functools.wraps(view)
            async def limited_async(*args: Any, **kwargs: Any) -> Any:
                request = _starlette_request(args, kwargs)
                django = None if request is not None else _django_request(args)
                if django is not None:
                    outcome = await guard.check_async(*_django_call(django))
                    if outcome.answer is not None:
                        return _django_answer(outcome.answer)
                    return _django_headers(await view(*args, **kwargs), outcome.headers)
                if request is None:  # a Flask async view (its own loop each request)
                    outcome = _flask_check(guard, view)
                    if outcome.answer is not None:
                        return _flask_answer(outcome.answer)
                    return _flask_headers(await view(*args, **kwargs), outcome.headers)
                outcome = await guard.check_async(*_starlette_call(request))
                if outcome.answer is not None:
                    return _starlette_answer(outcome.answer)
                return _starlette_headers(await view(*args, **kwargs), outcome.headers)

            return cast(F, limited_async)

        @functools.wraps(view)
        def limited(*args: Any, **kwargs: Any) -> Any:
            request = _starlette_request(args, kwargs)
            django = None if request is not None else _django_request(args)
            if django is not None:
                outcome = guard.check(*_django_call(django))
                if outcome.answer is not None:
                    return _django_answer(outcome.answer)
                return _django_headers(view(*args, **kwargs), outcome.headers)
            if request is None:
                outcome = _flask_check(guard, view)
                if outcome.answer is not None:
                    return _flask_answer(outcome.answer)
                return _flask_headers(view(*args, **kwargs), outcome.headers)
            outcome = guard.check(*_starlette_call(request))  # a sync endpoint: a worker thread
            if outcome.answer is not None:
                return _starlette_answer(outcome.answer)
            return _starlette_headers(view(*args, **kwargs), outcome.headers)

        return cast(F, limited)

    return decorate


REQUEST_TYPES = ("Request", "HTTPConnection", "WebSocket")
"""Starlette's (and FastAPI's) classes a parameter may be annotated with to be handed the
request."""
ASGI_PACKAGES = frozenset({"starlette", "fastapi"})
FLASK_PACKAGES = frozenset({"flask", "werkzeug", "quart"})


def check_request_findable(view: Callable[..., Any]) -> None:
    """TypeError now if ``view`` is a Starlette/FastAPI endpoint that is never handed its
    request (FastAPI passes it only to a parameter annotated ``Request``): such an endpoint
    would answer 500 on every call. A Flask view finds its request in the context; when the
    module shows no framework, or both, the check is left to the first call."""
    try:
        parameters = inspect.signature(view).parameters.values()
    except (TypeError, ValueError):  # a builtin or an odd callable: nothing to read
        return
    for parameter in parameters:
        annotation = parameter.annotation
        if annotation is inspect.Parameter.empty:
            if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
                return  # Starlette hands the request as the first argument (or a Flask URL part)
            continue
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        if text.rpartition(".")[2] in REQUEST_TYPES:
            return
    frameworks = _frameworks(getattr(inspect.unwrap(view), "__globals__", {}))
    flask_missing = importlib.util.find_spec("flask") is None
    if frameworks & FLASK_PACKAGES or not (frameworks & ASGI_PACKAGES or flask_missing):
        return
    name = f"{getattr(view, '__module__', '?')}.{getattr(view, '__qualname__', view)}"
    raise TypeError(
        f"slicecount.limit on {name}: the endpoint takes no request, so the limit cannot "
        "find its client; add a parameter `request: Request` (from fastapi or starlette)"
    )


def _frameworks(names: dict[str, Any]) -> set[str]:
    """The top-level packages of the modules, classes and objects a module holds."""
    found = set()
    for value in names.values():
        if isinstance(value, ModuleType):
            module = value.__name__
        elif isinstance(value, type) or callable(value):
            module = getattr(value, "__module__", None) or ""
        else:
            module = type(value).__module__
        found.add(module.partition(".")[0])
    return found


def _flask_check(guard: Throttle, view: Callable[..., Any]) -> Outcome:
    unlimitable = TypeError(
        f"slicecount.limit on {view.__qualname__}: no Flask request context and no "
        "Starlette Request argument (FastAPI: declare a `request: Request` parameter)"
    )
    try:
        from flask import has_request_context, request
    except ModuleNotFoundError:  # a Starlette or FastAPI install: the request is missing
        raise unlimitable from None
    if not has_request_context():
        raise unlimitable
    rule = request.url_rule
    return guard.check(
        Peer.of_environ(request.environ), request.method, rule.rule if rule else None
    )


def _flask_answer(answer: Answer) -> Any:
    from flask import Response

    status, headers, body = answer
    return Response(body, status, headers)


def _flask_headers(result: Any, extra: Headers) -> Any:
    if not extra:
        return result
    from flask import make_response

    response = make_response(result)
    for name, value in extra:
        response.headers[name] = value
    return response


def _starlette_request(args: Any, kwargs: Any) -> Any:
    try:
        from starlette.requests import HTTPConnection
    except ImportError:  # Flask only
        return None
    for value in (*args, *kwargs.values()):
        if isinstance(value, HTTPConnection):
            return value
    return None


def _starlette_call(request: Any) -> tuple[Peer, str, str | None]:
    scope = request.scope
    route = starlette_route(scope, scope.get("root_path", ""))
    return Peer.of_scope(scope), scope.get("method", ""), route


def _django_request(args: Any) -> Any:
    """The ``HttpRequest`` of a Django view: its first argument, or a class-based view
    method's second (after ``self``)."""
    if "django" not in sys.modules:  # no Django loaded: not a Django view
        return None
    from django.http import HttpRequest

    for value in args[:2]:
        if isinstance(value, HttpRequest):
            return value
    return None


def _django_call(request: Any) -> tuple[Peer, str, str | None]:
    from slicecount.middleware.django import route_label

    return Peer.of_environ(request.META), request.method or "", route_label(request)


def _django_answer(answer: Answer) -> Any:
    from slicecount.middleware.django import answer as django_answer

    return django_answer(answer)


def _django_headers(response: Any, extra: Headers) -> Any:
    from django.http import HttpResponseBase

    if extra and isinstance(response, HttpResponseBase):
        for name, value in extra:
            response[name] = value
    return response


def _starlette_answer(answer: Answer) -> Any:
    from starlette.responses import Response

    status, headers, body = answer
    return Response(body, status, headers=dict(headers))


def _starlette_headers(response: Any, extra: Headers) -> Any:
    if extra and hasattr(response, "headers") and hasattr(response, "status_code"):
        for name, value in extra:
            response.headers[name] = value
    return response
