"""Overviews of the journal for indexes and viewers: what a thread is, how its runs went.

Everything here is computed from the store's required reads (`list_timeline`,
`list_events`, `count_messages`, `list_threads`) and touches a bounded number
of records per thread or run, whatever the thread's length -- except the
marker count, which reads the thread's middleware records (a few per
compaction, never its messages).

A **thread overview** adds to a `list_threads` entry: `title` (the text of the
first human message, shortened), `assistant_id` (of the first journaled run),
`message_count` and `marker_count`. `updated_at` stays the last activity.

A **run summary** tells how a run went: `status` is `success`, `error`,
`cancelled` or `interrupted` once the run's end was journaled (a run that
ended with another status in its `run.end` metadata keeps that status),
`running` while only its start is, and `unknown` for runs whose start and end
were never journaled (a backfilled thread).

Shapes: the `JournalThread` and `JournalRunSummary` schemas in
`journal_bridge.web.openapi`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from journal_bridge.model.envelope import (
    LLM_HUMAN_INPUT,
    MESSAGE,
    MIDDLEWARE,
    MIDDLEWARE_SUMMARIZE,
    RUN_END,
    RUN_ERROR,
    RUN_INTERRUPT,
    RUN_START,
    TRACE,
    StoredRecord,
    stored_seq,
)
from journal_bridge.model.shapes import JournalRunSummary, JournalThread, StoredThread
from journal_bridge.model.timestamps import parse_time
from journal_bridge.store.base import RunEventStore, supports

__all__ = [
    "TITLE_LENGTH",
    "message_text",
    "run_summaries",
    "search_threads",
    "thread_overview",
]

TITLE_LENGTH = 80
# The first human message is almost always among a thread's first records.
_TITLE_SCAN = 16
_MARKER_PAGE = 500
_RUN_BOUNDS = (RUN_START, RUN_END, RUN_ERROR, RUN_INTERRUPT)


def message_text(content: object, *, other: Callable[[object], str] | None = None) -> str:
    """The readable text of LangChain message content (a string or a list of blocks).

    What is not text (a tool-use block, a dict, a number) is left out, or,
    given `other`, shown as `other` renders it: a title wants only the words,
    a printed conversation everything the message held.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif other is not None:
                parts.append(other(block))
        return "\n".join(parts)
    if other is not None:
        return other(content)
    if isinstance(content, dict):
        return message_text(content.get("content"))
    return str(content)


def _shorten(text: str, length: int = TITLE_LENGTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= length else text[: length - 1].rstrip() + "…"


def _iso(value: datetime | str) -> str:
    return value.isoformat() if isinstance(value, datetime) else value


async def _title(store: RunEventStore, thread_id: str) -> str | None:
    records = await store.list_timeline(
        thread_id, categories=(MESSAGE,), limit=_TITLE_SCAN, after_seq=0
    )
    for record in records:
        if record.event_type == LLM_HUMAN_INPUT:
            text = _shorten(message_text(record.content))
            if text:
                return text
    return None


async def _assistant_id(store: RunEventStore, thread_id: str) -> str | None:
    records = await store.list_timeline(thread_id, categories=(TRACE,), limit=4, after_seq=0)
    for record in records:
        if record.event_type == RUN_START and isinstance(record.content, dict):
            assistant = record.content.get("assistant_id")
            if assistant:
                return str(assistant)
    return None


def _is_marker(record: StoredRecord) -> bool:
    if record.event_type != MIDDLEWARE_SUMMARIZE:
        return False
    content = record.content if isinstance(record.content, dict) else {}
    return content.get("action", "summarize") == "summarize"


async def marker_count(store: RunEventStore, thread_id: str) -> int:
    """How many summary markers the thread's history holds."""
    count, cursor = 0, 0
    while True:
        records = await store.list_timeline(
            thread_id, categories=(MIDDLEWARE,), limit=_MARKER_PAGE, after_seq=cursor
        )
        count += sum(_is_marker(record) for record in records)
        if len(records) < _MARKER_PAGE:
            return count
        cursor = stored_seq(records[-1])


async def thread_overview(store: RunEventStore, thread: StoredThread) -> JournalThread:
    """`thread` (a `list_threads` entry) with `title`, `assistant_id`, `message_count`, `marker_count`."""
    thread_id = thread["thread_id"]
    return {
        **thread,
        "title": await _title(store, thread_id),
        "assistant_id": await _assistant_id(store, thread_id),
        "message_count": await store.count_messages(thread_id),
        "marker_count": await marker_count(store, thread_id),
    }


def _summary(run_id: str, records: Sequence[StoredRecord]) -> JournalRunSummary:
    start = next((r for r in records if r.event_type == RUN_START), None)
    end = next((r for r in records if r.event_type in (RUN_END, RUN_ERROR)), None)
    error = next((r for r in records if r.event_type == RUN_ERROR), None)
    if error is not None:
        status = "cancelled" if (error.metadata or {}).get("error_type") == "CancelledError" else "error"
    elif end is not None and any(r.event_type == RUN_INTERRUPT for r in records):
        status = "interrupted"
    elif end is not None:
        status = str((end.metadata or {}).get("status") or "success")
    elif start is not None:
        status = "running"
    else:
        status = "unknown"
    started, ended = parse_time(start and start.created_at), parse_time(end and end.created_at)
    duration = None
    if started is not None and ended is not None:
        duration = max(0, round((ended - started).total_seconds() * 1000))
    assistant = start.content.get("assistant_id") if start and isinstance(start.content, dict) else None
    error_type = (error.metadata or {}).get("error_type") if error is not None else None
    return {
        "run_id": run_id,
        "status": status,
        "started_at": _iso(start.created_at) if start else None,
        "ended_at": _iso(end.created_at) if end else None,
        "duration_ms": duration,
        "error": message_text(error.content) if error is not None else None,
        "error_type": None if error_type is None else str(error_type),
        "assistant_id": None if assistant is None else str(assistant),
    }


async def run_summaries(store: RunEventStore, thread_id: str, run_ids: Iterable[str]) -> list[JournalRunSummary]:
    """A summary for each of `run_ids` (in the order given, each once)."""
    summaries: list[JournalRunSummary] = []
    for run_id in dict.fromkeys(run_ids):
        records = await store.list_events(
            thread_id, run_id, event_types=list(_RUN_BOUNDS), limit=len(_RUN_BOUNDS) * 2
        )
        summaries.append(_summary(run_id, records))
    return summaries


async def search_threads(store: RunEventStore, text: str, *, limit: int) -> list[StoredThread] | None:
    """Threads whose messages contain `text` (any case), most recent first, when the
    store can search (the optional `search_threads` capability); None when it cannot."""
    if not supports(store, "search_threads"):
        return None
    return await store.search_threads(text, limit=limit)
