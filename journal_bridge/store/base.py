"""The run event store contract shared by every backend.

The interface is deer-flow's `RunEventStore` (same methods, argument names and
semantics, dict records in and out), plus what journal-bridge needs on top:
idempotent appends by `source_key`, `RunEvent` objects, the message-and-marker
timeline and the thread index.

A thread's journal is an append-only sequence of records. The store assigns
`seq`: 1 for a thread's first event, then strictly increasing and contiguous,
decided inside the backend's transaction so several processes can append to one
thread. A seq is never reused while the thread exists, not even after
`delete_by_run`; `delete_by_thread` forgets the thread, and a later append starts
again at 1.

Paging (`list_messages`, `list_messages_by_run`, `list_timeline`) returns
records in ascending seq. `before_seq` keeps records below it, `after_seq`
records above it; both may be given and both apply. With `after_seq` the page is
the first `limit` records of that range, otherwise the last `limit` (the latest
records when no cursor is given).

`user_id` on a read or delete keeps only records written with that `user_id`;
`None` (the default: journal-bridge has no ambient user) applies no filter, as
deer-flow's explicit `user_id=None` does.

A backend implements the core: the abstract methods of `RunEventStore` (one
append transaction, one page query, the thread index, deletes); the public
methods check their arguments and call them. `CAPABILITIES` are optional: a
backend offers one by overriding it, and callers ask `supports(store, name)`
before using it. `journal_bridge.store.conformance` is the behaviour both must
have.
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Self
from urllib.parse import parse_qsl, urlencode, urlsplit

from journal_bridge.model.envelope import (
    DEFAULT_MAX_CONTENT_BYTES,
    LLM_AI_RESPONSE,
    MESSAGE,
    MIDDLEWARE,
    EventRecord,
    InvalidEvent,
    PreparedEvent,
    RunEvent,
    event_from_record,
    make_event,
    prepare_event,
)
from journal_bridge.model.errors import InvalidArgument, InvalidStoreUrl, StoreError, StoreUnavailable
from journal_bridge.model.shapes import StoredThread

__all__ = [
    "CAPABILITIES",
    "SCHEMA_VERSION",
    "TIMELINE_CATEGORIES",
    "VISIBLE_AI_EVENT_TYPES",
    "EventRecord",
    "InvalidEvent",
    "Page",
    "RunEventStore",
    "RunEventsQuery",
    "StoreError",
    "StoreUnavailable",
    "supports",
]

# The number of schema migrations of the SQL backends (each keeps a `MIGRATIONS`
# list this long): an older database is upgraded on open, a newer one refused.
SCHEMA_VERSION = 3

TIMELINE_CATEGORIES: tuple[str, ...] = (MESSAGE, MIDDLEWARE)

# What `get_last_visible_ai_seq_by_run` counts as an AI reply; deer-flow's older
# journals name it `ai_message`.
VISIBLE_AI_EVENT_TYPES: tuple[str, ...] = (LLM_AI_RESPONSE, "ai_message")
# A `metadata["caller"]` with this prefix marks a middleware's own model call.
MIDDLEWARE_CALLER_PREFIX = "middleware:"


def event_from_row(
    row: tuple[Any, ...], *, content: object, metadata: dict[str, object], created_at: Any
) -> RunEvent:
    """A stored row (`thread_id, seq, run_id, event_type, category, content,
    metadata, created_at, source_key, user_id`) as a record, given the values of
    the columns the backend decodes itself."""
    return RunEvent(
        thread_id=row[0],
        seq=row[1],
        run_id=row[2],
        event_type=row[3],
        category=row[4],
        content=content,
        metadata=metadata,
        created_at=created_at,
        source_key=row[8],
        user_id=row[9],
    )


def take_layout(url: str, layouts: Mapping[str, str], backend: str) -> tuple[str, type]:
    """`url` without its `?layout=NAME` option (the driver does not know it), and
    the store class `layouts` names for that layout ("module:Class"; default
    `journal`). `backend` names the backend in the error for an unknown layout."""
    query = parse_qsl(urlsplit(url).query, keep_blank_values=True)
    named = [value for name, value in query if name == "layout"]
    layout = named[-1] if named else "journal"
    if layout not in layouts:
        raise InvalidStoreUrl(
            f"unsupported {backend} journal layout {layout!r}: expected one of"
            f" {', '.join(layouts)}"
        )
    if named:
        # Cut by hand: urlunsplit would turn `sqlite:////abs.db` into `sqlite://abs.db`.
        rest = urlencode([(name, value) for name, value in query if name != "layout"])
        url = url.split("?", 1)[0] + (f"?{rest}" if rest else "")
    module_name, _, class_name = layouts[layout].partition(":")
    return url, getattr(importlib.import_module(module_name), class_name)


# The optional methods: what a caller does without one is its own choice.
# `claim_run` comes with `release_run`: a backend overrides both.
CAPABILITIES: tuple[str, ...] = ("search_threads", "fill_owner", "claim_run")


def supports(store: RunEventStore, capability: str) -> bool:
    """Whether `store` offers the optional method `capability` (it overrides the base's)."""
    if capability not in CAPABILITIES:
        raise InvalidArgument(f"unknown store capability {capability!r}: expected one of {', '.join(CAPABILITIES)}")
    method = getattr(type(store), capability, None)
    return method is not None and method is not getattr(RunEventStore, capability, None)


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"limit must be an int >= 1, got {limit!r}")


def _check_cursor(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise InvalidArgument(f"{name} must be an int or None, got {value!r}")


def _check_page(limit: int, before_seq: int | None, after_seq: int | None) -> None:
    _check_limit(limit)
    _check_cursor("before_seq", before_seq)
    _check_cursor("after_seq", after_seq)


def _check_user(user_id: str | None) -> None:
    if user_id is not None and not isinstance(user_id, str):
        raise InvalidArgument(f"user_id must be a str or None, got {user_id!r}")


@dataclass(frozen=True)
class Page:
    """What `_page` reads, arguments checked: the thread's records of any of
    `categories` (of one run, of one user when given) between the cursors."""

    thread_id: str
    categories: tuple[str, ...]
    limit: int
    before_seq: int | None = None
    after_seq: int | None = None
    run_id: str | None = None
    user_id: str | None = None

    def matches(self, event: RunEvent) -> bool:
        """Whether `event` belongs to the page, the cursors and limit aside."""
        return (
            event.category in self.categories
            and (self.run_id is None or event.run_id == self.run_id)
            and (self.user_id is None or event.user_id == self.user_id)
        )


@dataclass(frozen=True)
class RunEventsQuery:
    """What `_list_events` reads, arguments checked: one run's records above
    `after_seq`, of `event_types` (None: all), with `metadata["task_id"]` equal
    to `task_id` when given, of one user when given; the first `limit`."""

    thread_id: str
    run_id: str
    event_types: tuple[str, ...] | None
    task_id: str | None
    limit: int
    after_seq: int | None
    user_id: str | None

    def matches(self, event: RunEvent) -> bool:
        """Whether `event` belongs to the result, `after_seq` and limit aside."""
        return (
            event.run_id == self.run_id
            and (self.event_types is None or event.event_type in self.event_types)
            and (self.task_id is None or event.metadata.get("task_id") == self.task_id)
            and (self.user_id is None or event.user_id == self.user_id)
        )


def page_query(select: str, page: Page, *, mark: str) -> tuple[str, list[object], bool]:
    """The SQL of one page: `(sql, params, descending)`.

    One index range per category, merged with UNION ALL: a page costs the page,
    whatever the other categories in between. Rows come newest first when
    `descending` (the caller reverses them). `mark` is the driver's placeholder.
    """
    given = [
        (condition, value)
        for condition, value in (
            ("run_id =", page.run_id),
            ("user_id =", page.user_id),
            ("seq >", page.after_seq),
            ("seq <", page.before_seq),
        )
        if value is not None
    ]
    bounds = [f"{condition} {mark}" for condition, _ in given]
    filters = [value for _, value in given]
    direction = "ASC" if page.after_seq is not None else "DESC"
    where = "".join(f" AND {bound}" for bound in bounds)
    part = (
        f"SELECT * FROM ({select} WHERE thread_id = {mark} AND category = {mark}{where}"
        f" ORDER BY seq {direction} LIMIT {mark}) AS page_{{n}}"
    )
    params: list[Any] = []
    for category in page.categories:
        params.extend((page.thread_id, category, *filters, page.limit))
    if len(page.categories) == 1:
        return part.format(n=0), params, direction == "DESC"
    sql = " UNION ALL ".join(part.format(n=n) for n in range(len(page.categories)))
    return f"{sql} ORDER BY seq {direction} LIMIT {mark}", [*params, page.limit], direction == "DESC"


def run_events_query(
    select: str,
    query: RunEventsQuery,
    *,
    mark: str,
    types: Callable[[tuple[str, ...]], tuple[str, list[object]]],
    task_id_match: str,
) -> tuple[str, list[object]]:
    """The SQL of `list_events`: `(sql, params)`.

    `types(event_types)` gives the dialect's membership test and its parameters;
    `task_id_match` compares `metadata`'s `task_id` with one parameter (a JSON
    string only: a number never equals the text given).
    """
    sql = f"{select} WHERE thread_id = {mark} AND run_id = {mark}"
    params: list[Any] = [query.thread_id, query.run_id]
    if query.after_seq is not None:
        sql += f" AND seq > {mark}"
        params.append(query.after_seq)
    if query.event_types is not None:
        test, values = types(query.event_types)
        sql += f" AND {test}"
        params.extend(values)
    if query.task_id is not None:
        sql += f" AND {task_id_match}"
        params.append(query.task_id)
    if query.user_id is not None:
        sql += f" AND user_id = {mark}"
        params.append(query.user_id)
    return f"{sql} ORDER BY seq LIMIT {mark}", [*params, query.limit]


def plan_append(
    groups: dict[str, list[PreparedEvent]],
    last_seqs: dict[str, int],
    existing: dict[str, dict[str, RunEvent]],
    encode_time: Any = None,
) -> tuple[
    dict[str, list[RunEvent]],
    list[tuple[object, ...]],
    list[tuple[str, int, int, int]],
]:
    """Assign seqs for an append whose thread counters and known keys were read
    under the write lock.

    Returns the per-thread results (aligned with `groups`), the event rows to
    insert (`thread_id, seq, run_id, event_type, category, content_json,
    metadata_json, created_at, source_key, user_id`) and `(thread_id, last_seq,
    added, messages_added)` for each thread that gained events.
    """
    result: dict[str, list[RunEvent]] = {}
    rows: list[tuple[Any, ...]] = []
    counters: list[tuple[str, int, int, int]] = []
    for thread_id, items in groups.items():
        known = existing.get(thread_id, {})
        seq = first = last_seqs.get(thread_id, 0)
        messages = 0
        out: list[RunEvent] = []
        for item in items:
            event = item.event
            key = event.source_key
            if key is not None and key in known:
                out.append(known[key])
                continue
            seq += 1
            messages += event.category == MESSAGE
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
                    event.user_id,
                )
            )
            out.append(item.with_seq(seq))
        result[thread_id] = out
        if seq > first:
            counters.append((thread_id, seq, seq - first, messages))
    return result, rows, counters


class RunEventStore(abc.ABC):
    """Append-only journal of run events, one seq sequence per thread.

    Async-first: no method blocks the event loop. Use as an async context manager
    (or call `open()` / `close()`); `journal_bridge.store.open_store` does that.
    """

    def __init__(self, *, max_content_bytes: int | None = None) -> None:
        if max_content_bytes is None:
            max_content_bytes = DEFAULT_MAX_CONTENT_BYTES
        elif max_content_bytes < 1:
            raise InvalidArgument(f"max_content_bytes must be >= 1, got {max_content_bytes}")
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
        content: object = "",
        metadata: dict[str, object] | None = None,
        created_at: datetime | str | None = None,
        source_key: str | None = None,
        user_id: str | None = None,
    ) -> EventRecord:
        """Append one event and return the record as stored (see `put_batch`).

        `created_at` is a timezone-aware datetime or ISO-8601 text; default now.
        """
        event = make_event(
            thread_id=thread_id,
            run_id=run_id,
            event_type=event_type,
            category=category,
            content=content,
            metadata=metadata,
            created_at=created_at,
            source_key=source_key,
            user_id=user_id,
        )
        (stored,) = await self.put_batch([event])
        return EventRecord.from_event(stored)

    async def put_batch(
        self, events: Sequence[RunEvent | Mapping[str, object]]
    ) -> list[Any]:
        """Append `events` (possibly of several threads) in one transaction.

        Each event is a `RunEvent` or a dict of `put`'s keyword arguments; each
        result has the form of its input (`RunEvent` or `EventRecord`).

        All or nothing: an invalid event raises `InvalidEvent` and nothing is
        written. Returns the appended records in input order with `seq` set; their
        content and metadata are as given (after coercion or truncation), and a
        read returns the JSON round trip of them. An event whose `(thread_id, source_key)`
        is already stored is not appended again: the existing record is returned
        with its original seq. Duplicates within the batch collapse to the first.
        The `seq` of an input event is ignored.
        """
        as_records = [not isinstance(event, RunEvent) for event in events]
        prepared = [
            prepare_event(
                event_from_record(event) if wants_record else event,  # type: ignore[arg-type]
                self.max_content_bytes,
            )
            for event, wants_record in zip(events, as_records, strict=True)
        ]
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
        out: list[Any] = []
        for (thread_id, index), wants_record in zip(slots, as_records, strict=True):
            event = stored[thread_id][index]
            out.append(EventRecord.from_event(event) if wants_record else event)
        return out

    @abc.abstractmethod
    async def _append(
        self, groups: dict[str, list[PreparedEvent]]
    ) -> dict[str, list[RunEvent]]:
        """Append each thread's events in one transaction; return them stored, aligned.

        Events within a group have distinct source keys. For an already stored
        key, return the stored record and assign no seq.
        """

    async def put_if_absent(
        self,
        *,
        thread_id: str,
        run_id: str,
        event_type: str,
        category: str,
        content: object = "",
        metadata: dict[str, object] | None = None,
        created_at: datetime | str | None = None,
        user_id: str | None = None,
    ) -> tuple[EventRecord, bool]:
        """Append one event unless the run already holds one of `event_type`.

        Returns `(record, created)`: the new record and True, or the run's first
        record of that type and False. The check and the append are one step
        with respect to every other writer of the thread, in any process.
        """
        event = make_event(
            thread_id=thread_id,
            run_id=run_id,
            event_type=event_type,
            category=category,
            content=content,
            metadata=metadata,
            created_at=created_at,
            user_id=user_id,
        )
        stored, created = await self._put_if_absent(
            prepare_event(event, self.max_content_bytes)
        )
        return EventRecord.from_event(stored), created

    @abc.abstractmethod
    async def _put_if_absent(self, item: PreparedEvent) -> tuple[RunEvent, bool]:
        """`put_if_absent` of a prepared event without a source key."""

    # -- reading -----------------------------------------------------------------

    async def list_messages(
        self,
        thread_id: str,
        *,
        limit: int = 50,
        before_seq: int | None = None,
        after_seq: int | None = None,
        user_id: str | None = None,
    ) -> list[EventRecord]:
        """A page of the thread's category `message` records (cursor rules above)."""
        return await self._records(
            thread_id, (MESSAGE,), limit, before_seq, after_seq, None, user_id
        )

    async def list_messages_by_run(
        self,
        thread_id: str,
        run_id: str,
        *,
        limit: int = 50,
        before_seq: int | None = None,
        after_seq: int | None = None,
        user_id: str | None = None,
    ) -> list[EventRecord]:
        """A page of one run's category `message` records (cursor rules above)."""
        return await self._records(
            thread_id, (MESSAGE,), limit, before_seq, after_seq, run_id, user_id
        )

    async def _records(
        self,
        thread_id: str,
        categories: tuple[str, ...],
        limit: int,
        before_seq: int | None,
        after_seq: int | None,
        run_id: str | None,
        user_id: str | None,
    ) -> list[EventRecord]:
        _check_page(limit, before_seq, after_seq)
        _check_user(user_id)
        page = await self._page(Page(thread_id, categories, limit, before_seq, after_seq, run_id, user_id))
        return [EventRecord.from_event(event) for event in page]

    async def list_timeline(
        self,
        thread_id: str,
        *,
        categories: Iterable[str] = TIMELINE_CATEGORIES,
        limit: int = 50,
        before_seq: int | None = None,
        after_seq: int | None = None,
        run_id: str | None = None,
    ) -> list[RunEvent]:
        """A page of `RunEvent`s of any of `categories` (messages and markers by
        default), of one run when `run_id` is given."""
        _check_page(limit, before_seq, after_seq)
        wanted = tuple(dict.fromkeys(categories))
        if not wanted:
            return []
        return await self._page(Page(thread_id, wanted, limit, before_seq, after_seq, run_id))

    @abc.abstractmethod
    async def _page(self, page: Page) -> list[RunEvent]:
        """The records of `page` in ascending seq (cursor rules above)."""

    async def list_events(
        self,
        thread_id: str,
        run_id: str,
        *,
        event_types: Iterable[str] | None = None,
        task_id: str | None = None,
        limit: int = 500,
        after_seq: int | None = None,
        user_id: str | None = None,
    ) -> list[EventRecord]:
        """A run's records in ascending seq: the first `limit` above `after_seq`.

        `event_types` keeps records of those types (an empty list: none), `task_id`
        those whose `metadata["task_id"]` is that string; both filter before `limit`.
        """
        _check_limit(limit)
        _check_cursor("after_seq", after_seq)
        _check_user(user_id)
        if task_id is not None and not isinstance(task_id, str):
            raise InvalidArgument(f"task_id must be a str or None, got {task_id!r}")
        types = None if event_types is None else tuple(dict.fromkeys(event_types))
        if types is not None and not types:
            return []
        events = await self._list_events(
            RunEventsQuery(thread_id, run_id, types, task_id, limit, after_seq, user_id)
        )
        return [EventRecord.from_event(event) for event in events]

    @abc.abstractmethod
    async def _list_events(self, query: RunEventsQuery) -> list[RunEvent]:
        """`list_events` of `query` in ascending seq."""

    async def get_last_visible_ai_seq_by_run(
        self,
        thread_id: str,
        run_ids: Iterable[str],
        *,
        user_id: str | None = None,
    ) -> dict[str, int]:
        """For each of `run_ids`, the seq of its last AI reply the user saw.

        That is its last category `message` record of a `VISIBLE_AI_EVENT_TYPES`
        type whose `metadata["caller"]` does not start with `middleware:`. Runs
        without one are left out.
        """
        _check_user(user_id)
        wanted = tuple(dict.fromkeys(run_ids))
        if not wanted:
            return {}
        return await self._last_visible_ai_seqs(thread_id, wanted, user_id)

    @abc.abstractmethod
    async def _last_visible_ai_seqs(
        self, thread_id: str, run_ids: tuple[str, ...], user_id: str | None
    ) -> dict[str, int]:
        """`get_last_visible_ai_seq_by_run` with arguments already checked."""

    @abc.abstractmethod
    async def count_messages(self, thread_id: str, *, user_id: str | None = None) -> int:
        """How many category `message` records the thread holds (of `user_id`).

        Without `user_id` this reads a counter kept with the thread: it costs the
        same whatever the thread's length.
        """

    @abc.abstractmethod
    async def last_seq(self, thread_id: str) -> int:
        """The highest seq assigned in the thread; 0 for a thread with no events."""

    @abc.abstractmethod
    async def has_thread(self, thread_id: str) -> bool:
        """Whether the thread holds at least one record."""

    async def list_threads(self, *, limit: int = 50) -> list[StoredThread]:
        """Threads with records, most recently appended to first.

        Each: `{"thread_id", "last_seq", "event_count", "updated_at"}`, where
        `updated_at` is the ISO-8601 time (UTC) of the last append that added events.
        """
        _check_limit(limit)
        return await self._list_threads(limit)

    @abc.abstractmethod
    async def _list_threads(self, limit: int) -> list[StoredThread]:
        """`list_threads` with `limit` already checked."""

    @abc.abstractmethod
    async def has_source_keys(self, thread_id: str, keys: Iterable[str]) -> set[str]:
        """Which of `keys` are stored as source keys in the thread."""

    # -- deleting ----------------------------------------------------------------

    @abc.abstractmethod
    async def delete_by_thread(self, thread_id: str, *, user_id: str | None = None) -> int:
        """Delete the thread's records; return how many.

        Without `user_id` the thread is forgotten, its seq counter too. With it,
        only that user's records go and seqs are not reused (as `delete_by_run`).
        """

    @abc.abstractmethod
    async def delete_by_run(
        self, thread_id: str, run_id: str, *, user_id: str | None = None
    ) -> int:
        """Delete one run's records (of `user_id`); return how many. Seqs are not reused."""

    # -- optional capabilities -----------------------------------------------------
    # A backend offers one by overriding it; `supports(store, name)` tells.

    async def fill_owner(self, thread_id: str, user_id: str) -> int:
        """Give the thread's records without an owner (`user_id` NULL) this one; how many.

        Optional: a journal written before records carried owners gets them so.
        Records that have an owner keep it.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot fill in owners")

    async def claim_run(self, run_id: str) -> bool:
        """Become the one reader of this run among the processes sharing the journal.

        True when this store object holds the claim (now, or already); False
        while another holds it. A claim lasts until `release_run`, `close`, or
        the end of the process holding it -- a process that dies mid-run leaves
        the run to whoever claims it next. Not reentrant: one release ends it.

        Optional: a store whose journal no other process reads live needs none
        (callers without it read every run they are handed).
        """
        raise NotImplementedError(f"{type(self).__name__} cannot claim runs")

    async def release_run(self, run_id: str) -> None:
        """Give up the claim `claim_run` took; nothing when this store does not hold it."""
        raise NotImplementedError(f"{type(self).__name__} cannot claim runs")

    async def search_threads(self, text: str, *, limit: int = 50) -> list[StoredThread]:
        """Threads with a message whose text contains `text` (ASCII letters in any
        case), as `list_threads` entries, most recently appended to first.

        Optional: reads every message record of the journal in the worst case.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot search threads")
