"""Who may read a thread's journal: exactly who may read the thread.

When the server authenticates callers (`auth` in langgraph.json, or LangSmith
auth), the journal asks the server itself: an in-process `GET
/threads/{thread_id}` through the same app, carrying the caller's headers, so
the configured auth handler and its `threads.read` filters decide. The check
is dispatched the way the caller's own request for the thread would be: under
the same mount (`http.mount_prefix`), to the path of the server's thread route
for that id and no other (see `thread_path`).

The server's answer becomes the journal's: 200 may read; 401 must
authenticate; 403, 404 and 422 (an id the server could never have) are all
"unknown thread" (404), the answer the built-in route gives for a thread the
caller may not see. Any other answer means no decision: `JournalAccessError`.

Without auth configured the journal is as open as the built-in routes are.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from typing import Literal
from urllib.parse import quote

import httpx
from starlette.exceptions import HTTPException
from starlette.requests import Request

from journal_bridge.model.errors import JournalAccessError

__all__ = [
    "JournalAccessError",
    "auth_configured",
    "readable_threads",
    "require_thread_access",
    "thread_access",
    "thread_path",
]

Decision = Literal[200, 401, 404]

_CONCURRENCY = 16

# Headers describing the caller's transport, not the caller: never forwarded
# to the in-process check.
_HOP_HEADERS = {
    b"host",
    b"content-length",
    b"content-type",
    b"transfer-encoding",
    b"connection",
    b"accept-encoding",
    b"keep-alive",
    b"upgrade",
}


def auth_configured() -> bool:
    """Whether the server authenticates callers (custom `auth` or LangSmith auth)."""
    try:
        from langgraph_api import config  # only inside a LangGraph Server
    except Exception:  # noqa: BLE001 - any import failure means "not in a server"
        auth = os.environ.get("LANGGRAPH_AUTH")
        auth_type = os.environ.get("LANGGRAPH_AUTH_TYPE", "noop")
        return bool(auth and auth.strip() not in ("", "null", "{}")) or auth_type not in ("", "noop")
    return bool(config.LANGGRAPH_AUTH) or config.LANGGRAPH_AUTH_TYPE not in ("", "noop")


def thread_path(thread_id: str, root_path: str = "") -> str:
    """The path of the server's own `GET /threads/{thread_id}` for exactly `thread_id`.

    Every character but the unreserved ones is percent-encoded, so the id is
    one path segment; an id of `.` or `..` has its dots encoded as well, so no
    URL normalisation can turn it into a dot segment and reach another route.
    """
    segment = quote(thread_id, safe="")
    if segment in (".", ".."):
        segment = segment.replace(".", "%2E")
    return f"{root_path}/threads/{segment}"


async def thread_access(request: Request, thread_id: str) -> Decision:
    """The server's decision whether the caller of `request` may read `thread_id`."""
    headers = [(key, value) for key, value in request.headers.raw if key.lower() not in _HOP_HEADERS]
    root_path = request.scope.get("root_path", "")
    transport = httpx.ASGITransport(app=request.app, raise_app_exceptions=False, root_path=root_path)
    async with httpx.AsyncClient(transport=transport, base_url="http://journal-access") as client:
        response = await client.get(thread_path(thread_id, root_path), headers=httpx.Headers(headers))
    if response.status_code == 200:
        return 200
    if response.status_code == 401:
        return 401
    if response.status_code in (403, 404, 422):
        return 404
    raise JournalAccessError(f"GET /threads/{{thread_id}} answered {response.status_code}")


async def require_thread_access(request: Request, thread_id: str) -> None:
    """Return when the caller may read `thread_id`; else raise the HTTP error to answer."""
    if not auth_configured():
        return
    decision = await thread_access(request, thread_id)
    if decision == 401:
        raise HTTPException(401, "authentication required")
    if decision == 404:
        raise HTTPException(404, f"thread {thread_id!r} not found")


async def readable_threads(request: Request, thread_ids: Iterable[str]) -> set[str]:
    """Which of `thread_ids` the caller may read: one check per thread, a few at a time.

    Raises 401 when the server asked the caller to authenticate for every one.
    """
    thread_ids = list(thread_ids)
    if not auth_configured():
        return set(thread_ids)
    gate = asyncio.Semaphore(_CONCURRENCY)

    async def check(thread_id: str) -> Decision:
        async with gate:
            return await thread_access(request, thread_id)

    decisions = await asyncio.gather(*(check(thread_id) for thread_id in thread_ids))
    if decisions and all(decision == 401 for decision in decisions):
        raise HTTPException(401, "authentication required")
    return {thread_id for thread_id, decision in zip(thread_ids, decisions, strict=True) if decision == 200}
