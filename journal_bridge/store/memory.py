"""In-process run event store: for tests, demos and the benchmark baseline.

Nothing survives the process. Every method runs without awaiting in between, so
each call is atomic with respect to other tasks on the same event loop.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from journal_bridge.events import MESSAGE, PreparedEvent, RunEvent
from journal_bridge.store.base import RunEventStore, StoreUnavailable

__all__ = ["MemoryRunEventStore"]


@dataclass
class _Thread:
    last_seq: int = 0
    updated_at: str = ""
    write_order: int = 0
    events: list[RunEvent] = field(default_factory=list)  # ascending seq
    seqs: list[int] = field(default_factory=list)  # parallel to events, for bisect
    by_source_key: dict[str, RunEvent] = field(default_factory=dict)


class MemoryRunEventStore(RunEventStore):
    """A `RunEventStore` held in a dict; `memory://`."""

    def __init__(self, *, max_content_bytes: int | None = None) -> None:
        super().__init__(max_content_bytes=max_content_bytes)
        self._threads: dict[str, _Thread] = {}
        self._writes = 0
        self._closed = False

    async def close(self) -> None:
        self._closed = True

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
            thread.events.extend(new)
            thread.seqs.extend(event.seq for event in new)  # type: ignore[misc]
            for event in new:
                if event.source_key is not None:
                    thread.by_source_key[event.source_key] = event
        return result

    async def _page(
        self,
        thread_id: str,
        categories: tuple[str, ...],
        limit: int,
        before_seq: int | None,
        after_seq: int | None,
    ) -> list[RunEvent]:
        self._check_open()
        thread = self._threads.get(thread_id)
        if thread is None:
            return []
        wanted = set(categories)
        events, seqs = thread.events, thread.seqs
        page: list[RunEvent] = []
        if after_seq is not None:
            for index in range(bisect.bisect_right(seqs, after_seq), len(events)):
                if events[index].category in wanted:
                    page.append(events[index])
                    if len(page) == limit:
                        break
            return page
        end = (
            len(events) if before_seq is None else bisect.bisect_left(seqs, before_seq)
        )
        for index in range(end - 1, -1, -1):
            if events[index].category in wanted:
                page.append(events[index])
                if len(page) == limit:
                    break
        page.reverse()
        return page

    async def _list_events(
        self,
        thread_id: str,
        run_id: str,
        event_types: tuple[str, ...] | None,
        limit: int,
        after_seq: int | None,
    ) -> list[RunEvent]:
        self._check_open()
        thread = self._threads.get(thread_id)
        if thread is None:
            return []
        start = 0 if after_seq is None else bisect.bisect_right(thread.seqs, after_seq)
        wanted = None if event_types is None else set(event_types)
        page: list[RunEvent] = []
        for event in itertools.islice(thread.events, start, None):
            if event.run_id == run_id and (
                wanted is None or event.event_type in wanted
            ):
                page.append(event)
                if len(page) == limit:
                    break
        return page

    async def count_messages(self, thread_id: str) -> int:
        self._check_open()
        thread = self._threads.get(thread_id)
        if thread is None:
            return 0
        return sum(1 for event in thread.events if event.category == MESSAGE)

    async def last_seq(self, thread_id: str) -> int:
        self._check_open()
        thread = self._threads.get(thread_id)
        return thread.last_seq if thread else 0

    async def has_thread(self, thread_id: str) -> bool:
        self._check_open()
        thread = self._threads.get(thread_id)
        return bool(thread and thread.events)

    async def _list_threads(self, limit: int) -> list[dict[str, Any]]:
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

    async def has_source_keys(self, thread_id: str, keys: Iterable[str]) -> set[str]:
        self._check_open()
        thread = self._threads.get(thread_id)
        if thread is None:
            return set()
        return {key for key in keys if key in thread.by_source_key}

    async def delete_by_thread(self, thread_id: str) -> int:
        self._check_open()
        thread = self._threads.pop(thread_id, None)
        return len(thread.events) if thread else 0

    async def delete_by_run(self, thread_id: str, run_id: str) -> int:
        self._check_open()
        thread = self._threads.get(thread_id)
        if thread is None:
            return 0
        kept = [event for event in thread.events if event.run_id != run_id]
        deleted = len(thread.events) - len(kept)
        if deleted:
            thread.events = kept
            thread.seqs = [event.seq for event in kept]  # type: ignore[misc]
            thread.by_source_key = {
                event.source_key: event
                for event in kept
                if event.source_key is not None
            }
        return deleted
