"""An example Starlette app instrumented with slicecount (used by the demo and the tests).

SLICECOUNT_REDIS_URL=redis://127.0.0.1:6379/0 uvicorn --app-dir examples starlette_app:app
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import slicecount
from slicecount.errors import extra_imports
from slicecount.examples import visitor
from slicecount.middleware.starlette import SliceCountMiddleware

with extra_imports("examples", "the example Starlette app"):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
    from starlette.routing import Mount, Route


async def index(request: Request) -> Response:
    return PlainTextResponse("slicecount example")


async def health(request: Request) -> Response:
    return PlainTextResponse("ok")


async def item(request: Request) -> Response:
    item_id = request.path_params["item_id"]
    if item_id > 1000:
        return JSONResponse({"error": "no such item"}, status_code=404)
    return JSONResponse({"id": item_id})


async def checkout(request: Request) -> Response:
    slicecount.event("checkouts", method=request.query_params.get("pay", "card"))
    return JSONResponse({"ok": True}, status_code=201)


async def stream(request: Request) -> Response:
    seconds = float(request.query_params.get("seconds", "1"))

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(5):
            await asyncio.sleep(seconds / 5)
            yield f"chunk {i}\n".encode()

    return StreamingResponse(chunks(), media_type="text/plain")


@slicecount.limit("10/second")  # per client address: 429 past 10 a second
async def search(request: Request) -> Response:
    return JSONResponse({"results": [], "q": request.query_params.get("q", "")})


async def error(request: Request) -> Response:
    raise RuntimeError("an example failure")


app = Starlette(
    routes=[
        Route("/", index),
        Route("/health", health),
        Route("/items/{item_id:int}", item),
        Route("/checkout", checkout, methods=["POST"]),
        Route("/stream", stream),
        Route("/error", error),
        Route("/search", search),
        Mount("/api/v1", routes=[Route("/items/{item_id:int}", item)]),
    ]
)
app.add_middleware(SliceCountMiddleware, exclude_paths=["/health"], unique_clients=visitor)
