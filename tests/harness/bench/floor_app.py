"""The `http.app` of the benchmark's `floor` server: what reading runs through langgraph-sdk costs at the least.

Not the plugin: a server the bridge benchmark starts with this file as its
`http.app`, to measure the floor under the journal's cost. It installs the
plugin's own `RunObserverMiddleware` (`journal_bridge.capture.intercept`) with
the `lean` capture setting -- the least any capture adds to a run-creating
request: `stream_resumable` and the `values` + `custom` modes the client did
not ask for, whose frames are dropped from what the client gets -- and a sink
that, for every run the middleware hands it (joined or streamed), makes ONE
`runs.join_stream` of the run from its first frame through the product's
in-process SDK client (`compat.in_process_client` with the reader header,
`compat.join_params` of the capture's modes plus `error`: the call the
reader's join makes), and discards the frames. Nothing is mapped, queued or
stored; no outcome is read; the frames the rewrite made the server retain are
released when the join ends, as the plugin does.

A streamed run is thus joined too, where the plugin reads it from the frames
its client gets (the tee) and joins nothing: for streamed clients the floor
is a second reader of the run, not a part of what the plugin does.

`/journal/health` answers with the counters `wait_journal_idle` polls, so the
benchmark waits for the joins as it waits for the journal.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Scope

from journal_bridge.capture.intercept import READER_HEADER, RunObserverMiddleware
from journal_bridge.capture.run_requests import RunPlan
from journal_bridge.host.compat import (
    LifespanFirstMiddleware,
    in_process_client,
    join_params,
)
from journal_bridge.host.retained_frames import release_run_frames, retained_frame_count
from journal_bridge.host.sse import Frame
from journal_bridge.mapping.capture_setting import CaptureSetting

logger = logging.getLogger(__name__)

_ERROR_MODE = "error"
# On a paired server (`tests/harness/bench/paired_app.py`), a request with this header
# is read by the floor, not journaled.
FLOOR_HEADER = "x-journal-bridge-bench-floor"
# On a paired server, a request with this header is neither journaled nor read
# by the floor: the plugin's middleware forwards it untouched, as a server
# without the plugin's capture would serve it.
PLAIN_HEADER = "x-journal-bridge-bench-plain"


class _Discard:
    """What the middleware feeds a streamed run's frames to: keeps nothing."""

    def feed(self, frame: Frame) -> None:
        pass

    def close(self, *, complete: bool) -> None:
        pass


class FloorSink:
    """Joins every run once through the SDK and drops its frames."""

    def __init__(self) -> None:
        self._sdk: Any = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.observed = 0
        self.completed = 0
        self.failed = 0
        self.parts = 0

    def _client(self) -> Any:
        if self._sdk is None:
            self._sdk = in_process_client({READER_HEADER: "1"})
        return self._sdk

    def join(self, thread_id: str, run_id: str, plan: RunPlan) -> None:
        self._start(thread_id, run_id, plan)

    def read_client_stream(self, thread_id: str | None, run_id: str, plan: RunPlan) -> _Discard:
        if thread_id is not None:  # a stateless run's thread goes with it: nothing to join by thread
            self._start(thread_id, run_id, plan)
        return _Discard()

    def take_client_join(self, thread_id: str, run_id: str, modes: tuple[str, ...]) -> None:
        return None  # the floor is the journal's own join: a client's join is never read instead

    def unplanned(self, reason: str) -> None:
        logger.warning("floor: forwarded untouched (%s)", reason)

    def _start(self, thread_id: str, run_id: str, plan: RunPlan) -> None:
        self.observed += 1
        task = asyncio.create_task(self._join(thread_id, run_id, plan))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _join(self, thread_id: str, run_id: str, plan: RunPlan) -> None:
        modes = (*plan.capture.modes, _ERROR_MODE)
        try:
            stream = self._client().runs.join_stream(thread_id, run_id, params=join_params(modes), last_event_id="0")
            async for _ in stream:
                self.parts += 1
            self.completed += 1
        except Exception as exc:  # noqa: BLE001 - counted; the benchmark reports it
            self.failed += 1
            logger.warning("floor: join of run %s failed: %s", run_id, exc)
        finally:
            if plan.forced_resumable:
                release_run_frames(thread_id, run_id, modes=None)
            elif plan.capture.added:
                release_run_frames(thread_id, run_id, modes=frozenset(plan.capture.added))

    def health(self) -> dict[str, Any]:
        return {
            "active_runs": len(self._tasks),
            "backlog": 0,
            "runs_observed": self.observed,
            "runs_completed": self.completed,
            "runs_failed": self.failed,
            "parts_seen": self.parts,
            "records_written": 0,
            "dropped": 0,
            "retained_frames": retained_frame_count(),
        }


def create_floor_app() -> Starlette:
    sink = FloorSink()

    def sink_for(scope: Scope) -> FloorSink:
        return sink

    async def health(request: Request) -> JSONResponse:
        return JSONResponse(sink.health())

    app = Starlette(
        routes=[Route("/journal/health", health, methods=["GET"])],
        middleware=[
            Middleware(LifespanFirstMiddleware),
            Middleware(RunObserverMiddleware, sink_for=sink_for, setting=CaptureSetting.LEAN),
        ],
    )
    app.state.floor = sink
    return app


app = create_floor_app()
