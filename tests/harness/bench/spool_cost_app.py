"""The `http.app` of `benchmarks/spool_cost.py --paired`: the plugin with its frame spool on,
except for the runs of requests that carry `UNSPOOLED_HEADER`.

Not the plugin: a server the benchmark starts with this file as its `http.app`.
It is the plugin's own app (`journal_bridge.server.create_app`, with the
environment's settings, the frame spool on), with one change: a run created by
a request carrying `UNSPOOLED_HEADER` is read as with the spool off (its
reader is not wrapped). Both kinds of run then share one process -- its heap,
its collections, the runtime's state, the machine's moment -- and the
difference between their rounds is what the spool costs, without the luck of
two processes in it.
"""

from __future__ import annotations

import contextvars
from typing import Any

from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send

from journal_bridge.delivery import frame_spool
from journal_bridge.server import create_app

UNSPOOLED_HEADER = "x-journal-bridge-bench-unspooled"
_UNSPOOLED_KEY = UNSPOOLED_HEADER.encode("latin-1")
_unspooled: contextvars.ContextVar[bool] = contextvars.ContextVar("journal_bridge_bench_unspooled", default=False)
_spooled = frame_spool.FrameSpool.spooled


def _spooled_unless_asked(self: frame_spool.FrameSpool, thread_id: str, run_id: str, path: str,
                          modes: tuple[str, ...], inner: Any, **kwargs: Any) -> Any:
    return inner if _unspooled.get() else _spooled(self, thread_id, run_id, path, modes, inner, **kwargs)


frame_spool.FrameSpool.spooled = _spooled_unless_asked  # type: ignore[method-assign]


class _Unspooled:
    """Notes, for the request's own context, that its runs go unspooled."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and any(name == _UNSPOOLED_KEY for name, _ in scope.get("headers", ())):
            token = _unspooled.set(True)
            try:
                await self.app(scope, receive, send)
            finally:
                _unspooled.reset(token)
            return
        await self.app(scope, receive, send)


def create_spool_cost_app() -> Any:
    app = create_app()
    journal = app.state.journal
    if journal is None or journal.frames is None:
        raise RuntimeError("the spool cost server needs the journal and its frame spool on")
    app.user_middleware.insert(0, Middleware(_Unspooled))
    return app


app = create_spool_cost_app()
