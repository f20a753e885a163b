"""What the journal calls on langgraph-sdk's async client, as `typing.Protocol`s.

langgraph-sdk's `LangGraphClient` (from `get_client`, over HTTP or in
process) has all of it; so do the wrappers the follower and the SDK tee put
around it, which is why the journal names only these methods and keyword
arguments instead of the client class. Responses are the SDK's JSON objects,
read as mappings.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from langgraph_sdk.schema import (
        Checkpoint,
        QueryParamTypes,
        RunSelectField,
        SortOrder,
        ThreadSelectField,
        ThreadSortBy,
    )

__all__ = ["OncePerAssistant", "SdkAssistants", "SdkClient", "SdkRuns", "SdkThreads"]

logger = logging.getLogger(__name__)
T = TypeVar("T")


class SdkThreads(Protocol):
    """`client.threads`: a thread, its state, its checkpoint history, thread search."""

    async def get(self, thread_id: str) -> Mapping[str, Any]: ...

    async def get_state(self, thread_id: str, *, checkpoint_id: str | None = None) -> Mapping[str, Any]: ...

    async def get_history(
        self,
        thread_id: str,
        *,
        limit: int = 10,
        before: str | Checkpoint | None = None,
        metadata: Mapping[str, object] | None = None,
    ) -> Sequence[Mapping[str, Any]]: ...

    async def search(
        self,
        *,
        ids: Sequence[str] | None = None,
        limit: int = 10,
        offset: int = 0,
        sort_by: ThreadSortBy | None = None,
        sort_order: SortOrder | None = None,
        select: list[ThreadSelectField] | None = None,
    ) -> Sequence[Mapping[str, object]]: ...


class SdkRuns(Protocol):
    """`client.runs`: a run, a thread's runs, waiting for a run, joining its stream."""

    async def get(self, thread_id: str, run_id: str) -> Mapping[str, Any]: ...

    async def list(
        self, thread_id: str, *, limit: int = 10, offset: int = 0, select: list[RunSelectField] | None = None
    ) -> Sequence[Mapping[str, object]]: ...

    async def join(self, thread_id: str, run_id: str) -> object: ...

    def join_stream(
        self,
        thread_id: str,
        run_id: str,
        *,
        params: QueryParamTypes | None = None,
        last_event_id: str | None = None,
    ) -> AsyncIterator[object]: ...


class SdkAssistants(Protocol):
    """`client.assistants`: an assistant (for its graph id) and its graph's schemas."""

    async def get(self, assistant_id: str) -> Mapping[str, Any]: ...

    async def get_schemas(self, assistant_id: str) -> Mapping[str, object]: ...


class SdkClient(Protocol):
    """The langgraph-sdk async client the journal reads runs, threads and assistants through."""

    @property
    def threads(self) -> SdkThreads: ...

    @property
    def runs(self) -> SdkRuns: ...

    @property
    def assistants(self) -> SdkAssistants: ...


class OncePerAssistant(Generic[T]):
    """One answer of the server about each assistant, asked once per assistant (the
    newest `size` kept). An assistant the server cannot answer for (deleted since,
    an SDK error) gets `unknown`, and is asked again next time."""

    def __init__(self, ask: Callable[[SdkClient, str], Awaitable[T]], unknown: T, what: str, size: int = 1024) -> None:
        self._ask = ask
        self._unknown = unknown
        self._what = what
        self._answers: OrderedDict[str, T] = OrderedDict()
        self._size = size

    async def of(self, sdk: SdkClient, assistant_id: str) -> T:
        if assistant_id not in self._answers:
            try:
                answer = await self._ask(sdk, assistant_id)
            except Exception as exc:  # noqa: BLE001 - the run is read without this answer
                logger.debug("journal-bridge: %s of assistant %s not readable (%s)", self._what, assistant_id, exc)
                return self._unknown
            self._answers[assistant_id] = answer
            while len(self._answers) > self._size:
                self._answers.popitem(last=False)
        return self._answers[assistant_id]
