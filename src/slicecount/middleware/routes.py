"""Route templates of requests that Starlette or FastAPI routed.

Starlette's router leaves the matched route in ``scope["route"]``; its ``path`` is the template
(``/users/{id}``). Behind a ``Mount`` the inner router overwrites that key, so the mount
templates are found again by walking the app's routes. Only duck typing here: no import of
Starlette unless an older version without ``scope["route"]`` needs the full walk.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping, Sequence
from typing import Any

_CONVERTER = re.compile(r"\{([^{}:]+):[^{}]*\}")

Scope = MutableMapping[str, Any]


def starlette_route(scope: Scope, entry_root_path: str) -> str | None:
    """The route template of a request Starlette (or FastAPI) has routed, else None."""
    route = scope.get("route")
    if route is not None and scope.get("root_path", "") == entry_root_path:
        return _template(route)
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
    return _walk(routes, probe, "")


def _walk(routes: Sequence[Any], scope: dict[str, Any], prefix: str) -> str | None:
    from starlette.routing import Match

    partial: str | None = None
    for route in routes:
        match, child = route.matches(scope)
        if match is Match.NONE:
            continue
        path = _template(route) or ""
        inner = getattr(route, "routes", None)
        if match is Match.FULL and inner and child.get("root_path") is not None:
            # A mounted router: the route is whatever matches inside it (or nothing).
            return _walk(inner, {**scope, **child}, prefix + path)
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
    template = _templates.get(path)
    if template is None:
        # "/users/{id:int}" -> "/users/{id}": the converter is part of the code, not the route.
        template = _CONVERTER.sub(r"{\1}", path) if ":" in path else path
        if len(_templates) < _MAX_TEMPLATES:  # keyed by the path string: same path, same answer
            _templates[path] = template
    return template
