"""Starlette and FastAPI: the pure ASGI middleware, labelling requests with route templates.

    from slicecount.middleware.starlette import SliceCountMiddleware
    app.add_middleware(SliceCountMiddleware, exclude_paths=["/health"])

Routes are labelled ``/users/{id}``, mounts and sub-routers resolved; a request that matched
no route is ``<unmatched>``. Lifespan shutdown flushes the Recorder.
"""

from slicecount.middleware.asgi import SliceCountMiddleware
from slicecount.middleware.routes import starlette_route

__all__ = ["SliceCountMiddleware", "starlette_route"]
