"""The `http.app` docs/deer-flow.md gives for the logged-in case, with the
stand-in for deer-flow's engine (`tests/harness/auth/deerflow_users.py`) where
deer-flow's `deerflow.persistence.engine` and `get_app_config()` would be:
deer-flow's Studio app (an app without a lifespan), given a lifespan that
starts the engine, with the journal."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI

from journal_bridge.server import with_journal
from tests.harness.auth.deerflow_users import close_engine, init_engine_from_config

langgraph_app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)


@contextlib.asynccontextmanager
async def deerflow_engine(app: FastAPI) -> AsyncIterator[None]:
    await init_engine_from_config(None)
    try:
        yield
    finally:
        await close_engine()


langgraph_app.router.lifespan_context = deerflow_engine
app = with_journal(langgraph_app)
