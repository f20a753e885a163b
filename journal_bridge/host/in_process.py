"""The in-process SDK client the journal reads through: the stock client, with what it
asks most often read from the server's runtime instead of by a request."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from journal_bridge.host.request_log import PLUGIN_HOST, REQUESTS_FILTER
from journal_bridge.host.runtime_reads import (
    RuntimeUnreadable,
    runtime_run_list,
    runtime_run_status,
    runtime_thread_search,
)

if TYPE_CHECKING:
    from langgraph_sdk.client import LangGraphClient

__all__ = ["InProcessClient", "in_process_client"]


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
        http.base_url = http.base_url.copy_with(host=PLUGIN_HOST)
        httpx_logger = logging.getLogger("httpx")
        if REQUESTS_FILTER not in httpx_logger.filters:
            httpx_logger.addFilter(REQUESTS_FILTER)
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
