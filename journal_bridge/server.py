"""The plugin: the `http.app` that LangGraph Server mounts (`langgraph.json`).

- lifespan: opens the run event store (retrying in the background while it is
  unreachable, so the server starts regardless) and starts the bridge, which
  reads runs through the in-process SDK client (`get_client()` with no URL);
- ASGI middleware: `RunObserverMiddleware` makes every run observable and
  hands it to the bridge;
- routes: the journal's history API and viewer, `/journal/health` (the
  verdict of `journal_bridge.health`; 503 while journaling is not keeping up)
  and `/journal/metrics` (the same counters for Prometheus).

Settings come from the environment:
`JOURNAL_BRIDGE_STORE_URL` (default: SQLite `journal.db` in the working
directory), `JOURNAL_BRIDGE_ENABLED` (`0` turns journaling off and leaves
every request untouched), `JOURNAL_BRIDGE_ROUTE_PREFIX` (default `/journal`),
`JOURNAL_BRIDGE_SPOOL_DIR` (where records wait while the store is down;
`journal_bridge.spool`), `JOURNAL_BRIDGE_BACKLOG_GROWING_AFTER` (seconds of
backlog growth, or of no write while records wait, before health says so;
default 60).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.types import Scope

from journal_bridge.bridge import Bridge
from journal_bridge.health import http_status, prometheus_text
from journal_bridge.intercept import RunObserverMiddleware, RunRequestPlan
from journal_bridge.modes import EVENTS_MODE
from journal_bridge.routes import DEFAULT_PREFIX, PREFIX_ENV, journal_routes
from journal_bridge.runtime import release_run_frames, retained_frame_count
from journal_bridge.spool import redact_url, spool_path
from journal_bridge.store import RunEventStore, StoreUnavailable, default_store_url, open_store_when_available

logger = logging.getLogger(__name__)

__all__ = ["app", "create_app", "redact_url"]

GROWING_AFTER_ENV = "JOURNAL_BRIDGE_BACKLOG_GROWING_AFTER"


def _enabled() -> bool:
    return os.environ.get("JOURNAL_BRIDGE_ENABLED", "1").strip().lower() not in {"0", "false", "no", "off"}


def _growing_after() -> float:
    raw = os.environ.get(GROWING_AFTER_ENV, "").strip()
    if not raw:
        return 60.0
    try:
        value = float(raw)
    except ValueError as exc:
        raise ValueError(f"{GROWING_AFTER_ENV} must be a number of seconds, got {raw!r}") from exc
    if value <= 0:
        raise ValueError(f"{GROWING_AFTER_ENV} must be > 0, got {raw!r}")
    return value


class Journal:
    """The store and the bridge of one server, plus what the middleware learned per run."""

    def __init__(self, store_url: str, *, growing_after: float = 60.0) -> None:
        self.store_url = store_url
        self.growing_after = growing_after
        self.store: RunEventStore | None = None
        self.bridge: Bridge | None = None
        self._opener: asyncio.Task[None] | None = None
        # What the plugin added to each observed run, so the bridge can release it.
        self._plans: OrderedDict[str, RunRequestPlan] = OrderedDict()
        self.frames_released = 0

    async def start(self, app: Starlette) -> None:
        from langgraph_sdk import get_client

        # Unbounded: records wait in the spool file, not in memory, and a follower
        # held back would only keep the run's frames in the server's memory longer.
        self.bridge = Bridge(
            None,
            get_client,
            spool=spool_path(self.store_url, "server"),
            queue_size=0,
            growing_after=self.growing_after,
            on_run_done=self._run_done,
        )
        await self.bridge.start()
        self._opener = asyncio.create_task(self._open_store(app), name="journal-bridge-open-store")
        # Give a reachable store the chance to be open before the first request.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._opener), timeout=10)

    async def _open_store(self, app: Starlette) -> None:
        def unavailable(exc: StoreUnavailable) -> None:
            if self.bridge is not None:
                self.bridge.stats.last_error = f"store: {exc}"
            logger.warning("journal-bridge: store %s unavailable (%s); retrying", redact_url(self.store_url), exc)

        store = await open_store_when_available(self.store_url, on_unavailable=unavailable)
        self.store = store
        app.state.journal_store = store
        assert self.bridge is not None
        self.bridge.store = store
        logger.info("journal-bridge: journaling runs into %s", redact_url(self.store_url))

    async def stop(self) -> None:
        if self._opener is not None and not self._opener.done():
            self._opener.cancel()
        if self.bridge is not None:
            await self.bridge.stop()
        if self.store is not None:
            await self.store.close()

    def observer_for(self, scope: Scope):
        if self.bridge is None:
            return None
        return self.observe

    def observe(self, thread_id: str, run_id: str, plan: RunRequestPlan) -> None:
        assert self.bridge is not None
        self._plans[run_id] = plan
        while len(self._plans) > 10_000:
            self._plans.popitem(last=False)
        self.bridge.observe(thread_id, run_id)

    def _run_done(self, thread_id: str, run_id: str) -> None:
        plan = self._plans.pop(run_id, None)
        if plan is None:
            return
        if plan.forced_resumable:
            self.frames_released += release_run_frames(thread_id, run_id, keep_all_except=None)
        elif plan.added_mode:
            self.frames_released += release_run_frames(thread_id, run_id, keep_all_except=EVENTS_MODE)

    def health(self) -> dict[str, Any]:
        report: dict[str, Any] = {"enabled": True, "store_url": redact_url(self.store_url)}
        if self.bridge is not None:
            report.update(self.bridge.health())
        report["retained_frames"] = retained_frame_count()
        report["frames_released"] = self.frames_released
        return report


def create_app() -> Starlette:
    enabled = _enabled()
    journal = Journal(default_store_url(), growing_after=_growing_after()) if enabled else None
    prefix = os.environ.get(PREFIX_ENV, DEFAULT_PREFIX).rstrip("/")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.journal_store = None
        if journal is None:
            yield
            return
        await journal.start(app)
        try:
            yield
        finally:
            await journal.stop()

    async def health(request: Request) -> JSONResponse:
        if journal is None:
            return JSONResponse({"enabled": False})
        report = journal.health()
        return JSONResponse(report, status_code=http_status(report))

    async def metrics(request: Request) -> PlainTextResponse:
        report = journal.health() if journal is not None else {"enabled": False}
        return PlainTextResponse(prometheus_text(report), media_type="text/plain; version=0.0.4; charset=utf-8")

    def observer_for(scope: Scope):
        return journal.observer_for(scope) if journal is not None else None

    app = Starlette(
        routes=[
            Route(f"{prefix}/health", health, methods=["GET"]),
            Route(f"{prefix}/metrics", metrics, methods=["GET"]),
            *journal_routes(prefix),
        ],
        middleware=[Middleware(RunObserverMiddleware, observe=observer_for)],
        lifespan=lifespan,
    )
    app.state.journal = journal
    return app


app = create_app()
