"""What the server's runtime holds, read in process as the server's own routes read it.

A run's status, a thread search and a thread's runs, read on a connection of
the routes' runtime, as the server itself (no user's auth context), without a
request through the server's middleware. Outside a server they raise
`RuntimeUnreadable`.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson

from journal_bridge.model.errors import RuntimeUnreadable

__all__ = ["RuntimeUnreadable", "runtime_run_list", "runtime_run_status", "runtime_thread_search"]


def _server_ops(routes: str, ops: str, method: str) -> tuple[Any, Any]:
    """The runtime's operations `ops` and the `connect` the server's routes in
    module `routes` use.

    langgraph-api 0.10-0.16 bind both in `langgraph_api.api.runs` (`Runs`) and
    `langgraph_api.api.threads` (`Threads`), whichever runtime backs them
    (in-memory, Postgres, or the gRPC core).
    """
    module = sys.modules.get(routes)
    found, connect = getattr(module, ops, None), getattr(module, "connect", None)
    if found is None or connect is None or not callable(getattr(found, method, None)):
        raise RuntimeUnreadable(f"no LangGraph server's {ops.lower()} routes in this process")
    return found, connect


def _server_encoder() -> Callable[[Any], bytes]:
    """The JSON encoder the server's routes answer with (`langgraph_api.serde.json_dumpb`)."""
    dumps = getattr(sys.modules.get("langgraph_api.serde"), "json_dumpb", None)
    if not callable(dumps):
        raise RuntimeUnreadable("no LangGraph server's JSON encoder in this process")
    return dumps


async def _as_server(read: Callable[[], Any]) -> Any:
    """Run `read` as the server itself: no user's auth context applies (the task runs
    in a context of its own), as none applies to the plugin's in-process requests."""
    return await asyncio.create_task(read(), context=contextvars.Context())


async def _runtime_read(routes: str, ops: str, method: str, call: Callable[[Any, Any], Awaitable[Any]]) -> Any:
    """`call(operation, conn)`: the runtime's `ops.method` as the server's routes in
    module `routes` bind it, on a connection of theirs, run as the server
    (`_as_server`). Raises `RuntimeUnreadable` outside a server."""
    found_ops, connect = _server_ops(routes, ops, method)

    async def read() -> Any:
        async with connect() as conn:
            return await call(getattr(found_ops, method), conn)

    return await _as_server(read)


async def runtime_run_status(thread_id: str, run_id: str) -> tuple[bool, str | None]:
    """`(found, status)` of a run, read from the server's runtime as its `GET` route reads it.

    Raises `RuntimeUnreadable` outside a server; the runtime's errors propagate.
    """

    async def get(operation: Any, conn: Any) -> tuple[bool, str | None]:
        runs = _in_memory_runs(conn)
        if runs is not None:
            run = _newest_run(runs, run_id, thread_id)
        else:
            run = await anext(aiter(await operation(conn, run_id, thread_id=thread_id)), None)
        if run is None:
            return False, None
        status = run.get("status") if isinstance(run, Mapping) else getattr(run, "status", None)
        return True, None if status is None else str(status)

    return await _runtime_read("langgraph_api.api.runs", "Runs", "get", get)


def _in_memory_runs(conn: Any) -> list[Any] | None:
    """The in-memory runtime's list of all its runs, oldest first, or None for another runtime.

    langgraph-runtime-inmem 0.30-0.36 keep every run in `conn.store["runs"]`,
    appending new ones, and their `Runs.get` walks it from the oldest: 0.4 ms
    a read at a thousand runs, 1.9 ms at ten thousand, growing with every run
    the server keeps. The run the journal asks about has just ended: it is
    among the newest.
    """
    if not type(conn).__module__.startswith("langgraph_runtime_inmem"):
        return None
    try:
        runs = conn.store["runs"]
    except (AttributeError, KeyError, TypeError):
        return None
    return runs if isinstance(runs, list) else None


def _newest_run(runs: list[Any], run_id: str, thread_id: str) -> Mapping[str, Any] | None:
    """The run in the in-memory runtime's `runs`, looked for from the newest and
    matched as its `Runs.get` matches (run and thread ids); None if it is not there."""
    run_key, thread_key = uuid.UUID(str(run_id)), uuid.UUID(str(thread_id))
    for run in reversed(runs):
        if isinstance(run, Mapping) and run.get("run_id") == run_key and run.get("thread_id") == thread_key:
            return run
    return None


async def _runtime_listing(routes: str, ops: str, method: str, call: Callable[[Any, Any], Awaitable[Any]]) -> list[Any]:
    """The rows `call(operation, conn)` lists (an async iterator or a sequence), read
    as the server, returned as the server's JSON of them decoded -- as the SDK returns them."""
    dumps = _server_encoder()  # unreadable before anything is read

    async def rows(operation: Any, conn: Any) -> list[Any]:
        found = await call(operation, conn)
        if hasattr(found, "__aiter__"):
            return [row async for row in found]
        return list(found)

    return orjson.loads(dumps(await _runtime_read(routes, ops, method, rows)))


async def runtime_thread_search(
    *,
    ids: list[str] | None = None,
    limit: int = 10,
    offset: int = 0,
    sort_by: str | None = None,
    sort_order: str | None = None,
    select: list[str] | None = None,
) -> list[dict[str, Any]]:
    """`threads.search` with these arguments, read from the runtime as the server's
    search route reads it, as the SDK returns it. Raises `RuntimeUnreadable`
    outside a server; the runtime's errors propagate."""

    async def search(operation: Any, conn: Any) -> Any:
        found, _next_offset = await operation(
            conn, status=None, values=None, metadata=None, ids=ids, limit=limit, offset=offset,
            sort_by=sort_by, sort_order=sort_order, select=select,
        )
        return found

    return await _runtime_listing("langgraph_api.api.threads", "Threads", "search", search)


async def runtime_run_list(
    thread_id: str, *, limit: int = 10, offset: int = 0, select: list[str] | None = None
) -> list[dict[str, Any]]:
    """`runs.list` of a thread, read from the runtime as the server's route reads it,
    as the SDK returns it -- except that a thread that is gone lists no run here
    (the route answers 404). Raises `RuntimeUnreadable` outside a server."""

    async def search(operation: Any, conn: Any) -> Any:
        return await operation(conn, thread_id, limit=limit, offset=offset, status=None, select=select)

    return await _runtime_listing("langgraph_api.api.runs", "Runs", "search", search)

