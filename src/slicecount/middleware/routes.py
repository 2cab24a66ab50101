"""Route templates of requests that Starlette or FastAPI routed.

Starlette's router leaves the matched route in ``scope["route"]``; its ``path`` is the template
(``/users/{id}``). Recent FastAPI (0.165 here) keeps included routers whole
(``_IncludedRouter``) and leaves the route's own path there, without the prefixes of the
routers it was included by: the full template is its
``scope["fastapi"]["effective_route_context"].path_format``. Behind
a ``Mount`` the inner router overwrites these keys, so the mount templates are found again by
walking the app's routes. Only duck typing here: no import of Starlette unless a mount or an
older version without ``scope["route"]`` needs the walk.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping, Sequence
from typing import Any

_CONVERTER = re.compile(r"\{([^{}:]+):[^{}]*\}")

Scope = MutableMapping[str, Any]


def starlette_route(scope: Scope, entry_root_path: str) -> str | None:
    """The route template of a request Starlette (or FastAPI) has routed, else None."""
    inner = _routed(scope)
    if inner is not None and scope.get("root_path", "") == entry_root_path:
        return inner
    app = scope.get("app")
    routes = getattr(app, "routes", None)
    if not routes:
        return None
    probe = {
        "type": scope["type"],
        "path": scope["path"],
        "root_path": entry_root_path,
        "method": scope.get("method", "GET"),
        "path_params": {},
    }
    return _walk(routes, probe, "", inner)


def _routed(scope: Scope) -> str | None:
    """The template the innermost router that routed the request recorded (relative to its
    app: a mount's prefix is not in it)."""
    fastapi = scope.get("fastapi")
    if isinstance(fastapi, dict):
        path = getattr(fastapi.get("effective_route_context"), "path_format", None)
        if isinstance(path, str):
            return _clean(path)
    route = scope.get("route")
    return _template(route) if route is not None else None


def _walk(
    routes: Sequence[Any], scope: dict[str, Any], prefix: str, inner: str | None
) -> str | None:
    from starlette.routing import Match

    partial: str | None = None
    for route in routes:
        match, child = route.matches(scope)
        if match is Match.NONE:
            continue
        path = _template(route)
        nested = getattr(route, "routes", None)
        if match is Match.FULL and nested and child.get("root_path") is not None:
            # A mounted router: the route is whatever matches inside it (or nothing).
            return _walk(nested, {**scope, **child}, prefix + (path or ""), inner)
        if path is None:  # FastAPI's included router: the route it chose is in the scope
            if match is Match.FULL and inner is not None:
                return prefix + inner
            continue
        if match is Match.FULL:
            return prefix + path
        partial = partial or prefix + path  # e.g. 405: the route exists, the method does not
    return partial


_templates: dict[str, str] = {}
_MAX_TEMPLATES = 4096


def _template(route: Any) -> str | None:
    path = getattr(route, "path", None)
    if not isinstance(path, str):
        return None
    return _clean(path)


def _clean(path: str) -> str:
    template = _templates.get(path)
    if template is None:
        # "/users/{id:int}" -> "/users/{id}": the converter is part of the code, not the route.
        template = _CONVERTER.sub(r"{\1}", path) if ":" in path else path
        if len(_templates) < _MAX_TEMPLATES:  # keyed by the path string: same path, same answer
            _templates[path] = template
    return template
