"""What the plugin needs to know about the LangGraph Server it runs in.

Everything that depends on the server's version or runtime is read here, from
the server's own definitions where it publishes them, so other modules do not
guess. Supported: langgraph-api 0.10 through 0.16 (`SUPPORTED_API`) on the
in-memory runtime of `langgraph dev` (langgraph-runtime-inmem 0.30 through
0.36) or on a runtime that keeps its state elsewhere, such as
langgraph-runtime-pg (`LANGGRAPH_RUNTIME_EDITION=pg`). `check_server` refuses
anything else when the plugin is loaded.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import os
import sys
import uuid
from collections.abc import Awaitable, Callable, Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from journal_bridge.model.errors import JournalBridgeError

if TYPE_CHECKING:
    from langgraph_sdk.client import LangGraphClient

__all__ = [
    "SUPPORTED_API",
    "SUPPORTED_INMEM",
    "LifespanFirstMiddleware",
    "UnsupportedServer",
    "cancel_reason",
    "check_server",
    "extend_served_openapi",
    "frame_mode",
    "InProcessClient",
    "RuntimeUnreadable",
    "in_process_client",
    "is_cancel_part",
    "inmem_frame_stores",
    "join_mode_matches",
    "join_params",
    "join_query_modes",
    "join_query_with_modes",
    "joins_take_subgraph_events",
    "max_request_body_bytes",
    "protocol_v2_stream_modes",
    "run_stream_modes",
    "runtime_edition",
    "runtime_run_list",
    "runtime_run_status",
    "runtime_thread_search",
]

# (lowest, first unsupported) minor release of each package.
SUPPORTED_API = ((0, 10), (0, 17))
SUPPORTED_INMEM = ((0, 30), (0, 37))
_EDITION_ENV = "LANGGRAPH_RUNTIME_EDITION"


class UnsupportedServer(JournalBridgeError, RuntimeError):
    """The LangGraph Server around the plugin is a version it was not made for."""


def _minor(version: str) -> tuple[int, int] | None:
    parts = version.split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or "0")
    except (IndexError, ValueError):
        return None


def _range_text(bounds: tuple[tuple[int, int], tuple[int, int]]) -> str:
    (lo_major, lo_minor), (hi_major, hi_minor) = bounds
    return f">={lo_major}.{lo_minor},<{hi_major}.{hi_minor}"


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def runtime_edition() -> str:
    """The server's runtime: `inmem` (`langgraph dev`) unless the environment names another."""
    return os.environ.get(_EDITION_ENV, "").strip() or "inmem"


def check_server(
    versions: Mapping[str, str | None] | None = None, *, edition: str | None = None
) -> None:
    """Raise `UnsupportedServer`, saying what to install, unless the server is supported.

    `versions` maps distribution names to installed versions (default: read
    from the environment's package metadata).
    """
    lookup: Callable[[str], str | None] = (
        (lambda name: versions.get(name)) if versions is not None else _installed
    )
    edition = edition or runtime_edition()
    wanted = [("langgraph-api", SUPPORTED_API)]
    if edition == "inmem":
        wanted.append(("langgraph-runtime-inmem", SUPPORTED_INMEM))
    problems = []
    for name, bounds in wanted:
        found = lookup(name)
        minor = _minor(found) if found else None
        if minor is None or not bounds[0] <= minor < bounds[1]:
            problems.append(f"{name} {found or 'not installed'} (supported: {_range_text(bounds)})")
    if problems:
        pins = " ".join(f"'{name}{_range_text(bounds)}'" for name, bounds in wanted)
        raise UnsupportedServer(
            "journal-bridge cannot run in this LangGraph Server: "
            + "; ".join(problems)
            + f". Install supported versions (pip install {pins}) or set JOURNAL_BRIDGE_ENABLED=0."
        )

# langgraph-api 0.16's run schema, used when the running server publishes none.
_FALLBACK_STREAM_MODES = frozenset(
    {"values", "messages", "messages-tuple", "tasks", "checkpoints", "updates", "events", "debug", "custom"}
)


@functools.cache
def run_stream_modes() -> frozenset[str]:
    """The `stream_mode` values the server accepts when a run is created."""
    try:
        from langgraph_api.validation import openapi

        schema = openapi["components"]["schemas"]["RunCreateStateful"]["properties"]["stream_mode"]
        for option in schema.get("anyOf", []):
            if option.get("type") == "string" and option.get("enum"):
                return frozenset(option["enum"])
    except Exception:  # noqa: BLE001 - not inside a server, or another schema layout
        pass
    return _FALLBACK_STREAM_MODES


# langgraph-api 0.16's modes of every protocol v2 run, used when the server publishes none.
_FALLBACK_V2_MODES = ("values", "updates", "messages", "tools", "lifecycle", "custom", "tasks", "checkpoints")


@functools.cache
def protocol_v2_stream_modes() -> tuple[str, ...]:
    """The `stream_mode` the server gives every run created through protocol v2 (`run.start`)."""
    try:
        from langgraph_api.event_streaming.constants import DEFAULT_RUN_STREAM_MODES

        return tuple(DEFAULT_RUN_STREAM_MODES)
    except Exception:  # noqa: BLE001 - not inside a server, or an older one
        return _FALLBACK_V2_MODES


# What langgraph-api stores in place of the text of an exception it does not
# disclose. langgraph-api 0.10 and 0.11 disclose no cancel reason: the error a cancelled
# run leaves on its thread (`UserInterrupt`, `UserRollback`) always carries this
# placeholder; later releases store the reason itself ("interrupt requested via
# POST ...", "client disconnected from the run stream ..."). Read as text, so it
# holds for a remote server too (the SDK tee, the follower).
_UNDISCLOSED_ERROR_MESSAGE = "An internal error occurred"


# The errors a cancel raises in a run (`runs.cancel`, `on_disconnect="cancel"`,
# a rollback). langgraph-api 0.10 and 0.11 end a cancelled run's stream with an `error`
# part naming one of them; 0.16 just ends the stream.
_CANCEL_ERROR_TYPES = frozenset({"UserInterrupt", "UserRollback"})


def is_cancel_part(data: Any) -> bool:
    """Whether an `error` part says the run was cancelled, not that it failed."""
    return isinstance(data, Mapping) and data.get("error") in _CANCEL_ERROR_TYPES


def cancel_reason(error: Mapping[str, Any] | None) -> str | None:
    """The reason for a cancel that a thread's `error` gives; None when the server kept none."""
    message = (error or {}).get("message")
    if not isinstance(message, str) or not message or message == _UNDISCLOSED_ERROR_MESSAGE:
        return None
    return message


def max_request_body_bytes() -> int:
    """The largest request body the server reads (its 413 limit)."""
    try:
        from langgraph_api import config

        return int(config.HTTP_MAX_REQUEST_BODY_BYTES)
    except Exception:  # noqa: BLE001 - not inside a server
        return 300 * 1024 * 1024


def assistant_uuid(assistant_id: str) -> str:
    """The assistant a run request names: a graph id stands for that graph's default assistant."""
    try:
        from langgraph_api.graph import get_assistant_id

        return str(get_assistant_id(assistant_id))
    except Exception:  # noqa: BLE001 - not inside a server
        return assistant_id


def join_params(modes: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Query parameters that make a run-stream join read all of `modes`.

    The SDK sends a list as a repeated `stream_mode` parameter, of which the
    server (langgraph-api 0.16) reads only the last; it also reads a JSON array.
    """
    return {"stream_mode": orjson.dumps(list(modes)).decode()}


def join_query_modes(query_string: bytes) -> list[str] | None:
    """The modes a run-stream join with this query reads, as the server reads them;
    None when that reading gives anything but mode names.

    langgraph-api 0.10-0.16 read the last `stream_mode` parameter with
    `parse_stream_mode_param`: empty or absent, every mode; a JSON array, its
    items; anything else, that one mode.
    """
    from starlette.datastructures import QueryParams

    value = QueryParams(query_string).get("stream_mode")
    if not value:
        return []
    modes: Any = [value]
    if value.startswith("["):
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, list):
            modes = parsed
    if not all(isinstance(m, str) for m in modes):
        return None
    return modes


def join_query_with_modes(query_string: bytes, modes: list[str]) -> bytes:
    """The query with its `stream_mode` parameters replaced by one JSON array of `modes`;
    every other parameter as it was."""
    kept = [pair for pair in query_string.split(b"&") if pair and pair.split(b"=", 1)[0] != b"stream_mode"]
    kept.append(b"stream_mode=" + quote(orjson.dumps(modes).decode(), safe="").encode())
    return b"&".join(kept)


def join_mode_matches(event: str, modes: list[str] | tuple[str, ...]) -> bool:
    """Whether a run-stream join for `modes` sends a frame of `event` (`values`,
    `messages/partial`, `updates|sub:1`, ...): the filter of the runs' joins
    (none: every frame; `messages` and `messages-tuple` take every `messages*`
    event; a subgraph's event goes with its mode where the runtime's joins
    take subgraph events, `joins_take_subgraph_events`)."""
    if not modes or event in modes:
        return True
    if ("messages" in modes or "messages-tuple" in modes) and event.startswith("messages"):
        return True
    base, bar, _ = event.partition("|")
    return bool(bar) and base in modes and joins_take_subgraph_events()


# The first langgraph-runtime-inmem whose joins send a subgraph's event
# (`updates|sub:1`) with its mode (`updates`).
_INMEM_SUBGRAPH_JOINS = (0, 31)


def joins_take_subgraph_events(edition: str | None = None, inmem: str | None = None) -> bool:
    """Whether a run-stream join for named modes sends a subgraph's events of those modes.

    langgraph-runtime-inmem 0.31-0.36 and langgraph-runtime-pg do; 0.30
    (langgraph-api 0.10) sends only the events named exactly (and `messages*`
    for `messages`), so a join for `updates` gets no `updates|sub:1`. `edition`
    and `inmem` (the installed langgraph-runtime-inmem) default to this
    environment's.
    """
    if (edition or runtime_edition()) != "inmem":
        return True
    minor = _minor(inmem or _installed_inmem() or "")
    return minor is None or minor >= _INMEM_SUBGRAPH_JOINS


@functools.cache
def _installed_inmem() -> str | None:
    return _installed("langgraph-runtime-inmem")


def inmem_frame_stores() -> dict[Any, dict[Any, list[Any]]] | None:
    """The in-memory runtime's resumable frames, by thread and run; None on other runtimes.

    langgraph-runtime-inmem 0.30-0.36 keep them in the stream manager's
    `message_stores`, untrimmed for the life of the process. Other runtimes
    (Redis streams of langgraph-runtime-pg) expire frames themselves.
    """
    if runtime_edition() != "inmem":
        return None
    module = sys.modules.get("langgraph_runtime_inmem.inmem_stream")
    if module is None:
        return None
    return getattr(module.get_stream_manager(), "message_stores", None)


def frame_mode(message: Any) -> str | None:
    """The stream mode of one retained frame (`values`, `events`, ...), None if undecodable."""
    from langgraph_api.utils.stream_codec import decode_stream_message

    try:
        decoded = decode_stream_message(message.data, channel=message.topic)
    except Exception:  # noqa: BLE001 - an undecodable frame is kept
        return None
    return decoded.event_bytes.decode("utf-8", "replace").split("|", 1)[0]


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


# The host the plugin's own in-process requests go to. The transport ignores it;
# it only tells the plugin's requests from the graphs' in the client's log.
_PLUGIN_HOST = "journal-bridge.internal"


class _PluginRequestsFilter(logging.Filter):
    """Keeps httpx's line for each of the plugin's own requests out of the server's log
    (the reconciler alone would add one every few seconds); shown at debug level
    of the `journal_bridge` logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) > 1 and getattr(args[1], "host", None) == _PLUGIN_HOST:
            return logging.getLogger("journal_bridge").isEnabledFor(logging.DEBUG)
        return True


_REQUESTS_FILTER = _PluginRequestsFilter()


def in_process_client(headers: Mapping[str, str]) -> InProcessClient:
    """langgraph-sdk's in-process client of the server the plugin runs in, sending `headers`,
    with a run's status read from the server's runtime (`InProcessClient`).

    langgraph-sdk 0.4 keeps the httpx client at `client.http.client`; where it
    does not, the client keeps its own host and its requests are logged as any.
    """
    from langgraph_sdk import get_client

    client = get_client(headers=dict(headers))
    http = getattr(getattr(client, "http", None), "client", None)
    if http is not None and hasattr(http, "base_url"):
        http.base_url = http.base_url.copy_with(host=_PLUGIN_HOST)
        httpx_logger = logging.getLogger("httpx")
        if _REQUESTS_FILTER not in httpx_logger.filters:
            httpx_logger.addFilter(_REQUESTS_FILTER)
    return InProcessClient(client)


class InProcessClient:
    """The stock in-process SDK client; what it asks most often is read without a request.

    Everything the journal calls goes through langgraph-sdk as before, except
    what the journal asks of every run and every reconciler pass: the status
    of a finished run, the threads whose `updated_at` moved and a thread's
    newest runs. Those are read from the runtime the server's own routes use:
    an in-process request passes the server's whole middleware stack and
    costs a run about as much CPU as the join of its stream. Listings come
    back as the SDK would return them (the server's JSON of the same rows).
    Where the runtime cannot be read (`RuntimeUnreadable`), or a listing asks
    for more than those plain fields, the request goes through the SDK.
    `listings` counts both ways.
    """

    def __init__(self, client: LangGraphClient) -> None:
        self.listings: dict[str, int] = {"runtime": 0, "sdk": 0}
        self.assistants = client.assistants
        self.threads = _RuntimeListedThreads(client.threads, self.listings)
        self.runs = _RuntimeListedRuns(client.runs, self.listings)

    async def run_status(self, thread_id: str, run_id: str) -> tuple[bool, str | None]:
        """`(found, status)` of a run, from the runtime (`runtime_run_status`)."""
        return await runtime_run_status(thread_id, run_id)


# Fields a listing may select and still be read from the runtime: plain
# columns, never encrypted by the server (it decrypts others in the route).
_PLAIN_THREAD_FIELDS = frozenset({"thread_id", "created_at", "updated_at", "status"})
_PLAIN_RUN_FIELDS = frozenset({"run_id", "thread_id", "created_at", "updated_at", "status"})


def _plain_select(select: Any, plain: frozenset[str]) -> bool:
    return isinstance(select, list) and bool(select) and all(isinstance(f, str) and f in plain for f in select)


class _RuntimeListed:
    """An SDK resource (`client.threads`, `client.runs`) with plain listings read from the runtime."""

    def __init__(self, sdk: Any, listings: dict[str, int]) -> None:
        self._sdk = sdk
        self._listings = listings

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sdk, name)

    async def _listed(
        self,
        from_runtime: Callable[[], Awaitable[list[Any]]] | None,
        from_sdk: Callable[[], Awaitable[Any]],
        *,
        enough: Callable[[list[Any]], bool] = lambda _found: True,
    ) -> Any:
        """What `from_runtime` reads, when given, readable and `enough`; else what `from_sdk` asks."""
        if from_runtime is not None:
            try:
                found = await from_runtime()
            except RuntimeUnreadable:
                pass
            else:
                if enough(found):
                    self._listings["runtime"] += 1
                    return found
        self._listings["sdk"] += 1
        return await from_sdk()


class _RuntimeListedThreads(_RuntimeListed):
    async def search(self, **kwargs: Any) -> Any:
        plain = kwargs.keys() <= {"ids", "limit", "offset", "sort_by", "sort_order", "select"} and _plain_select(
            kwargs.get("select"), _PLAIN_THREAD_FIELDS
        )
        return await self._listed(
            (lambda: runtime_thread_search(**kwargs)) if plain else None, lambda: self._sdk.search(**kwargs)
        )


class _RuntimeListedRuns(_RuntimeListed):
    async def list(self, thread_id: str, **kwargs: Any) -> Any:
        plain = kwargs.keys() <= {"limit", "offset", "select"} and _plain_select(kwargs.get("select"), _PLAIN_RUN_FIELDS)
        return await self._listed(
            (lambda: runtime_run_list(thread_id, **kwargs)) if plain else None,
            lambda: self._sdk.list(thread_id, **kwargs),
            # None listed: the route tells a thread without runs from one that is gone (404).
            enough=bool,
        )


class RuntimeUnreadable(JournalBridgeError, LookupError):
    """The runtime of a LangGraph server cannot be read in process here."""


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


def extend_served_openapi(extend: Callable[[dict[str, Any]], Any]) -> bool:
    """Let `extend` add to the OpenAPI document the server built from the app's routes.

    langgraph-api builds that document (`CUSTOM_OPENAPI_SPEC`, from the routes'
    docstrings, which can only describe operations) when it loads the app, and
    merges it into `/openapi.json`, cached on first use. False, and nothing
    changed, where the server keeps no such document (or the app runs elsewhere).
    """
    # Only where the server loaded it: importing it elsewhere reads a server's config.
    # (By its full name: the package `langgraph_api.api` has a route function `openapi` too.)
    served = sys.modules.get("langgraph_api.api.openapi")
    spec = getattr(served, "CUSTOM_OPENAPI_SPEC", None)
    if not isinstance(spec, dict):
        return False
    extend(spec)
    cache_clear = getattr(getattr(served, "get_openapi_spec", None), "cache_clear", None)
    if callable(cache_clear):
        cache_clear()
    return True
