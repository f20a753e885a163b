"""A FastAPI app of a user's own, as LangGraph Server's `http.app` would serve it.

It has what such apps have and the journal must leave working: a lifespan
that prepares state (and notes whether the journal's store was already open),
routes of its own -- one of them at a path under the journal's prefix -- and an
HTTP middleware that stamps every response and counts the requests it saw.
On shutdown it writes what it saw to `gateway-shutdown.json` in the working
directory.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import FastAPI, Request


def create_gateway() -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.gateway_ready = "ready"
        app.state.requests_seen = 0
        app.state.store_open_at_startup = getattr(app.state, "journal_store", None) is not None
        yield
        Path("gateway-shutdown.json").write_text(
            json.dumps({"requests_seen": app.state.requests_seen, "store_open": app.state.journal_store is not None})
        )

    gateway = FastAPI(lifespan=lifespan)

    @gateway.middleware("http")
    async def stamp(request: Request, call_next):
        request.app.state.requests_seen += 1
        response = await call_next(request)
        response.headers["x-gateway"] = "stamped"
        return response

    @gateway.get("/api/gateway/status")
    async def status(request: Request) -> dict:
        return {
            "ready": request.app.state.gateway_ready,
            "store_open_at_startup": request.app.state.store_open_at_startup,
        }

    @gateway.get("/journal/ui")
    async def own_page() -> dict:
        return {"owner": "gateway"}

    return gateway


app = create_gateway()
