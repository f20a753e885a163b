"""In-process run event store: for tests, demos and the benchmark baseline.

Nothing survives the process. Every method runs without awaiting in between, so
each call is atomic with respect to other tasks on the same event loop.
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from journal_bridge.model.envelope import MESSAGE, PreparedEvent, RunEvent
from journal_bridge.model.errors import InvalidArgument
from journal_bridge.model.shapes import StoredThread
from journal_bridge.store.base import (
    MIDDLEWARE_CALLER_PREFIX,
    VISIBLE_AI_EVENT_TYPES,
    Page,
    RunEventStore,
    RunEventsQuery,
    StoreUnavailable,
    _check_limit,
)

__all__ = ["MemoryRunEventStore", "from_url"]


@dataclass
class _Thread:
    last_seq: int = 0
    message_count: int = 0
    updated_at: str = ""
    write_order: int = 0
    events: list[RunEvent] = field(default_factory=list)  # ascending seq
    seqs: list[int] = field(default_factory=list)  # parallel to events, for bisect
    by_source_key: dict[str, RunEvent] = field(default_factory=dict)


def _first(limit: int, events: Iterable[RunEvent], keep: Callable[[RunEvent], bool]) -> list[RunEvent]:
    """The first `limit` of `events` that `keep` keeps."""
    return list(itertools.islice(filter(keep, events), limit))


class MemoryRunEventStore(RunEventStore):
    """A `RunEventStore` held in a dict; `memory://`."""

    def __init__(self, *, max_content_bytes: int | None = None) -> None:
        super().__init__(max_content_bytes=max_content_bytes)
        self._threads: dict[str, _Thread] = {}
        self._writes = 0
        self._closed = False
        self._claims: set[str] = set()

    async def close(self) -> None:
        self._closed = True
        self._claims.clear()

    async def ping(self) -> None:
        if self._closed:
            raise StoreUnavailable("memory store is closed")

    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailable("memory store is closed")

    async def _append(
        self, groups: dict[str, list[PreparedEvent]]
    ) -> dict[str, list[RunEvent]]:
        self._check_open()
        result: dict[str, list[RunEvent]] = {}
        # Build everything first so that a failure leaves the store untouched.
        staged: list[tuple[str, list[RunEvent]]] = []
        for thread_id, items in groups.items():
            thread = self._threads.get(thread_id)
            seq = thread.last_seq if thread else 0
            out: list[RunEvent] = []
            new: list[RunEvent] = []
            for item in items:
                key = item.event.source_key
                existing = thread.by_source_key.get(key) if thread and key else None
                if existing is not None:
                    out.append(existing)
                    continue
                seq += 1
                stored = item.decoded(seq)
                out.append(stored)
                new.append(stored)
            result[thread_id] = out
            if new:
                staged.append((thread_id, new))
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        for thread_id, new in staged:
            thread = self._threads.setdefault(thread_id, _Thread())
            self._writes += 1
            thread.write_order = self._writes
            thread.updated_at = now
            thread.last_seq = new[-1].seq  # type: ignore[assignment]
            thread.message_count += sum(event.category == MESSAGE for event in new)
            thread.events.extend(new)
            thread.seqs.extend(event.seq for event in new)  # type: ignore[misc]
            for event in new:
                if event.source_key is not None:
                    thread.by_source_key[event.source_key] = event
        return result

    async def _put_if_absent(self, item: PreparedEvent) -> tuple[RunEvent, bool]:
        # No await between the look-up and the append: atomic on the event loop.
        self._check_open()
        wanted = item.event
        thread = self._threads.get(wanted.thread_id)
        for event in thread.events if thread else ():
            if event.run_id == wanted.run_id and event.event_type == wanted.event_type:
                return event, False
        (stored,) = (await self._append({wanted.thread_id: [item]}))[wanted.thread_id]
        return stored, True

    async def _page(self, page: Page) -> list[RunEvent]:
        self._check_open()
        thread = self._threads.get(page.thread_id)
        if thread is None:
            return []
        events, seqs = thread.events, thread.seqs
        start = 0 if page.after_seq is None else bisect.bisect_right(seqs, page.after_seq)
        end = len(events) if page.before_seq is None else bisect.bisect_left(seqs, page.before_seq)
        # Forward from the cursor with `after_seq`, else back from the newest.
        indexes = range(start, end) if page.after_seq is not None else range(end - 1, start - 1, -1)
        found = _first(page.limit, (events[index] for index in indexes), page.matches)
        return found if page.after_seq is not None else found[::-1]

    async def _list_events(self, query: RunEventsQuery) -> list[RunEvent]:
        self._check_open()
        thread = self._threads.get(query.thread_id)
        if thread is None:
            return []
        start = 0 if query.after_seq is None else bisect.bisect_right(thread.seqs, query.after_seq)
        return _first(query.limit, itertools.islice(thread.events, start, None), query.matches)

    async def _last_visible_ai_seqs(
        self, thread_id: str, run_ids: tuple[str, ...], user_id: str | None
    ) -> dict[str, int]:
        self._check_open()
        thread = self._threads.get(thread_id)
        if thread is None:
            return {}
        wanted = set(run_ids)
        found: dict[str, int] = {}
        for event in reversed(thread.events):
            if (
                event.run_id in wanted
                and event.run_id not in found
                and event.category == MESSAGE
                and event.event_type in VISIBLE_AI_EVENT_TYPES
                and not _caller_is_middleware(event)
                and (user_id is None or event.user_id == user_id)
            ):
                found[event.run_id] = event.seq  # type: ignore[assignment]
        return found

    async def count_messages(self, thread_id: str, *, user_id: str | None = None) -> int:
        self._check_open()
        thread = self._threads.get(thread_id)
        if thread is None:
            return 0
        if user_id is None:
            return thread.message_count
        return sum(
            1
            for event in thread.events
            if event.category == MESSAGE and event.user_id == user_id
        )

    async def last_seq(self, thread_id: str) -> int:
        self._check_open()
        thread = self._threads.get(thread_id)
        return thread.last_seq if thread else 0

    async def has_thread(self, thread_id: str) -> bool:
        self._check_open()
        thread = self._threads.get(thread_id)
        return bool(thread and thread.events)

    async def _list_threads(self, limit: int) -> list[StoredThread]:
        self._check_open()
        live = [(tid, t) for tid, t in self._threads.items() if t.events]
        live.sort(key=lambda pair: pair[1].write_order, reverse=True)
        return [
            {
                "thread_id": thread_id,
                "last_seq": thread.last_seq,
                "event_count": len(thread.events),
                "updated_at": thread.updated_at,
            }
            for thread_id, thread in live[:limit]
        ]

    async def search_threads(self, text: str, *, limit: int = 50) -> list[StoredThread]:
        _check_limit(limit)
        found = [
            thread
            for thread in await self._list_threads(len(self._threads) or 1)
            if any(
                _matches(event, text)
                for event in self._threads[thread["thread_id"]].events
                if event.category == MESSAGE
            )
        ]
        return found[:limit]

    async def has_source_keys(self, thread_id: str, keys: Iterable[str]) -> set[str]:
        self._check_open()
        thread = self._threads.get(thread_id)
        if thread is None:
            return set()
        return {key for key in keys if key in thread.by_source_key}

    async def delete_by_thread(self, thread_id: str, *, user_id: str | None = None) -> int:
        self._check_open()
        if user_id is None:
            thread = self._threads.pop(thread_id, None)
            return len(thread.events) if thread else 0
        return self._delete(thread_id, lambda event: event.user_id == user_id)

    # A memory journal is this store object's alone: no other process reads its runs,
    # so its claims only keep the contract (held until released or closed).

    async def claim_run(self, run_id: str) -> bool:
        self._check_open()
        self._claims.add(run_id)
        return True

    async def release_run(self, run_id: str) -> None:
        self._claims.discard(run_id)

    async def fill_owner(self, thread_id: str, user_id: str) -> int:
        if not isinstance(user_id, str) or not user_id:
            raise InvalidArgument(f"user_id must be a non-empty str, got {user_id!r}")
        self._check_open()
        thread = self._threads.get(thread_id)
        if thread is None:
            return 0
        filled = 0
        for i, event in enumerate(thread.events):
            if event.user_id is None:
                thread.events[i] = replace(event, user_id=user_id)
                if event.source_key is not None:
                    thread.by_source_key[event.source_key] = thread.events[i]
                filled += 1
        return filled

    async def delete_by_run(
        self, thread_id: str, run_id: str, *, user_id: str | None = None
    ) -> int:
        self._check_open()
        return self._delete(
            thread_id,
            lambda event: event.run_id == run_id
            and (user_id is None or event.user_id == user_id),
        )

    def _delete(self, thread_id: str, doomed: Callable[[RunEvent], bool]) -> int:
        """Drop the thread's events `doomed` selects; its seq counter stays."""
        thread = self._threads.get(thread_id)
        if thread is None:
            return 0
        kept = [event for event in thread.events if not doomed(event)]
        deleted = len(thread.events) - len(kept)
        if deleted:
            thread.events = kept
            thread.seqs = [event.seq for event in kept]  # type: ignore[misc]
            thread.message_count = sum(event.category == MESSAGE for event in kept)
            thread.by_source_key = {
                event.source_key: event
                for event in kept
                if event.source_key is not None
            }
        return deleted


def _caller_is_middleware(event: RunEvent) -> bool:
    return str(event.metadata.get("caller", "")).startswith(MIDDLEWARE_CALLER_PREFIX)


def _ascii_fold(text: str) -> str:
    # Letters fold as SQL LIKE folds them: ASCII only.
    return "".join(c.lower() if c.isascii() else c for c in text)


def _matches(event: RunEvent, text: str) -> bool:
    content = event.content
    value = content.get("content") if isinstance(content, dict) else content
    if isinstance(value, str):
        return _ascii_fold(text) in _ascii_fold(value)
    if value is None:
        return False
    # A list of blocks is matched as its JSON text, as the SQL backends do.
    value = _ascii_fold(json.dumps(value, ensure_ascii=False))
    escaped = json.dumps(text, ensure_ascii=False)[1:-1]
    return _ascii_fold(text) in value or _ascii_fold(escaped) in value


def from_url(url: str, **options: Any) -> MemoryRunEventStore:
    """The store for `memory://`: this process's own, gone when it ends."""
    return MemoryRunEventStore(**options)
