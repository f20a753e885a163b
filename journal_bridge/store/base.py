"""The run event store contract shared by every backend.

A thread's journal is an append-only sequence of `RunEvent`s. The store assigns
`seq`: 1 for a thread's first event, then strictly increasing and contiguous,
decided inside the backend's transaction so several processes can append to one
thread. A seq is never reused while the thread exists, not even after
`delete_by_run`; `delete_by_thread` forgets the thread, and a later append starts
again at 1.

Paging (`list_messages`, `list_timeline`) returns records in ascending seq:
`before_seq` -> the last `limit` records below it, `after_seq` -> the first `limit`
records above it, neither -> the latest `limit` records. Giving both is an error.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Self

from journal_bridge.events import (
    MESSAGE,
    MIDDLEWARE,
    InvalidEvent,
    PreparedEvent,
    RunEvent,
    make_event,
    max_content_bytes_from_env,
    prepare_event,
)

__all__ = [
    "SCHEMA_VERSION",
    "TIMELINE_CATEGORIES",
    "InvalidEvent",
    "RunEventStore",
    "StoreError",
    "StoreUnavailable",
]

# Bumped whenever a backend's tables change; a store refuses a newer database.
SCHEMA_VERSION = 1

TIMELINE_CATEGORIES: tuple[str, ...] = (MESSAGE, MIDDLEWARE)


class StoreError(Exception):
    """The store failed for a reason retrying will not fix."""


class StoreUnavailable(StoreError):
    """The backend is unreachable, locked or refused the connection; retry later."""


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be an int >= 1, got {limit!r}")


def _check_cursor(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"{name} must be an int or None, got {value!r}")


def page_query(
    select: str,
    thread_id: str,
    categories: tuple[str, ...],
    limit: int,
    before_seq: int | None,
    after_seq: int | None,
    *,
    mark: str,
) -> tuple[str, list[Any], bool]:
    """The SQL of one timeline page: `(sql, params, descending)`.

    One index range per category, merged with UNION ALL: a page costs the page,
    whatever the other categories in between. Rows come newest first when
    `descending` (the caller reverses them). `mark` is the driver's placeholder.
    """
    if after_seq is not None:
        bound, direction, cursor = f"seq > {mark}", "ASC", [after_seq]
    elif before_seq is not None:
        bound, direction, cursor = f"seq < {mark}", "DESC", [before_seq]
    else:
        bound, direction, cursor = "1 = 1", "DESC", []
    part = (
        f"SELECT * FROM ({select} WHERE thread_id = {mark} AND category = {mark}"
        f" AND {bound} ORDER BY seq {direction} LIMIT {mark}) AS page_{{n}}"
    )
    params: list[Any] = []
    for category in categories:
        params.extend((thread_id, category, *cursor, limit))
    if len(categories) == 1:
        return part.format(n=0), params, direction == "DESC"
    sql = " UNION ALL ".join(part.format(n=n) for n in range(len(categories)))
    return f"{sql} ORDER BY seq {direction} LIMIT {mark}", [*params, limit], direction == "DESC"


def plan_append(
    groups: dict[str, list[PreparedEvent]],
    last_seqs: dict[str, int],
    existing: dict[str, dict[str, RunEvent]],
    encode_time: Any = None,
) -> tuple[
    dict[str, list[RunEvent]], list[tuple[Any, ...]], list[tuple[str, int, int]]
]:
    """Assign seqs for an append whose thread counters and known keys were read
    under the write lock.

    Returns the per-thread results (aligned with `groups`), the event rows to
    insert (`thread_id, seq, run_id, event_type, category, content_json,
    metadata_json, created_at, source_key`) and `(thread_id, last_seq, added)`
    for each thread that gained events.
    """
    result: dict[str, list[RunEvent]] = {}
    rows: list[tuple[Any, ...]] = []
    counters: list[tuple[str, int, int]] = []
    for thread_id, items in groups.items():
        known = existing.get(thread_id, {})
        seq = first = last_seqs.get(thread_id, 0)
        out: list[RunEvent] = []
        for item in items:
            event = item.event
            key = event.source_key
            if key is not None and key in known:
                out.append(known[key])
                continue
            seq += 1
            created_at = event.created_at
            rows.append(
                (
                    thread_id,
                    seq,
                    event.run_id,
                    event.event_type,
                    event.category,
                    item.content_json,
                    item.metadata_json,
                    created_at if encode_time is None else encode_time(created_at),
                    key,
                )
            )
            out.append(item.with_seq(seq))
        result[thread_id] = out
        if seq > first:
            counters.append((thread_id, seq, seq - first))
    return result, rows, counters


class RunEventStore(abc.ABC):
    """Append-only journal of run events, one seq sequence per thread.

    Async-first: no method blocks the event loop. Use as an async context manager
    (or call `open()` / `close()`); `journal_bridge.store.open_store` does that.
    """

    def __init__(self, *, max_content_bytes: int | None = None) -> None:
        if max_content_bytes is None:
            max_content_bytes = max_content_bytes_from_env()
        elif max_content_bytes < 1:
            raise ValueError(f"max_content_bytes must be >= 1, got {max_content_bytes}")
        self.max_content_bytes = max_content_bytes

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def open(self) -> None:
        """Connect and create or check the schema. Idempotent."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections. Idempotent."""

    @abc.abstractmethod
    async def ping(self) -> None:
        """Return if the backend answers; raise `StoreUnavailable` saying why if not."""

    # -- writing -----------------------------------------------------------------

    async def put(
        self,
        *,
        thread_id: str,
        run_id: str,
        event_type: str,
        category: str,
        content: Any = "",
        metadata: dict[str, Any] | None = None,
        created_at: datetime | None = None,
        source_key: str | None = None,
    ) -> RunEvent:
        """Append one event and return it as stored (see `put_batch`)."""
        event = make_event(
            thread_id=thread_id,
            run_id=run_id,
            event_type=event_type,
            category=category,
            content=content,
            metadata=metadata,
            created_at=created_at,
            source_key=source_key,
        )
        (stored,) = await self.put_batch([event])
        return stored

    async def put_batch(self, events: Sequence[RunEvent]) -> list[RunEvent]:
        """Append `events` (possibly of several threads) in one transaction.

        All or nothing: an invalid event raises `InvalidEvent` and nothing is
        written. Returns the appended records in input order with `seq` set; their
        content and metadata are as given (after coercion or truncation), and a
        read returns the JSON round trip of them. An event whose `(thread_id, source_key)`
        is already stored is not appended again: the existing record is returned
        with its original seq. Duplicates within the batch collapse to the first.
        The `seq` of an input event is ignored.
        """
        prepared = [prepare_event(event, self.max_content_bytes) for event in events]
        groups: dict[str, list[PreparedEvent]] = {}
        slots: list[tuple[str, int]] = []
        first_by_key: dict[tuple[str, str], tuple[str, int]] = {}
        for item in prepared:
            thread_id, source_key = item.event.thread_id, item.event.source_key
            if source_key is not None and (thread_id, source_key) in first_by_key:
                slots.append(first_by_key[thread_id, source_key])
                continue
            group = groups.setdefault(thread_id, [])
            slot = (thread_id, len(group))
            group.append(item)
            slots.append(slot)
            if source_key is not None:
                first_by_key[thread_id, source_key] = slot
        if not groups:
            return []
        stored = await self._append(groups)
        return [stored[thread_id][index] for thread_id, index in slots]

    @abc.abstractmethod
    async def _append(
        self, groups: dict[str, list[PreparedEvent]]
    ) -> dict[str, list[RunEvent]]:
        """Append each thread's events in one transaction; return them stored, aligned.

        Events within a group have distinct source keys. For an already stored
        key, return the stored record and assign no seq.
        """

    # -- reading -----------------------------------------------------------------

    async def list_messages(
        self,
        thread_id: str,
        *,
        limit: int = 50,
        before_seq: int | None = None,
        after_seq: int | None = None,
    ) -> list[RunEvent]:
        """A page of category `message` records, ascending seq (cursor rules above)."""
        return await self.list_timeline(
            thread_id,
            categories=(MESSAGE,),
            limit=limit,
            before_seq=before_seq,
            after_seq=after_seq,
        )

    async def list_timeline(
        self,
        thread_id: str,
        *,
        categories: Iterable[str] = TIMELINE_CATEGORIES,
        limit: int = 50,
        before_seq: int | None = None,
        after_seq: int | None = None,
    ) -> list[RunEvent]:
        """A page of records of any of `categories` (messages and markers by default)."""
        _check_limit(limit)
        _check_cursor("before_seq", before_seq)
        _check_cursor("after_seq", after_seq)
        if before_seq is not None and after_seq is not None:
            raise ValueError("give before_seq or after_seq, not both")
        wanted = tuple(dict.fromkeys(categories))
        if not wanted:
            return []
        return await self._page(thread_id, wanted, limit, before_seq, after_seq)

    @abc.abstractmethod
    async def _page(
        self,
        thread_id: str,
        categories: tuple[str, ...],
        limit: int,
        before_seq: int | None,
        after_seq: int | None,
    ) -> list[RunEvent]:
        """One page in ascending seq; arguments already checked."""

    async def list_events(
        self,
        thread_id: str,
        run_id: str,
        *,
        event_types: Iterable[str] | None = None,
        limit: int = 500,
        after_seq: int | None = None,
    ) -> list[RunEvent]:
        """A run's records in ascending seq, filtered by `event_types` before `limit`."""
        _check_limit(limit)
        _check_cursor("after_seq", after_seq)
        types = None if event_types is None else tuple(dict.fromkeys(event_types))
        if types is not None and not types:
            return []
        return await self._list_events(thread_id, run_id, types, limit, after_seq)

    @abc.abstractmethod
    async def _list_events(
        self,
        thread_id: str,
        run_id: str,
        event_types: tuple[str, ...] | None,
        limit: int,
        after_seq: int | None,
    ) -> list[RunEvent]:
        """`list_events` with arguments already checked."""

    @abc.abstractmethod
    async def count_messages(self, thread_id: str) -> int:
        """How many category `message` records the thread holds."""

    @abc.abstractmethod
    async def last_seq(self, thread_id: str) -> int:
        """The highest seq assigned in the thread; 0 for a thread with no events."""

    @abc.abstractmethod
    async def has_thread(self, thread_id: str) -> bool:
        """Whether the thread holds at least one record."""

    async def list_threads(self, *, limit: int = 50) -> list[dict[str, Any]]:
        """Threads with records, most recently appended to first.

        Each: `{"thread_id", "last_seq", "event_count", "updated_at"}`, where
        `updated_at` is the ISO-8601 time (UTC) of the last append that added events.
        """
        _check_limit(limit)
        return await self._list_threads(limit)

    @abc.abstractmethod
    async def _list_threads(self, limit: int) -> list[dict[str, Any]]:
        """`list_threads` with `limit` already checked."""

    @abc.abstractmethod
    async def has_source_keys(self, thread_id: str, keys: Iterable[str]) -> set[str]:
        """Which of `keys` are stored as source keys in the thread."""

    # -- deleting ----------------------------------------------------------------

    @abc.abstractmethod
    async def delete_by_thread(self, thread_id: str) -> int:
        """Delete the thread's records and its seq counter; return how many records."""

    @abc.abstractmethod
    async def delete_by_run(self, thread_id: str, run_id: str) -> int:
        """Delete one run's records; return how many. Seqs are not reused."""
