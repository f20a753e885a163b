"""A client for a server's journal API, async and sync, on langgraph-sdk's HTTP layer.

    from journal_bridge.client import get_journal_client

    journal = get_journal_client(url="http://localhost:2024")
    async for item in journal.iter_history(thread_id):   # oldest first, markers inline
        ...
    page = await journal.page(thread_id, limit=50)       # the newest 50
    older = await journal.page(thread_id, before_seq=page["next_before_seq"])

`get_journal_client` and `get_sync_journal_client` take the arguments of
`langgraph_sdk.get_client` / `get_sync_client` (`url`, `api_key`, `headers`,
`timeout`) and build the client through them, so the URL default, the
`x-api-key` header (from `api_key`, else `LANGGRAPH_API_KEY`,
`LANGSMITH_API_KEY`, `LANGCHAIN_API_KEY`; `api_key=None` sends none), the
user agent, timeouts and retries are the SDK's. An existing SDK client can be
wrapped instead (`JournalClient(client)`), sharing its connections. Errors are
the SDK's (`langgraph_sdk.errors.NotFoundError` for an unknown thread, ...),
carrying the journal's `{"detail": ...}`.

Pages and cursors are those of the routes (`journal_bridge.projection.history`): a page
is a `JournalHistoryPage` (the types of `journal_bridge.model.shapes`, each the
schema of that name in the served OpenAPI document); `before_seq` pages to
older items, `after_seq` to newer ones.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Generator, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, TypeAlias, TypedDict, TypeVar, cast
from urllib.parse import quote

from journal_bridge.model.errors import InvalidArgument
from journal_bridge.model.shapes import (
    JournalHistoryItem,
    JournalHistoryPage,
    JournalMarkersPage,
    JournalRunEvent,
    JournalRunEventsPage,
    JournalRunSummary,
    JournalRunSummaryList,
    JournalSummaryMarker,
    JournalThread,
    JournalThreadList,
)
from journal_bridge.settings import Settings, route_prefix

if TYPE_CHECKING:
    from langgraph_sdk.client import LangGraphClient, SyncLangGraphClient

__all__ = [
    "JournalClient",
    "SyncJournalClient",
    "get_journal_client",
    "get_sync_journal_client",
]

MAX_PAGE = 500


class _NotGiven:
    """`api_key` left out: the SDK reads it from the environment."""


_NOT_GIVEN = _NotGiven()
_Shape = TypeVar("_Shape")
# What `timeout` may be, as the SDK takes it: seconds, or (connect, read[, write, pool]) seconds.
_Timeout: TypeAlias = (
    float | tuple[float | None, float | None] | tuple[float | None, float | None, float | None, float | None] | None
)


def _prefix(prefix: str | None) -> str:
    if prefix is None:
        return Settings.from_env(only=["route_prefix"]).route_prefix
    return route_prefix(prefix)


_Params = dict[str, str | int]
_Request = tuple[str, _Params]
# A paged read: yields the request of each page and is sent the page it got
# back, from which it works out the next request (or stops). Both clients run
# the same walks, one blocking and one awaiting each request.
_Walk = Generator[_Request, Mapping[str, object], None]
_Branch = dict[str, str]  # the query parameters naming a branch


class _Requests:
    """Paths and query parameters of the journal routes, and the paged reads
    over them, shared by both clients."""

    def __init__(self, prefix: str | None) -> None:
        self.prefix = _prefix(prefix)

    def thread(self, thread_id: str, tail: str) -> str:
        return f"{self.prefix}/threads/{quote(thread_id, safe='')}{tail}"

    def messages(
        self, thread_id: str, limit: int, before_seq: int | None, after_seq: int | None, branch: _Branch | None = None
    ) -> _Request:
        return self.thread(thread_id, "/messages"), _params(
            limit=limit, before_seq=before_seq, after_seq=after_seq, **(branch or {})
        )

    def markers(
        self, thread_id: str, limit: int, before_seq: int | None, after_seq: int | None, branch: _Branch | None = None
    ) -> _Request:
        return self.thread(thread_id, "/markers"), _params(
            limit=limit, before_seq=before_seq, after_seq=after_seq, **(branch or {})
        )

    def run_events(
        self, thread_id: str, run_id: str, event_types: Iterable[str] | None, after_seq: int | None, limit: int
    ) -> _Request:
        path = self.thread(thread_id, f"/runs/{quote(run_id, safe='')}/events")
        types = ",".join(event_types) if event_types is not None else None
        return path, _params(event_types=types, after_seq=after_seq, limit=limit)

    def runs(self, thread_id: str, run_ids: Iterable[str]) -> _Request:
        return self.thread(thread_id, "/runs"), _params(run_ids=",".join(run_ids))

    def threads(self, limit: int, q: str | None) -> _Request:
        return f"{self.prefix}/threads", _params(limit=limit, q=q)

    def history_pages(
        self,
        thread_id: str,
        page_size: int,
        before_seq: int | None,
        after_seq: int | None,
        newest_first: bool,
        branch: _Branch,
    ) -> _Walk:
        if newest_first:
            if after_seq is not None:
                raise InvalidArgument("after_seq: newest_first pages go backwards; use before_seq")
            return _paged(
                lambda cursor: self.messages(thread_id, page_size, cursor, None, branch), before_seq, "next_before_seq"
            )
        if before_seq is not None:
            raise InvalidArgument("before_seq: oldest-first pages go forwards; use after_seq")
        return _paged(
            lambda cursor: self.messages(thread_id, page_size, None, cursor, branch), after_seq or 0, "next_after_seq"
        )

    def marker_pages(self, thread_id: str, branch: _Branch) -> _Walk:
        return _paged(lambda cursor: self.markers(thread_id, MAX_PAGE, None, cursor, branch), 0, "next_after_seq")

    def run_event_pages(self, thread_id: str, run_id: str, event_types: list[str] | None) -> _Walk:
        return _paged(
            lambda cursor: self.run_events(thread_id, run_id, event_types, cursor, MAX_PAGE), None, "next_after_seq"
        )


def _paged(request: Callable[[int | None], _Request], cursor: int | None, next_cursor: str) -> _Walk:
    """The pages from `cursor` on, each asked for at the cursor the page before it names."""
    while True:
        page = yield request(cursor)
        following = page[next_cursor]
        if not page["has_more"] or not isinstance(following, int):
            return
        cursor = following


def _params(**values: str | int | None) -> _Params:
    return {name: value for name, value in values.items() if value is not None}


def _next_request(walk: _Walk, page: Mapping[str, object] | None) -> _Request | None:
    """The walk's request after `page` (its first without one); None once it is done."""
    try:
        return next(walk) if page is None else walk.send(page)
    except StopIteration:
        return None


def _branch(run_id: str | None, checkpoint_id: str | None) -> _Branch:
    """The query parameters naming a branch: the one ending with `run_id`, the one
    as of `checkpoint_id`, or (neither) the thread's current one."""
    if run_id is not None and checkpoint_id is not None:
        raise InvalidArgument("run_id and checkpoint_id: give at most one")
    return {name: value for name, value in (("run_id", run_id), ("checkpoint_id", checkpoint_id)) if value is not None}


def _check_cursors(before_seq: int | None, after_seq: int | None) -> None:
    if before_seq is not None and after_seq is not None:
        raise InvalidArgument("before_seq and after_seq: give at most one cursor")


class JournalClient:
    """The journal of one server, async. Wraps a `langgraph_sdk` client (`get_client`)."""

    def __init__(self, client: LangGraphClient, *, prefix: str | None = None) -> None:
        self.sdk = client
        self._http = client.http
        self._requests = _Requests(prefix)

    async def __aenter__(self) -> JournalClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.sdk.aclose()

    async def _get(self, request: _Request, shape: type[_Shape]) -> _Shape:
        """The answer to `request`: the JSON of the schema `shape` is named for (the server's word)."""
        path, params = request
        return cast(_Shape, await self._http.get(path, params=params))

    async def _walk(self, walk: _Walk, shape: type[_Shape]) -> AsyncIterator[_Shape]:
        request = _next_request(walk, None)
        while request is not None:
            page = await self._get(request, shape)
            yield page
            request = _next_request(walk, cast(Mapping[str, object], page))

    async def page(
        self,
        thread_id: str,
        *,
        limit: int = 50,
        before_seq: int | None = None,
        after_seq: int | None = None,
        run_id: str | None = None,
        checkpoint_id: str | None = None,
    ) -> JournalHistoryPage:
        """One page of messages and markers; no cursor gives the newest `limit` items.

        Of the thread's current branch; `run_id` reads the branch that ends with
        that run, `checkpoint_id` the branch as of that checkpoint (every read of
        the history takes both)."""
        _check_cursors(before_seq, after_seq)
        branch = _branch(run_id, checkpoint_id)
        return await self._get(self._requests.messages(thread_id, limit, before_seq, after_seq, branch), JournalHistoryPage)

    async def newest(
        self, thread_id: str, *, limit: int = 50, run_id: str | None = None, checkpoint_id: str | None = None
    ) -> JournalHistoryPage:
        """The newest `limit` items (a page; `next_before_seq` continues to older ones)."""
        return await self.page(thread_id, limit=limit, run_id=run_id, checkpoint_id=checkpoint_id)

    async def pages(
        self,
        thread_id: str,
        *,
        page_size: int = MAX_PAGE,
        before_seq: int | None = None,
        after_seq: int | None = None,
        newest_first: bool = False,
        run_id: str | None = None,
        checkpoint_id: str | None = None,
    ) -> AsyncIterator[JournalHistoryPage]:
        """Pages in turn: oldest first from `after_seq` (default the start), or with
        `newest_first` from the newest item (or `before_seq`) back to the oldest."""
        branch = _branch(run_id, checkpoint_id)
        walk = self._requests.history_pages(thread_id, page_size, before_seq, after_seq, newest_first, branch)
        async for page in self._walk(walk, JournalHistoryPage):
            yield page

    async def iter_history(
        self,
        thread_id: str,
        *,
        after_seq: int | None = None,
        page_size: int = MAX_PAGE,
        run_id: str | None = None,
        checkpoint_id: str | None = None,
    ) -> AsyncIterator[JournalHistoryItem]:
        """Every item after `after_seq` (default: all), oldest first, markers inline."""
        async for page in self.pages(
            thread_id, page_size=page_size, after_seq=after_seq, run_id=run_id, checkpoint_id=checkpoint_id
        ):
            for item in page["data"]:
                yield item

    async def history(
        self,
        thread_id: str,
        *,
        page_size: int = MAX_PAGE,
        run_id: str | None = None,
        checkpoint_id: str | None = None,
    ) -> list[JournalHistoryItem]:
        """The whole history, oldest first."""
        items = self.iter_history(thread_id, page_size=page_size, run_id=run_id, checkpoint_id=checkpoint_id)
        return [item async for item in items]

    async def markers(
        self, thread_id: str, *, run_id: str | None = None, checkpoint_id: str | None = None
    ) -> list[JournalSummaryMarker]:
        """Every summary marker of the thread's branch, oldest first."""
        walk = self._requests.marker_pages(thread_id, _branch(run_id, checkpoint_id))
        return [marker async for page in self._walk(walk, JournalMarkersPage) for marker in page["data"]]

    async def run_events(
        self,
        thread_id: str,
        run_id: str,
        *,
        event_types: Iterable[str] | None = None,
        after_seq: int | None = None,
        limit: int = MAX_PAGE,
    ) -> JournalRunEventsPage:
        """A page of a run's raw records: `{"data", "has_more", "next_after_seq"}`."""
        return await self._get(self._requests.run_events(thread_id, run_id, event_types, after_seq, limit), JournalRunEventsPage)

    async def iter_run_events(
        self, thread_id: str, run_id: str, *, event_types: Iterable[str] | None = None
    ) -> AsyncIterator[JournalRunEvent]:
        """All of a run's raw records, ascending seq."""
        types = list(event_types) if event_types is not None else None
        async for page in self._walk(self._requests.run_event_pages(thread_id, run_id, types), JournalRunEventsPage):
            for record in page["data"]:
                yield record

    async def runs(self, thread_id: str, run_ids: Iterable[str]) -> list[JournalRunSummary]:
        """Status, start, end, duration and error of each run."""
        return (await self._get(self._requests.runs(thread_id, run_ids), JournalRunSummaryList))["data"]

    async def threads(self, *, limit: int = 50, q: str | None = None) -> list[JournalThread]:
        """Recently journaled threads (with title and counts); `q` searches their messages."""
        return (await self._get(self._requests.threads(limit, q), JournalThreadList))["data"]


class SyncJournalClient:
    """The same as `JournalClient`, blocking. Wraps a `langgraph_sdk` sync client (`get_sync_client`)."""

    def __init__(self, client: SyncLangGraphClient, *, prefix: str | None = None) -> None:
        self.sdk = client
        self._http = client.http
        self._requests = _Requests(prefix)

    def __enter__(self) -> SyncJournalClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sdk.close()

    def _get(self, request: _Request, shape: type[_Shape]) -> _Shape:
        path, params = request
        return cast(_Shape, self._http.get(path, params=params))

    def _walk(self, walk: _Walk, shape: type[_Shape]) -> Iterator[_Shape]:
        request = _next_request(walk, None)
        while request is not None:
            page = self._get(request, shape)
            yield page
            request = _next_request(walk, cast(Mapping[str, object], page))

    def page(
        self,
        thread_id: str,
        *,
        limit: int = 50,
        before_seq: int | None = None,
        after_seq: int | None = None,
        run_id: str | None = None,
        checkpoint_id: str | None = None,
    ) -> JournalHistoryPage:
        _check_cursors(before_seq, after_seq)
        branch = _branch(run_id, checkpoint_id)
        return self._get(self._requests.messages(thread_id, limit, before_seq, after_seq, branch), JournalHistoryPage)

    def newest(
        self, thread_id: str, *, limit: int = 50, run_id: str | None = None, checkpoint_id: str | None = None
    ) -> JournalHistoryPage:
        return self.page(thread_id, limit=limit, run_id=run_id, checkpoint_id=checkpoint_id)

    def pages(
        self,
        thread_id: str,
        *,
        page_size: int = MAX_PAGE,
        before_seq: int | None = None,
        after_seq: int | None = None,
        newest_first: bool = False,
        run_id: str | None = None,
        checkpoint_id: str | None = None,
    ) -> Iterator[JournalHistoryPage]:
        branch = _branch(run_id, checkpoint_id)
        yield from self._walk(
            self._requests.history_pages(thread_id, page_size, before_seq, after_seq, newest_first, branch),
            JournalHistoryPage,
        )

    def iter_history(
        self,
        thread_id: str,
        *,
        after_seq: int | None = None,
        page_size: int = MAX_PAGE,
        run_id: str | None = None,
        checkpoint_id: str | None = None,
    ) -> Iterator[JournalHistoryItem]:
        for page in self.pages(
            thread_id, page_size=page_size, after_seq=after_seq, run_id=run_id, checkpoint_id=checkpoint_id
        ):
            yield from page["data"]

    def history(
        self,
        thread_id: str,
        *,
        page_size: int = MAX_PAGE,
        run_id: str | None = None,
        checkpoint_id: str | None = None,
    ) -> list[JournalHistoryItem]:
        return list(self.iter_history(thread_id, page_size=page_size, run_id=run_id, checkpoint_id=checkpoint_id))

    def markers(
        self, thread_id: str, *, run_id: str | None = None, checkpoint_id: str | None = None
    ) -> list[JournalSummaryMarker]:
        walk = self._requests.marker_pages(thread_id, _branch(run_id, checkpoint_id))
        return [marker for page in self._walk(walk, JournalMarkersPage) for marker in page["data"]]

    def run_events(
        self,
        thread_id: str,
        run_id: str,
        *,
        event_types: Iterable[str] | None = None,
        after_seq: int | None = None,
        limit: int = MAX_PAGE,
    ) -> JournalRunEventsPage:
        return self._get(self._requests.run_events(thread_id, run_id, event_types, after_seq, limit), JournalRunEventsPage)

    def iter_run_events(
        self, thread_id: str, run_id: str, *, event_types: Iterable[str] | None = None
    ) -> Iterator[JournalRunEvent]:
        types = list(event_types) if event_types is not None else None
        for page in self._walk(self._requests.run_event_pages(thread_id, run_id, types), JournalRunEventsPage):
            yield from page["data"]

    def runs(self, thread_id: str, run_ids: Iterable[str]) -> list[JournalRunSummary]:
        return self._get(self._requests.runs(thread_id, run_ids), JournalRunSummaryList)["data"]

    def threads(self, *, limit: int = 50, q: str | None = None) -> list[JournalThread]:
        return self._get(self._requests.threads(limit, q), JournalThreadList)["data"]


class _SdkArguments(TypedDict, total=False):
    headers: Mapping[str, str] | None
    timeout: _Timeout
    api_key: str | None


def _sdk_arguments(
    api_key: str | None | _NotGiven, headers: Mapping[str, str] | None, timeout: _Timeout
) -> _SdkArguments:
    arguments: _SdkArguments = {"headers": headers, "timeout": timeout}
    if not isinstance(api_key, _NotGiven):
        arguments["api_key"] = api_key
    return arguments


def get_journal_client(
    *,
    url: str | None = None,
    api_key: str | None | _NotGiven = _NOT_GIVEN,
    headers: Mapping[str, str] | None = None,
    timeout: _Timeout = None,
    prefix: str | None = None,
) -> JournalClient:
    """An async journal client built by `langgraph_sdk.get_client` with these arguments.

    `prefix` is where the journal routes live (default: env
    JOURNAL_BRIDGE_ROUTE_PREFIX, else `/journal`).
    """
    from langgraph_sdk import get_client

    return JournalClient(get_client(url=url, **_sdk_arguments(api_key, headers, timeout)), prefix=prefix)


def get_sync_journal_client(
    *,
    url: str | None = None,
    api_key: str | None | _NotGiven = _NOT_GIVEN,
    headers: Mapping[str, str] | None = None,
    timeout: _Timeout = None,
    prefix: str | None = None,
) -> SyncJournalClient:
    """A blocking journal client built by `langgraph_sdk.get_sync_client` with these arguments."""
    from langgraph_sdk import get_sync_client

    return SyncJournalClient(get_sync_client(url=url, **_sdk_arguments(api_key, headers, timeout)), prefix=prefix)
