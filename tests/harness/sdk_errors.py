"""The errors langgraph-sdk raises for a server's answers, for tests that stand in for a server."""

from __future__ import annotations

import httpx
from langgraph_sdk.errors import NotFoundError


def run_not_found(thread_id: str, run_id: str) -> NotFoundError:
    """What `runs.get` raises for a run the server does not have (a 404)."""
    request = httpx.Request("GET", f"http://server/threads/{thread_id}/runs/{run_id}")
    return NotFoundError("run not found", response=httpx.Response(404, request=request), body=None)
