"""What the journal calls on langgraph-sdk's async client, as `typing.Protocol`s.

langgraph-sdk's `LangGraphClient` (from `get_client`, over HTTP or in
process) has all of it; so do the wrappers the follower and the SDK tee put
around it, which is why the journal names only these methods and keyword
arguments instead of the client class. Responses are the SDK's JSON objects,
read as mappings.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from langgraph_sdk.schema import (
        Checkpoint,
        QueryParamTypes,
        RunSelectField,
        SortOrder,
        ThreadSelectField,
        ThreadSortBy,
    )

__all__ = ["SdkAssistants", "SdkClient", "SdkOnDemand", "SdkRuns", "SdkThreads"]


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


class SdkOnDemand:
    """A component's SDK client, made by its factory when first asked for: the
    in-process client can be made only once the server's app is running."""

    def __init__(self, factory: Callable[[], SdkClient]) -> None:
        self._factory = factory
        self.made: SdkClient | None = None

    def __call__(self) -> SdkClient:
        if self.made is None:
            self.made = self._factory()
        return self.made
