"""The `http.app` of the paired benchmark's servers: the plugin and the floor in one process.

Not the plugin: a server `benchmarks/paired.py` starts with this file as its
`http.app`. It is the plugin's own app (`journal_bridge.server.create_app`,
with the environment's settings), except that a run-creating request that
carries the floor's header (`FLOOR_HEADER` of `floor_app.py`) is handed to
the floor's sink (one SDK join of the run, frames discarded) instead of the
journal, and one that carries `PLAIN_HEADER` to neither: the server runs it
as without the plugin's capture (the reference of a client that asks for
`events` itself). The two kinds of requests a paired benchmark sends then
share one process: its interpreter, its heap and its full collections, the
runtime's state, the machine's moment. The difference between their rounds
is the journal's cost above the floor (or above that reference) without the
luck of two processes in it. The plugin's other
middleware sees both kinds of requests, so what it costs per request is on
both sides of the difference.

The paired benchmark runs it with the reconciler off
(`JOURNAL_BRIDGE_RECONCILE_INTERVAL=0`): otherwise the reconciler would find
the floor's runs unjournaled and read them whole.

`/journal/health` answers for both readers: every count is the journal's plus
the floor's, so `wait_journal_idle` waits for the floor's joins too.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Scope

from journal_bridge.capture.intercept import RunObserverMiddleware
from journal_bridge.server import create_app

# The counts `wait_journal_idle` reads; the paired health adds the floor's to the journal's.
_SUMMED = ("active_runs", "backlog", "runs_observed", "runs_completed", "runs_failed")


def _floor_module() -> Any:
    """`tests/harness/bench/floor_app.py`, loaded from beside this file (the server loads this one by path)."""
    path = Path(__file__).resolve().with_name("floor_app.py")
    spec = importlib.util.spec_from_file_location("journal_bridge_bench_floor_app", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_FLOOR = _floor_module()
_FLOOR_HEADER_KEY = _FLOOR.FLOOR_HEADER.encode("latin-1")
_PLAIN_HEADER_KEY = _FLOOR.PLAIN_HEADER.encode("latin-1")


def _carries(scope: Scope, header: bytes) -> bool:
    return any(name == header for name, _ in scope.get("headers", ()))


def paired_health(journal: dict[str, Any], floor: dict[str, Any]) -> dict[str, Any]:
    """The journal's health with the floor's counts added (and the floor's own under `floor`)."""
    merged = dict(journal)
    for key in _SUMMED:
        merged[key] = journal.get(key, 0) + floor.get(key, 0)
    merged["floor"] = floor
    return merged


def create_paired_app() -> Starlette:
    app = create_app()
    journal = app.state.journal
    if journal is None:
        raise RuntimeError("the paired server needs the journal enabled")
    floor = _FLOOR.FloorSink()

    def sink_for(scope: Scope) -> Any:
        if _carries(scope, _PLAIN_HEADER_KEY):
            return None  # forwarded untouched: the middleware stays out
        return floor if _carries(scope, _FLOOR_HEADER_KEY) else journal.sink_for(scope)

    replaced = 0
    middleware = []
    for entry in app.user_middleware:
        if entry.cls is RunObserverMiddleware:
            # Starlette keeps a middleware's keyword arguments as `kwargs` (0.35 on) or `options`.
            options = getattr(entry, "kwargs", None) or entry.options
            entry = Middleware(RunObserverMiddleware, sink_for=sink_for, setting=options["setting"])
            replaced += 1
        middleware.append(entry)
    if replaced != 1:
        raise RuntimeError(f"expected one RunObserverMiddleware in the plugin's app, found {replaced}")
    app.user_middleware = middleware

    async def health(request: Request) -> JSONResponse:
        return JSONResponse(paired_health(journal.health(), floor.health()))

    # Before the plugin's own `/journal/health`, which it shadows.
    app.router.routes.insert(0, Route("/journal/health", health, methods=["GET"]))
    app.state.floor = floor
    return app


app = create_paired_app()
