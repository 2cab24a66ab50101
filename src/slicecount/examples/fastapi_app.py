"""An example FastAPI app instrumented with slicecount.

    SLICECOUNT_REDIS_URL=redis://127.0.0.1:6379/0 uvicorn --app-dir examples fastapi_app:app

Requests are counted by the Starlette middleware under their route templates, APIRouter
prefixes and mounted sub-apps included (``/items/{item_id}``, ``/v2/items/{item_id}``); one
endpoint is rate limited by ``@slicecount.limit`` (which needs the ``request: Request``
parameter to find the client); the last counts are written when the server shuts down (the
middleware flushes on the lifespan's shutdown).
"""

from __future__ import annotations

import slicecount
from slicecount.errors import extra_imports

with extra_imports("examples", "the FastAPI example"):
    from fastapi import APIRouter, FastAPI, HTTPException, Request

from slicecount.middleware.starlette import SliceCountMiddleware

items = APIRouter(prefix="/items", tags=["items"])


@items.get("/{item_id}")
async def read_item(item_id: int) -> dict[str, int]:
    if item_id > 1000:
        raise HTTPException(status_code=404, detail="no such item")
    return {"id": item_id}


@items.post("", status_code=201)
async def create_item() -> dict[str, bool]:
    slicecount.event("items.created")  # an application event, beside the request counts
    return {"ok": True}


v2 = FastAPI(title="slicecount example, v2")
v2.include_router(items)


def create_app() -> FastAPI:
    app = FastAPI(title="slicecount example")

    @app.get("/")
    async def index() -> dict[str, str]:
        return {"app": "slicecount example"}

    @app.get("/health")
    async def health() -> str:
        return "ok"

    @app.get("/search")
    @slicecount.limit("10/second")  # per client address: 429 past 10 a second
    async def search(request: Request, q: str = "") -> dict[str, object]:
        return {"results": [], "q": q}

    app.include_router(items)
    app.mount("/v2", v2)  # counted under /v2/items/{item_id}
    app.add_middleware(SliceCountMiddleware, exclude_paths=["/health"])
    return app


app = create_app()
