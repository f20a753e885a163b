"""The plugin's lifespan started first on runtimes that need their lifespan before any other middleware."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from journal_bridge.host.compat import runtime_edition

__all__ = ["LifespanFirstMiddleware"]


class LifespanFirstMiddleware:
    """Hands the lifespan straight to the app's router on runtimes that need their lifespan first.

    With a custom `http.app`, langgraph-api 0.10-0.16 put `EnsureStoreAccessible`
    around every scope, the lifespan included; it asks the runtime for its
    store. The in-memory runtime has one at import; langgraph-runtime-pg
    creates it in its lifespan and raises before, so uvicorn would report the
    lifespan as unsupported, skip it, and every request would fail. This
    middleware, placed outermost, starts the lifespan (the server's and the
    plugin's, combined on the router) before that middleware ever runs.
    Requests pass through untouched.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._bypass = runtime_edition() != "inmem"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" and self._bypass and "app" in scope:
            await scope["app"].router(scope, receive, send)
            return
        await self.app(scope, receive, send)
