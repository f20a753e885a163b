"""A FastAPI app of a user's own, as LangGraph Server's `http.app` would serve it.

It has what such apps have and the journal must leave working: a lifespan
that prepares state (and notes whether the journal's store was already open),
routes of its own -- one of them at a path under the journal's prefix -- and an
HTTP middleware that stamps every response and counts the requests it saw.
On shutdown it writes what it saw to `gateway-shutdown.json` in the working
directory.

With `GATEWAY_DATABASE` (a SQLite file holding deer-flow's `run_events`), it
also serves a thread's history as deer-flow's summarize-marker design has its
Gateway serve it (`GET /api/threads/{thread_id}/history`): the rows read as
deer-flow's database store reads them, turned into messages and markers by
the design's helper (`tests/harness/marker_spec.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request

# The server loads this file by its path: the design's helper is loaded the same way.
_spec = importlib.util.spec_from_file_location("marker_spec", Path(__file__).parents[1] / "marker_spec.py")
marker_spec = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(marker_spec)


def _run_events(path: str, thread_id: str) -> list[dict[str, Any]]:
    """The thread's rows of deer-flow's `run_events` in seq order, as deer-flow's
    database store returns them: JSON content restored where the metadata flags it."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        rows = conn.execute(
            "SELECT seq, run_id, event_type, category, content, event_metadata FROM run_events"
            " WHERE thread_id = ? ORDER BY seq",
            (thread_id,),
        ).fetchall()
    out = []
    for seq, run_id, event_type, category, content, metadata in rows:
        metadata = json.loads(metadata)
        if metadata.get("content_is_json") or metadata.get("content_is_dict"):
            content = json.loads(content)
        out.append({"seq": seq, "run_id": run_id, "event_type": event_type, "category": category,
                    "content": content, "metadata": metadata})
    return out


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

    @gateway.get("/api/threads/{thread_id}/history")
    async def history(thread_id: str) -> dict:
        path = os.environ.get("GATEWAY_DATABASE")
        if not path:
            raise HTTPException(404, "GATEWAY_DATABASE is not set")
        rows = await asyncio.to_thread(_run_events, path, thread_id)
        return {"messages": marker_spec.design_history(rows)}

    @gateway.get("/journal/ui")
    async def own_page() -> dict:
        return {"owner": "gateway"}

    return gateway


app = create_gateway()
