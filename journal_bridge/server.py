"""The plugin: the `http.app` that LangGraph Server mounts (`langgraph.json`).

- lifespan: opens the run event store (retrying in the background while it is
  unreachable, so the server starts regardless) and starts the bridge, which
  reads runs through the in-process SDK client (`in_process.in_process_client`);
- ASGI middleware: `RunObserverMiddleware` makes every run observable and
  hands it to the bridge;
- routes: the journal's history API and viewer, `/journal/health` (the
  verdict of `journal_bridge.delivery.health`; 503 while journaling is not keeping up)
  and `/journal/metrics` (the same counters for Prometheus).

`app` is the journal alone; when the server must serve an app of its own
(deer-flow's Gateway app, any Starlette or FastAPI app), `with_journal(app)`
adds the journal to it, or `JOURNAL_BRIDGE_APP=module:attr` (or
`path/to/file.py:attr`) makes `app` that app with the journal.

`create_app`, `with_journal` and `app` read the settings
(`journal_bridge.settings.Settings.from_env`) once, unless given them, and
pass each component what it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, cast

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import BaseRoute, Route
from starlette.types import Scope

from journal_bridge.capture.intercept import READER_HEADER, ClientFrames, RunObserverMiddleware
from journal_bridge.capture.protocol_v2 import CommandObserverMiddleware
from journal_bridge.mapping.client_join import ClientJoin
from journal_bridge.mapping.client_stream import ClientStream
from journal_bridge.mapping.owners import OWNERS
from journal_bridge.mapping.reader import RunSource
from journal_bridge.model.shapes import JournalHealth
from journal_bridge.capture.reconcile import Reconciler
from journal_bridge.capture.run_requests import RunPlan
from journal_bridge.capture.thread_life import ThreadLifeMiddleware
from journal_bridge.delivery.bridge import Bridge
from journal_bridge.delivery.health import http_status, prometheus_text
from journal_bridge.delivery.frame_spool import FrameSpool, frame_spool_dir, recover
from journal_bridge.delivery.spool import redact_url, spool_path
from journal_bridge.delivery.thread_copy import copy_journal
from journal_bridge.host.compat import check_server, extend_served_openapi, runtime_edition
from journal_bridge.host.in_process import in_process_client
from journal_bridge.host.lifespan import LifespanFirstMiddleware
from journal_bridge.host import retained_frames
from journal_bridge.host.sse import Frame
from journal_bridge.settings import ENV, Settings, SettingsError
from journal_bridge.store import (
    RunEventStore,
    StoreUnavailable,
    open_store_when_available,
)
from journal_bridge.store.base import supports
from journal_bridge.web.openapi import HEALTH, describe, document, with_components
from journal_bridge.web.routes import journal_routes

logger = logging.getLogger(__name__)

__all__ = ["app", "create_app", "redact_url", "with_journal"]

APP_ENV = ENV["app_spec"][0]
# Set on the state of an app `with_journal` added the journal to.
_JOURNAL_ADDED = "journal_bridge_added"
# How long a created run waits for its client's join before the journal joins it
# itself: a client that joins at once (create, then join) is read through its join.
# Only on the in-memory runtime, where one process reads a thread's runs one after
# the other: with several processes sharing a journal, a run the journal joined
# late could be written after the thread's next run, read by another process.
CLIENT_JOIN_WAIT = 0.25

Lifespan = Callable[[Starlette], contextlib.AbstractAsyncContextManager[Any]]


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
        keep_deleted: bool = False,
        default_owner: str | None = None,
        frame_spool: bool = False,
    ) -> None:
        self.store_url = store_url
        self.keep_deleted = keep_deleted
        self.default_owner = default_owner
        self.growing_after = growing_after
        self.spool_dir = spool_dir
        self.store_options = store_options or {}
        self.store: RunEventStore | None = None
        self.bridge: Bridge | None = None
        self._opener: asyncio.Task[None] | None = None
        # What the plugin added to each observed run, so the bridge can release it.
        self._plans: OrderedDict[str, RunPlan] = OrderedDict()
        # Created runs whose client may join them in time (`ClientJoin`), oldest first.
        self._client_joins: OrderedDict[str, ClientJoin] = OrderedDict()
        self.frames_released = 0
        self.unplanned_requests = 0
        self.stream_replays = 0  # streams the runtime ended early, replayed (`stream_repair`)
        self.streams_repaired = 0  # of those, the ones whose client had missed frames
        self.reconcile_interval = reconcile_interval
        self.reconciler: Reconciler | None = None
        # Resolved here, off the event loop: the default spool directory of a store
        # that is no SQLite file is the working directory, which `langgraph dev`
        # forbids reading inside the loop.
        self.spool = spool_path(store_url, "server", self.spool_dir)
        self.reconcile_spool = spool_path(store_url, "reconcile", self.spool_dir)
        # What streaming clients saw, spooled before they saw it (none without a spool file).
        frames_dir = frame_spool_dir(self.spool) if frame_spool else None
        self.frames: FrameSpool | None = FrameSpool(frames_dir) if frames_dir is not None else None
        self._stopping = False
        self._owners_filled: asyncio.Task[None] | None = None

    async def start(self, app: Starlette) -> None:
        # Unbounded: records wait in the spool file, not in memory, and a follower
        # held back would only keep the run's frames in the server's memory longer.
        self.bridge = Bridge(
            None,
            lambda: in_process_client({READER_HEADER: "1"}),
            spool=self.spool,
            queue_size=0,
            growing_after=self.growing_after,
            on_run_done=self._run_done,
            default_owner=self.default_owner,
        )
        await self.bridge.start()
        left = await self.frames.open() if self.frames is not None else []
        self._opener = asyncio.create_task(self._open_store(app), name="journal-bridge-open-store")
        # Give a reachable store the chance to be open before the first request.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._opener), timeout=10)
        recovered: list[str] = []
        if left and self.frames is not None:
            # Before the reconciler's first pass, asking the server nothing: a run it journals
            # anew comes after what its client saw, and the reconciler starts at once.
            recovered = await recover(self.frames, left, self.bridge.write, self._default_owner)
        if self.reconcile_interval > 0:
            spool = self.reconcile_spool
            self.reconciler = Reconciler(
                self.bridge,
                lambda: in_process_client({READER_HEADER: "1"}),
                lambda: self.store,
                interval=self.reconcile_interval,
                state_path=spool.with_suffix(".json") if spool is not None else None,
                sweep_deleted=not self.keep_deleted,
            )
            await self.reconciler.start()
        if recovered and self.default_owner is None:
            self._owners_filled = asyncio.create_task(self._fill_owners(recovered), name="journal-bridge-fill-owners")

    async def _default_owner(self, thread_id: str) -> str | None:
        return self.default_owner

    async def _fill_owners(self, thread_ids: list[str]) -> None:
        """The owners of threads journaled from spooled frames, asked of the server once it
        serves and given to their records that have none (`fill_owner`)."""
        assert self.bridge is not None
        try:
            await self.bridge.drain()
            for thread_id in thread_ids:
                owner = await OWNERS.owner_of(self.bridge.sdk(), thread_id)
                store = self.store
                if owner is not None and store is not None and supports(store, "fill_owner"):
                    await store.fill_owner(thread_id, owner)
        except Exception:  # noqa: BLE001 - the records stay, without an owner
            logger.exception("journal-bridge: could not fill in the owners of records journaled from spooled frames")

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
        # Runs cut short by the stop keep their spooled frames for the next start.
        self._stopping = True
        if self._owners_filled is not None and not self._owners_filled.done():
            self._owners_filled.cancel()
            await asyncio.gather(self._owners_filled, return_exceptions=True)
        if self.reconciler is not None:
            await self.reconciler.stop()
        if self._opener is not None and not self._opener.done():
            self._opener.cancel()
        if self.bridge is not None:
            await self.bridge.stop()
        if self.frames is not None:
            await self.frames.close(keep_frames=True)
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
        return RunSource(
            plan.capture,
            resumable=True,
            assistant_id=plan.assistant_id,
            run_input=plan.run_input,
            client_modes=plan.client_modes,
            checkpoint=plan.checkpoint,
        )

    def join(self, thread_id: str, run_id: str, plan: RunPlan) -> None:
        """A run nobody streams: join it from its first frame, or read it from
        its client's join when a created run's client joins it in time."""
        assert self.bridge is not None
        self._remember(run_id, plan)
        source = self._source(plan)
        if plan.kind == "create" and not plan.stateless and runtime_edition() == "inmem":
            while self._client_joins and not next(iter(self._client_joins.values())).open:
                self._client_joins.popitem(last=False)
            source.client_join = self._client_joins[run_id] = ClientJoin(run_id, plan.capture, CLIENT_JOIN_WAIT)
            while len(self._client_joins) > 10_000:
                self._client_joins.popitem(last=False)[1].cancel()
        self.bridge.observe(thread_id, run_id, source)

    def take_client_join(self, thread_id: str, run_id: str, modes: tuple[str, ...]) -> ClientFrames | None:
        """A client joins a run this journal created: what to feed the frames of
        its join (reading `modes`) to, or None when the run is read otherwise."""
        waiting = self._client_joins.pop(run_id, None)
        taken = waiting.take(modes) if waiting is not None else None
        plan = self._plans.get(run_id)
        if taken is None or self.frames is None or plan is None:
            return taken
        return self.frames.spooled(thread_id, run_id, plan.capture.path, (*plan.capture.modes, "error"), taken,
                                   assistant_id=plan.assistant_id, run_input=plan.run_input)

    def read_client_stream(self, thread_id: str | None, run_id: str, plan: RunPlan) -> ClientFrames:
        """A streamed run: read it from the frames its client receives."""
        assert self.bridge is not None
        self._remember(run_id, plan)
        stream = self.bridge.read_client_stream(thread_id, run_id, self._source(plan))
        # Frames only the journal replays are kept until it has them, not to the run's end:
        # all of a run the plugin made resumable, the added modes' of one its client did.
        release = None
        if thread_id is not None and plan.changed:
            release = retained_frames.frames_releaser(thread_id, run_id, modes=plan.journal_modes)
        frames: ClientFrames = stream if release is None else _ReleasedWhenHeld(stream, release, self)
        if self.frames is not None:
            frames = self.frames.spooled(thread_id or run_id, run_id, plan.capture.path,
                                         (*plan.capture.modes, "error"), frames,
                                         assistant_id=plan.assistant_id, run_input=plan.run_input)
        return frames

    def replayed(self, run_id: str, missed: int) -> None:
        self.stream_replays += 1
        if missed:
            self.streams_repaired += 1

    def unplanned(self, reason: str) -> None:
        self.unplanned_requests += 1
        logger.warning("journal-bridge: forwarded untouched (%s); its run is not journaled live", reason)

    async def deleted(self, thread_ids: list[str]) -> None:
        """The server deleted these threads: so goes their journal, spool included.

        With the store down, what it holds stays until the reconciler finds the
        thread gone from the server; nothing waiting is written meanwhile. With
        `keep_deleted` the journal stays."""
        assert self.bridge is not None
        if self.keep_deleted:
            return
        for thread_id in thread_ids:
            removed = await self.bridge.forget_thread(thread_id)
            if removed is None:
                logger.warning("journal-bridge: the stored journal of deleted thread %s goes once the store answers "
                               "(the reconciler finds it)", thread_id)
            else:
                logger.info("journal-bridge: deleted the journal of thread %s (%d records)", thread_id, removed)

    async def copied(self, source_id: str, copy_id: str) -> None:
        """The server copied a thread: the copy gets the source's journal, written first."""
        assert self.bridge is not None
        # What is journaled of the source by then: a run still going holds the answer up no longer.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.bridge.wait_for_thread(source_id), timeout=10)
            await asyncio.wait_for(self.bridge.drain(), timeout=10)
        if self.store is None:
            logger.warning("journal-bridge: store not open; thread %s copied without its journal", source_id)
            return
        await copy_journal(self.store, source_id, copy_id)
        # The copy's records are its owner's, whoever owned the source's.
        owner = await OWNERS.owner_of(self.bridge.sdk(), copy_id) or self.default_owner
        if owner is not None and supports(self.store, "fill_owner"):
            await self.store.fill_owner(copy_id, owner)

    async def state_forked(self, thread_id: str, checkpoint: dict[str, object], result: object) -> None:
        """A state update from an earlier checkpoint: the thread's branch moved there."""
        assert self.bridge is not None
        await self.bridge.state_forked(thread_id, checkpoint, result)

    def _run_done(self, thread_id: str, run_id: str) -> None:
        if self.frames is not None and not self._stopping:
            self.frames.done(run_id)  # its records are in the store or the queue's spool
        plan = self._plans.pop(run_id, None)
        if plan is None:
            return
        if plan.changed:
            self.frames_released += retained_frames.release_run_frames(thread_id, run_id, modes=plan.journal_modes)

    def health(self) -> JournalHealth:
        report: dict[str, Any] = {"enabled": True, "store_url": redact_url(self.store_url)}
        if self.bridge is not None:
            report.update(self.bridge.health())
        report["retained_frames"] = retained_frames.retained_frame_count()
        report["frames_released"] = self.frames_released
        report["unplanned_requests"] = self.unplanned_requests
        report["stream_replays"] = self.stream_replays
        report["streams_repaired"] = self.streams_repaired
        if self.reconciler is not None:
            report["reconciler"] = self.reconciler.report()
        if self.frames is not None:
            report["frame_spool"] = self.frames.report()
        # The queue's and the bridge's counters, each one `JournalHealth` lists
        # (tests/unit/test_shapes.py checks a report against the schema).
        return cast(JournalHealth, report)


class _ReleasedWhenHeld:
    """A run's client stream whose frames the server retains only until the
    journal's reader holds them (`retained_frames.frames_releaser`): released every
    `retained_frames.RELEASE_EVERY` frames held, and when the response ends. A
    frame the stream passes over unparsed (`ClientStream.passes_over`) is one
    it holds all it needs of."""

    def __init__(self, stream: ClientStream, release: Callable[[str], int], journal: Journal) -> None:
        self._stream = stream
        self._release: Callable[[str], int] | None = release
        self._journal = journal
        self._held_id: str | None = None  # the last frame held and not released yet
        self._held = 0  # how many frames since the last release

    def feed(self, frame: Frame) -> None:
        self._stream.feed(frame)
        if frame.id is not None:
            self._hold(frame.id)

    def passes_over(self, body: bytes, start: int, end: int) -> bool:
        passed, frame_id = self._stream.pass_over(body, start, end)
        if frame_id is not None:
            self._hold(frame_id)
        return passed

    def _hold(self, frame_id: str) -> None:
        self._held_id = frame_id
        self._held += 1
        if self._held >= retained_frames.RELEASE_EVERY:
            self._released()

    def _released(self) -> None:
        frame_id, self._held_id, self._held = self._held_id, None, 0
        if self._release is None or frame_id is None:
            return
        try:
            self._journal.frames_released += self._release(frame_id)
        except Exception:  # noqa: BLE001 - the client's stream never depends on it; the rest goes at the run's end
            logger.exception("journal-bridge: could not release the retained frames of a run; they go when it is read")
            self._release = None

    def close(self, *, complete: bool) -> None:
        self._released()
        self._stream.close(complete=complete)


def _journal_parts(settings: Settings) -> tuple[Journal | None, list[BaseRoute], list[Middleware], Lifespan]:
    """The journal of this server, as `settings` say: the journal, its routes,
    the middleware that observes runs (outermost first) and its lifespan."""
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
            keep_deleted=settings.keep_deleted,
            default_owner=settings.default_owner,
            frame_spool=settings.frame_spool,
        )
        if settings.enabled
        else None
    )
    prefix = settings.route_prefix

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.journal_store = None
        # The server built its OpenAPI document from the routes by now; their answers' schemas go in too.
        extend_served_openapi(with_components)
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

    routes: list[BaseRoute] = [
        Route(f"{prefix}/health", health, methods=["GET"]),
        Route(f"{prefix}/metrics", metrics, methods=["GET"]),
        *journal_routes(prefix),
    ]
    observers = [
        Middleware(RunObserverMiddleware, sink_for=sink_for, setting=settings.capture),
        Middleware(CommandObserverMiddleware, sink_for=sink_for),
        Middleware(ThreadLifeMiddleware, sink_for=sink_for),
    ]
    return journal, routes, observers, lifespan


def create_app(settings: Settings | None = None) -> Starlette:
    """The journal alone, as the server's `http.app` (`settings`: default the environment's)."""
    journal, routes, observers, lifespan = _journal_parts(Settings.from_env() if settings is None else settings)
    app = Starlette(routes=routes, middleware=[Middleware(LifespanFirstMiddleware), *observers], lifespan=lifespan)
    app.state.journal = journal
    return app


def with_journal(app: Starlette, settings: Settings | None = None) -> Starlette:
    """`app` (a Starlette or FastAPI app) with the journal added; the same object, returned.

    Its routes come first, so a route of its own is never shadowed by one of
    the journal's. Its middleware stays as it was, outside the journal's
    observers: it sees requests as its clients send them and streams as they
    receive them, and the journal sees what reaches the server's run routes.
    The journal's lifespan encloses the app's: the store is open before the
    app's startup and closed after its shutdown, so runs either of them starts
    are journaled; an error in either fails startup. Adding the journal to an
    app that has it already changes nothing.
    """
    if not isinstance(app, Starlette):
        raise TypeError(f"with_journal needs a Starlette or FastAPI app, got {type(app).__name__}")
    if getattr(app.state, _JOURNAL_ADDED, False):
        return app
    journal, routes, observers, journal_lifespan = _journal_parts(Settings.from_env() if settings is None else settings)
    app_lifespan = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[Any]:
        async with journal_lifespan(app), app_lifespan(app) as state:
            yield state

    # A middleware stack is built on the first request; before it, this list is the stack.
    app.user_middleware = [Middleware(LifespanFirstMiddleware), *app.user_middleware, *observers]
    app.router.routes.extend(routes)
    app.router.lifespan_context = lifespan
    _describe_in_fastapi_openapi(app, routes)
    app.state.journal = journal
    setattr(app.state, _JOURNAL_ADDED, True)
    return app


def _describe_in_fastapi_openapi(app: Starlette, routes: list[BaseRoute]) -> None:
    """FastAPI builds `/openapi.json` from its own routes only: add the journal's, and their schemas."""
    openapi = getattr(app, "openapi", None)
    if not callable(openapi):
        return

    def with_journal_paths() -> dict[str, object]:
        spec = openapi()
        paths = spec.setdefault("paths", {})
        for path, operations in document(routes)["paths"].items():
            paths.setdefault(path, operations)
        return with_components(spec)

    app.openapi = with_journal_paths  # type: ignore[attr-defined]


def _load_app(spec: str) -> Starlette:
    """The app `spec` names: `package.module:attr` or `path/to/file.py:attr`."""
    target, _, attr = spec.rpartition(":")
    if not target or not attr:
        raise SettingsError(f"{APP_ENV}={spec!r}: expected module:attr or path/to/file.py:attr")
    if target.endswith(".py"):
        path = Path(target).resolve()
        loader = importlib.util.spec_from_file_location(f"journal_bridge_user_app_{path.stem}", path)
        if loader is None or loader.loader is None:
            raise ImportError(f"{APP_ENV}={spec!r}: cannot load {path}")
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    try:
        app: Starlette = getattr(module, attr)  # the user's app, as the setting names it
    except AttributeError:
        raise AttributeError(f"{APP_ENV}={spec!r}: {target} has no {attr!r}") from None
    return app


def _server_app() -> Starlette:
    settings = Settings.from_env()
    if settings.app_spec:
        return with_journal(_load_app(settings.app_spec), settings)
    return create_app(settings)


app = _server_app()
