"""HTTP routes of the journal: history, markers, raw run events, the viewer.

`journal_routes(prefix)` returns plain Starlette routes for the plugin's
`http.app`. Handlers read the store from `request.app.state.journal_store`,
which the app's lifespan sets. Who may read a thread's journal is decided in
`journal_bridge.web.access`; the OpenAPI description of each route, which the
server publishes in its `/openapi.json`, is in `journal_bridge.web.openapi`.

Errors are JSON `{"detail": "..."}`: 401 unauthenticated, 404 unknown thread,
422 a bad parameter (named first in the message), 503 store or access check
unavailable, 500 any other failure. A 5xx detail never carries the reason
(paths, SQL, driver messages): the reason goes to the server log.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import TYPE_CHECKING, overload

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from journal_bridge.capture.intercept import READER_HEADER
from journal_bridge.host.in_process import in_process_client
from journal_bridge.model.errors import JournalBridgeError, RunNotFound
from journal_bridge.projection import history, overview
from journal_bridge.web import openapi
from journal_bridge.web.access import (
    JournalAccessError,
    readable_threads,
    require_thread_access,
)
from journal_bridge.web.openapi import MAX_LIMIT, MAX_RUN_IDS, MAX_SEQ
from journal_bridge.web.prefix import DEFAULT_ROUTE_PREFIX, route_prefix

if TYPE_CHECKING:
    from journal_bridge.store.base import RunEventStore

__all__ = [
    "MAX_LIMIT",
    "MAX_SEQ",
    "journal_routes",
]

logger = logging.getLogger(__name__)

DEFAULT_LIMIT = 50
DEFAULT_EVENTS_LIMIT = 500


class _StoreUnavailable(JournalBridgeError):
    pass


def _store_error_types() -> tuple[tuple[type[BaseException], ...], type[BaseException]]:
    from journal_bridge.store import StoreError, StoreUnavailable

    return (StoreUnavailable, _StoreUnavailable), StoreError


def _default(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


class _JSON(JSONResponse):
    def render(self, content: object) -> bytes:
        return json.dumps(
            content, ensure_ascii=False, separators=(",", ":"), default=_default
        ).encode("utf-8")


def _error(status: int, detail: str, headers: dict[str, str] | None = None) -> Response:
    return _JSON({"detail": detail}, status_code=status, headers=headers)


class _BadParameter(JournalBridgeError):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@overload
def _int_param(request: Request, name: str, *, default: int, minimum: int = 0, maximum: int | None = None) -> int: ...
@overload
def _int_param(
    request: Request, name: str, *, default: None = None, minimum: int = 0, maximum: int | None = None
) -> int | None: ...
def _int_param(
    request: Request,
    name: str,
    *,
    default: int | None = None,
    minimum: int = 0,
    maximum: int | None = None,
) -> int | None:
    values = request.query_params.getlist(name)
    if not values:
        return default
    if len(values) > 1:
        raise _BadParameter(f"{name}: given {len(values)} times; give it once")
    raw = values[0].strip()
    try:
        value = int(raw)
    except ValueError:
        raise _BadParameter(f"{name}: must be an integer, got {values[0]!r}") from None
    if value < minimum:
        if minimum == 0:
            raise _BadParameter(f"{name}: must not be negative, got {value}")
        raise _BadParameter(f"{name}: must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise _BadParameter(f"{name}: must be at most {maximum}, got {value}")
    return value


def _seq_param(request: Request, name: str) -> int | None:
    return _int_param(request, name, maximum=MAX_SEQ)


def _text(name: str, value: str) -> str:
    # No store can hold a NUL character in a text column (Postgres refuses it).
    if "\x00" in value:
        raise _BadParameter(f"{name}: must not contain a NUL character")
    return value


def _single_text(request: Request, name: str) -> str | None:
    values = request.query_params.getlist(name)
    if not values:
        return None
    if len(values) > 1:
        raise _BadParameter(f"{name}: given {len(values)} times; give it once")
    return _text(name, values[0].strip()) or None


def _thread_id(request: Request) -> str:
    return _text("thread_id", request.path_params["thread_id"])


def _server_thread_id(request: Request) -> str:
    """The path's thread id, which names a thread of the server only if it is a UUID."""
    thread_id = request.path_params["thread_id"]
    try:
        uuid.UUID(thread_id)
    except ValueError:
        raise _BadParameter(
            f"thread_id: must be a UUID, as the server's thread ids are; got {thread_id!r}"
        ) from None
    return thread_id


@dataclass(frozen=True)
class _Cursor:
    """The page a history read asks for: its size and its cursor (at most one)."""

    limit: int
    before_seq: int | None
    after_seq: int | None


@dataclass(frozen=True)
class _BranchChoice:
    """The branch a history read asks for: ending with `run_id`, as of a checkpoint
    (`checkpoint`: its state, as the server gives it), or (neither) the current one."""

    run_id: str | None = None
    checkpoint: Mapping[str, object] | None = None


def _cursor_params(request: Request, default_limit: int = DEFAULT_LIMIT) -> _Cursor:
    limit = _int_param(
        request, "limit", default=default_limit, minimum=1, maximum=MAX_LIMIT
    )
    before_seq = _seq_param(request, "before_seq")
    after_seq = _seq_param(request, "after_seq")
    if before_seq is not None and after_seq is not None:
        raise _BadParameter(
            "before_seq and after_seq: give at most one cursor "
            "(before_seq pages to older items, after_seq to newer ones)"
        )
    return _Cursor(limit, before_seq, after_seq)


async def _branch_param(request: Request, thread_id: str) -> _BranchChoice:
    """`run_id`: the branch that ends with that run; `checkpoint_id`: the branch as
    of that checkpoint (its state asked of the server); neither: the current one."""
    run_id = request.query_params.get("run_id")
    checkpoint_id = request.query_params.get("checkpoint_id")
    if run_id is not None and checkpoint_id is not None:
        raise _BadParameter("run_id and checkpoint_id: give at most one")
    for name, value in (("run_id", run_id), ("checkpoint_id", checkpoint_id)):
        if value is not None and (not value or len(value) > 256 or "\x00" in value):
            raise _BadParameter(f"{name}: expected an id of the thread")
    if run_id is not None:
        return _BranchChoice(run_id=run_id)
    if checkpoint_id is None:
        return _BranchChoice()
    client = in_process_client({READER_HEADER: "1"})
    try:
        state = await client.threads.get_state(thread_id, checkpoint_id=checkpoint_id)
    except Exception as exc:  # noqa: BLE001 - the server's own answer decides
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (404, 422):
            raise HTTPException(404, f"checkpoint {checkpoint_id!r} not found in thread {thread_id!r}") from None
        raise
    # An unknown checkpoint comes back as an empty state with neither metadata nor time.
    if not state or not state.get("checkpoint") or state.get("created_at") is None:
        raise HTTPException(404, f"checkpoint {checkpoint_id!r} not found in thread {thread_id!r}")
    return _BranchChoice(checkpoint=state)


async def _page_of(read: Awaitable[Mapping[str, object]]) -> Response:
    try:
        return _JSON(await read)
    except RunNotFound as exc:
        raise HTTPException(404, str(exc.args[0]) if exc.args else "no such run") from None


def _store(request: Request) -> RunEventStore:
    store = getattr(request.app.state, "journal_store", None)
    if store is None:
        raise _StoreUnavailable("the journal store is not open yet")
    return store


async def _known_thread(request: Request, thread_id: str) -> RunEventStore:
    await require_thread_access(request, thread_id)
    store = _store(request)
    if not await store.has_thread(thread_id):
        raise HTTPException(404, f"thread {thread_id!r} not found in the journal")
    return store


_Endpoint = Callable[[Request], Awaitable[Response]]


def _handler(func: _Endpoint, operation: dict[str, object]) -> _Endpoint:
    """Wrap an endpoint so every failure is the JSON error the API promises.

    The wrapper carries the route's OpenAPI operation in its docstring, where
    the server looks for it.
    """
    unavailable, store_error = _store_error_types()

    async def endpoint(request: Request) -> Response:
        try:
            return await func(request)
        except _BadParameter as exc:
            return _error(422, exc.detail)
        except HTTPException as exc:
            return _error(exc.status_code, str(exc.detail))
        except unavailable as exc:
            logger.warning("journal-bridge: %s %s: store unavailable: %s", request.method, request.url.path, exc)
            return _error(503, "the journal store is unavailable; retry shortly", {"Retry-After": "5"})
        except JournalAccessError as exc:
            logger.warning("journal-bridge: %s %s: access check failed: %s", request.method, request.url.path, exc)
            return _error(503, "the access check is unavailable; retry shortly", {"Retry-After": "5"})
        except store_error:
            logger.exception("journal-bridge: %s %s: store error", request.method, request.url.path)
            return _error(500, "the journal store failed; the reason is in the server log")
        except Exception:
            logger.exception("journal-bridge: %s %s failed", request.method, request.url.path)
            return _error(500, "the journal failed; the reason is in the server log")

    endpoint.__name__ = func.__name__
    openapi.describe(endpoint, operation, func.__doc__)
    return endpoint


async def thread_messages(request: Request) -> Response:
    """A page of the thread's history: message rows and summary markers in seq order.

    No cursor gives the newest `limit` items; `before_seq` pages to older
    items, `after_seq` to newer ones. An item is never split or repeated
    across pages. The items are the thread's current branch; `run_id` reads
    the branch that ends with that run (a regenerated or edited turn's
    other versions), `checkpoint_id` the branch as of that checkpoint (what
    a branch switcher shows), and the first item after a fork lists the
    alternatives there in its `branch` field.
    """
    return await _history_response(request, default_limit=DEFAULT_LIMIT, markers_only=False)


async def thread_markers(request: Request) -> Response:
    """The thread's summary markers, paged like the messages."""
    return await _history_response(request, default_limit=MAX_LIMIT, markers_only=True)


async def _history_response(request: Request, *, default_limit: int, markers_only: bool) -> Response:
    """A page of the thread's history read from the request's cursor and branch
    parameters; of its summary markers alone with `markers_only`."""
    thread_id = _thread_id(request)
    cursor = _cursor_params(request, default_limit=default_limit)
    store = await _known_thread(request, thread_id)
    branch = await _branch_param(request, thread_id)
    return await _page_of(history.history_page(
        store, thread_id, limit=cursor.limit, before_seq=cursor.before_seq, after_seq=cursor.after_seq,
        run_id=branch.run_id, checkpoint=branch.checkpoint, markers_only=markers_only,
    ))


async def thread_repair(request: Request) -> Response:
    """Backfill the thread's journal from its checkpoints; the backfill summary.

    Waits (up to 10 s) for the bridge to finish journaling the thread first, so
    the two never write the same message under different keys; 409 if it has
    not, or if a run is in progress on the thread.

    Access is the same as for reading the journal (the server's decision for
    `GET /threads/{thread_id}`), although the route writes. It only appends
    records derived from the thread's own checkpoint history, which a reader
    may already fetch through `/threads/{thread_id}/history`; it never changes
    or removes a record, and it is idempotent (messages and markers already
    journaled, by id, are skipped). So a reader can at most make the journal
    show what the checkpoints already show. Asking the server for an update
    decision instead would mean running the auth handler's `threads.update`
    for an update that never happens.
    """
    from langgraph_sdk import get_client

    from journal_bridge.capture.backfill import BUSY, NOT_FOUND, backfill_thread

    thread_id = _server_thread_id(request)
    since = request.query_params.get("since_checkpoint") or None
    if since is not None:
        _text("since_checkpoint", since)
    await require_thread_access(request, thread_id)
    store = _store(request)
    journal = getattr(request.app.state, "journal", None)
    bridge = getattr(journal, "bridge", None)
    if bridge is not None:
        try:
            await asyncio.wait_for(bridge.wait_for_thread(thread_id), timeout=10)
            await asyncio.wait_for(bridge.drain(), timeout=10)
        except TimeoutError:
            return _error(409, "the journal is still catching up on this thread; retry shortly",
                          {"Retry-After": "5"})
    bridge = getattr(getattr(request.app.state, "journal", None), "bridge", None)
    result = await backfill_thread(
        get_client(), store, thread_id, since_checkpoint=since, default_owner=getattr(bridge, "default_owner", None)
    )
    if result.status == NOT_FOUND:
        raise HTTPException(404, f"thread {thread_id!r} not found")
    if result.status == BUSY:
        return _error(409, "a run is in progress on this thread; retry once it is idle",
                      {"Retry-After": "5"})
    return _JSON(result.to_dict())


async def run_events(request: Request) -> Response:
    """A run's raw records, ascending seq, for audit; optionally filtered by event type.

    Pages forwards only: `next_after_seq` continues where the page ended.
    """
    thread_id = _thread_id(request)
    run_id = _text("run_id", request.path_params["run_id"])
    limit = _int_param(
        request, "limit", default=DEFAULT_EVENTS_LIMIT, minimum=1, maximum=MAX_LIMIT
    )
    after_seq = _seq_param(request, "after_seq")
    if request.query_params.getlist("before_seq"):
        raise _BadParameter("before_seq: run events page forwards only; use after_seq")
    event_types = [
        _text("event_types", name.strip())
        for value in request.query_params.getlist("event_types")
        for name in value.split(",")
        if name.strip()
    ]
    store = await _known_thread(request, thread_id)
    records = await store.list_events(
        thread_id,
        run_id,
        event_types=event_types or None,
        limit=limit + 1,
        after_seq=after_seq,
    )
    has_more = len(records) > limit
    records = records[:limit]
    return _JSON(
        {
            "data": [record.to_dict() for record in records],
            "has_more": has_more,
            "next_after_seq": records[-1].seq if records else after_seq,
        }
    )


async def threads_index(request: Request) -> Response:
    """Recently active journaled threads, newest first; only those the caller may read.

    Each thread comes with its `title` (the first human message), `assistant_id`,
    `message_count` and `marker_count`. `q` keeps the threads whose messages
    contain the text (any ASCII case); a store that cannot search matches `q`
    against the titles and ids of the recent threads instead.
    """
    limit = _int_param(
        request, "limit", default=DEFAULT_LIMIT, minimum=1, maximum=MAX_LIMIT
    )
    query = _single_text(request, "q")
    store = _store(request)
    searched = await overview.search_threads(store, query, limit=limit) if query else None
    threads = searched if searched is not None else await store.list_threads(limit=limit)
    readable = await readable_threads(request, [thread["thread_id"] for thread in threads])
    data = [
        await overview.thread_overview(store, thread)
        for thread in threads
        if thread["thread_id"] in readable
    ]
    if query and searched is None:
        folded = query.casefold()
        data = [
            thread
            for thread in data
            if folded in thread["thread_id"].casefold() or folded in (thread["title"] or "").casefold()
        ]
    return _JSON({"data": data})


async def thread_runs(request: Request) -> Response:
    """How the thread's runs went: status, start, end, duration and error of each run asked for.

    `run_ids` names the runs (comma-separated or repeated, at most 100), typically
    those of a history page; the answer keeps their order.
    """
    thread_id = _thread_id(request)
    run_ids = [
        _text("run_ids", name.strip())
        for value in request.query_params.getlist("run_ids")
        for name in value.split(",")
        if name.strip()
    ]
    if len(run_ids) > MAX_RUN_IDS:
        raise _BadParameter(f"run_ids: at most {MAX_RUN_IDS} runs per request, got {len(run_ids)}")
    store = await _known_thread(request, thread_id)
    return _JSON({"data": await overview.run_summaries(store, thread_id, run_ids)})


def _viewer_page(name: str, title: str, prefix: str, summary: str) -> _Endpoint:
    # Read once, when the routes are built: a request never touches the disk.
    # Every page is the same document around its own title and body
    # (`viewer/page.html`), so the pages load the same stylesheet and script.
    viewer = resources.files("journal_bridge.web").joinpath("viewer")
    template = (
        viewer.joinpath("page.html")
        .read_text("utf-8")
        .replace("__TITLE__", html.escape(title))
        .replace("__BODY__\n", viewer.joinpath(name).read_text("utf-8"))
    )

    async def page(request: Request) -> Response:
        # The page learns where the API lives from a meta tag; root_path covers
        # a server mounted under a prefix.
        base = request.scope.get("root_path", "") + prefix
        body = template.replace("__JOURNAL_PREFIX__", html.escape(base, quote=True))
        return Response(
            body,
            media_type="text/html; charset=utf-8",
            headers={
                "Cache-Control": "no-store",
                "Content-Security-Policy": (
                    "default-src 'self'; script-src 'self'; style-src 'self'; "
                    "img-src 'self' data:; object-src 'none'; base-uri 'none'"
                ),
                "X-Content-Type-Options": "nosniff",
            },
        )

    page.__name__ = f"viewer_{name.split('.')[0]}"
    openapi.describe(page, openapi.viewer_operation(f"journal_{page.__name__}", name == "thread.html"), summary)
    return page


# The API: path under the prefix, method, endpoint and OpenAPI operation of each route.
_API = (
    ("/threads", "GET", threads_index, openapi.THREADS),
    ("/threads/{thread_id}/messages", "GET", thread_messages, openapi.MESSAGES),
    ("/threads/{thread_id}/markers", "GET", thread_markers, openapi.MARKERS),
    ("/threads/{thread_id}/repair", "POST", thread_repair, openapi.REPAIR),
    ("/threads/{thread_id}/runs", "GET", thread_runs, openapi.RUNS),
    ("/threads/{thread_id}/runs/{run_id}/events", "GET", run_events, openapi.RUN_EVENTS),
)
# The viewer's pages: path under the prefix, the page's body, its title, and
# the summary the OpenAPI document gives it.
_VIEWER = (
    ("/ui", "index.html", "Journal: recent threads", "The viewer: the journaled threads."),
    (
        "/ui/threads/{thread_id}",
        "thread.html",
        "Journal: thread",
        "The viewer: a thread's conversation, compactions marked inline.",
    ),
)


def journal_routes(prefix: str | None = None) -> list[BaseRoute]:
    """The journal's routes under `prefix` (default /journal; "" or "/" for the root)."""
    prefix = route_prefix(DEFAULT_ROUTE_PREFIX if prefix is None else prefix)
    files = resources.files("journal_bridge.web")
    return [
        *(
            Route(f"{prefix}{path}", _handler(endpoint, operation), methods=[method])
            for path, method, endpoint, operation in _API
        ),
        *(
            Route(f"{prefix}{path}", _viewer_page(name, title, prefix, summary), methods=["GET"])
            for path, name, title, summary in _VIEWER
        ),
        Mount(
            f"{prefix}/ui/static",
            app=StaticFiles(directory=str(files.joinpath("viewer"))),
            name="journal-viewer-static",
        ),
        # Modules other apps' pages import (history.js); cross-origin loads follow
        # the server's CORS setting, as the API does.
        Mount(
            f"{prefix}/static",
            app=StaticFiles(directory=str(files.joinpath("static"))),
            name="journal-static",
        ),
    ]
