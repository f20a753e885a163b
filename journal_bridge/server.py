"""The plugin: the `http.app` that LangGraph Server mounts (`langgraph.json`).

- lifespan: opens the run event store (retrying in the background while it is
  unreachable, so the server starts regardless) and starts the bridge, which
  reads runs through the in-process SDK client (`get_client()` with no URL);
- ASGI middleware: `RunObserverMiddleware` makes every run observable and
  hands it to the bridge;
- routes: the journal's history API and viewer, `/journal/health` (the
  verdict of `journal_bridge.health`; 503 while journaling is not keeping up)
  and `/journal/metrics` (the same counters for Prometheus).

`create_app` reads the settings (`journal_bridge.settings.Settings.from_env`)
once and passes each component what it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.types import Scope

from journal_bridge.bridge import Bridge
from journal_bridge.compat import LifespanFirstMiddleware, check_server
from journal_bridge.health import http_status, prometheus_text
from journal_bridge.intercept import READER_HEADER, RunObserverMiddleware
from journal_bridge.openapi import HEALTH, describe
from journal_bridge.protocol_v2 import CommandObserverMiddleware
from journal_bridge.reader import RunSource, TeeSource
from journal_bridge.reconcile import Reconciler
from journal_bridge.run_requests import RunPlan
from journal_bridge.routes import journal_routes
from journal_bridge.runtime import release_run_frames, retained_frame_count
from journal_bridge.settings import Settings
from journal_bridge.spool import redact_url, spool_path
from journal_bridge.store import RunEventStore, StoreUnavailable, open_store_when_available

logger = logging.getLogger(__name__)

__all__ = ["app", "create_app", "redact_url"]

class Journal:
    """The store and the bridge of one server, plus what the middleware learned per run."""

    def __init__(
        self,
        store_url: str,
        *,
        growing_after: float = 60.0,
        reconcile_interval: float = 3.0,
        spool_dir: Path | None = None,
        store_options: dict[str, Any] | None = None,
    ) -> None:
        self.store_url = store_url
        self.growing_after = growing_after
        self.spool_dir = spool_dir
        self.store_options = store_options or {}
        self.store: RunEventStore | None = None
        self.bridge: Bridge | None = None
        self._opener: asyncio.Task[None] | None = None
        # What the plugin added to each observed run, so the bridge can release it.
        self._plans: OrderedDict[str, RunPlan] = OrderedDict()
        self.frames_released = 0
        self.unplanned_requests = 0
        self.reconcile_interval = reconcile_interval
        self.reconciler: Reconciler | None = None

    async def start(self, app: Starlette) -> None:
        from langgraph_sdk import get_client

        # Unbounded: records wait in the spool file, not in memory, and a follower
        # held back would only keep the run's frames in the server's memory longer.
        self.bridge = Bridge(
            None,
            lambda: get_client(headers={READER_HEADER: "1"}),
            spool=spool_path(self.store_url, "server", self.spool_dir),
            queue_size=0,
            growing_after=self.growing_after,
            on_run_done=self._run_done,
        )
        await self.bridge.start()
        self._opener = asyncio.create_task(self._open_store(app), name="journal-bridge-open-store")
        # Give a reachable store the chance to be open before the first request.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._opener), timeout=10)
        if self.reconcile_interval > 0:
            spool = spool_path(self.store_url, "reconcile", self.spool_dir)
            self.reconciler = Reconciler(
                self.bridge,
                lambda: get_client(headers={READER_HEADER: "1"}),
                lambda: self.store,
                interval=self.reconcile_interval,
                state_path=spool.with_suffix(".json") if spool is not None else None,
            )
            await self.reconciler.start()

    async def _open_store(self, app: Starlette) -> None:
        def unavailable(exc: StoreUnavailable) -> None:
            if self.bridge is not None:
                self.bridge.stats.last_error = f"store: {exc}"
            logger.warning("journal-bridge: store %s unavailable (%s); retrying", redact_url(self.store_url), exc)

        store = await open_store_when_available(self.store_url, on_unavailable=unavailable, **self.store_options)
        self.store = store
        app.state.journal_store = store
        assert self.bridge is not None
        self.bridge.store = store
        logger.info("journal-bridge: journaling runs into %s", redact_url(self.store_url))

    async def stop(self) -> None:
        if self.reconciler is not None:
            await self.reconciler.stop()
        if self._opener is not None and not self._opener.done():
            self._opener.cancel()
        if self.bridge is not None:
            await self.bridge.stop()
        if self.store is not None:
            await self.store.close()

    def sink_for(self, scope: Scope) -> Journal | None:
        return self if self.bridge is not None else None

    def _remember(self, run_id: str, plan: RunPlan) -> None:
        self._plans[run_id] = plan
        while len(self._plans) > 10_000:
            self._plans.popitem(last=False)

    @staticmethod
    def _source(plan: RunPlan) -> RunSource:
        return RunSource(plan.capture, resumable=True, assistant_id=plan.assistant_id, run_input=plan.run_input)

    def join(self, thread_id: str, run_id: str, plan: RunPlan) -> None:
        """A run nobody streams: join it from its first frame."""
        assert self.bridge is not None
        self._remember(run_id, plan)
        self.bridge.observe(thread_id, run_id, self._source(plan))

    def tee(self, thread_id: str | None, run_id: str, plan: RunPlan) -> TeeSource:
        """A streamed run: read it from the frames its client receives."""
        assert self.bridge is not None
        self._remember(run_id, plan)
        return self.bridge.tee(thread_id, run_id, self._source(plan))

    def unplanned(self, reason: str) -> None:
        self.unplanned_requests += 1
        logger.warning("journal-bridge: forwarded untouched (%s); its run is not journaled live", reason)

    def _run_done(self, thread_id: str, run_id: str) -> None:
        plan = self._plans.pop(run_id, None)
        if plan is None:
            return
        if plan.forced_resumable:
            self.frames_released += release_run_frames(thread_id, run_id, modes=None)
        elif plan.capture.added:
            self.frames_released += release_run_frames(thread_id, run_id, modes=frozenset(plan.capture.added))

    def health(self) -> dict[str, Any]:
        report: dict[str, Any] = {"enabled": True, "store_url": redact_url(self.store_url)}
        if self.bridge is not None:
            report.update(self.bridge.health())
        report["retained_frames"] = retained_frame_count()
        report["frames_released"] = self.frames_released
        report["unplanned_requests"] = self.unplanned_requests
        if self.reconciler is not None:
            report["reconciler"] = self.reconciler.report()
        return report


def create_app(settings: Settings | None = None) -> Starlette:
    """The plugin's app, configured by `settings` (default: the environment's)."""
    settings = Settings.from_env() if settings is None else settings
    if settings.enabled:
        # Refuse a server the plugin was not made for before it touches a request.
        check_server()
    journal = (
        Journal(
            settings.journal_url,
            growing_after=settings.backlog_growing_after,
            reconcile_interval=settings.reconcile_interval,
            spool_dir=settings.spool_dir,
            store_options=settings.store_options,
        )
        if settings.enabled
        else None
    )
    prefix = settings.route_prefix

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

    describe(health, HEALTH, "The bridge's state: backlog, lag, retried and dropped counts.")

    def sink_for(scope: Scope) -> Journal | None:
        return journal.sink_for(scope) if journal is not None else None

    app = Starlette(
        routes=[
            Route(f"{prefix}/health", health, methods=["GET"]),
            Route(f"{prefix}/metrics", metrics, methods=["GET"]),
            *journal_routes(prefix),
        ],
        middleware=[
            Middleware(LifespanFirstMiddleware),
            Middleware(RunObserverMiddleware, sink_for=sink_for, setting=settings.capture),
            Middleware(CommandObserverMiddleware, sink_for=sink_for),
        ],
        lifespan=lifespan,
    )
    app.state.journal = journal
    return app


app = create_app()
