"""The history projection: a thread's journal as the conversation a user saw.

A thread's timeline (message, middleware and outcome records, ascending
`seq`) becomes a list of *items*: a **message row** for every conversation
message record (the LangChain message dict plus the record's `seq`, `run_id`
and `created_at`), a **summary marker** for every compaction
(`middleware:summarize`), and a **run status** for every run that did not
simply return (`run.error`: failed or cancelled; `run.interrupt`: paused). A
run that returned (`run.end`) adds nothing.

Item shapes: the `JournalHistoryItem` schema (and the `JournalMessageItem`,
`JournalSummaryMarker` and `JournalRunStatus` it is one of) in
`journal_bridge.web.openapi`, which the server serves at `/openapi.json`;
tests/unit/test_item_shapes.py keeps what this module produces valid against
them: each field is described there once.

`summary_marker` and `run_status` are never LangChain message types, so a
client tells the kinds apart by `type` alone.

Items keep the `seq` of their record, so a marker sits exactly where the
compaction happened: after the messages it replaced, before the answer that
followed. The category alone decides what is conversation: writers journal
the summarizer model's own calls under `trace`, so they never reach the
timeline, and other middleware actions project to nothing.

Paging is by `seq` cursor, both directions, and never splits or repeats an
item, because every item is exactly one record:

- no cursor: the newest `limit` items;
- `before_seq=S`: the last `limit` items with `seq < S` (older page);
- `after_seq=S`: the first `limit` items with `seq > S` (newer page).

A page: the `JournalHistoryPage` schema (`JournalMarkersPage` for markers).

Conversation order. A record written after the fact into a thread that
already had later records (a backfill filling a hole) carries
`metadata.anchor_seq`: the seq of the record it belongs before. The thread's
`journal.order` records (run `journal-bridge:order`, one per such write) list
these displaced seqs, so reading them is one indexed query, and a thread
without any pays nothing more. Items are ordered by `(anchor or seq,
displaced first, seq)`; a cursor is still an item's `seq`, taken at that
item's place in this order, so paging neither splits nor repeats an item.
`has_more` says whether more items exist in the paging direction (older for a
backward page, newer for a forward page); it is decided by reading one item
past the page. `next_before_seq` continues a backward page and is None when
the oldest item was reached. `next_after_seq` is the seq of the newest item on
the page (or the cursor given when the page is empty), so a forward reader can
always resume from it, also to poll a live thread.

A page is read as of one moment: the thread's last seq, read first. Records
written while the page is read (a run going on, a fork) wait for the next
page, so a page never shows a fork's run without the fork that puts it on its
branch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, cast

from journal_bridge.model import envelope as ev
from journal_bridge.model.envelope import StoredRecord, stored_seq
from journal_bridge.model.errors import InvalidArgument
from journal_bridge.model.records import CANCELLED_ERROR_TYPE, MARKER_COUNTS, is_hidden
from journal_bridge.model.shapes import (
    JournalHistoryItem,
    JournalHistoryPage,
    JournalInterrupt,
    JournalMessageItem,
    JournalRunStatus,
    JournalSummaryMarker,
)
from journal_bridge.projection.branches import Branch, annotate_forks, branch_of
from journal_bridge.store.base import RunEventStore

__all__ = [
    "MARKER_TYPE",
    "ORDER_EVENT",
    "ORDER_RUN_ID",
    "RUN_STATUS_TYPE",
    "anchor_of",
    "TIMELINE_CATEGORIES",
    "history_page",
    "project",
    "project_record",
]

MARKER_TYPE = "summary_marker"
RUN_STATUS_TYPE = "run_status"
ORDER_RUN_ID = "journal-bridge:order"
ORDER_EVENT = "journal.order"
# `outputs` holds `run.interrupt` and one `run.end` per run, which projects to nothing.
TIMELINE_CATEGORIES = (ev.MESSAGE, ev.MIDDLEWARE, ev.ERROR, ev.OUTPUTS)

_MessageType = Literal["human", "ai", "tool"]
_MESSAGE_TYPES: dict[str, _MessageType] = {
    ev.LLM_HUMAN_INPUT: "human",
    ev.LLM_AI_RESPONSE: "ai",
    ev.LLM_TOOL_RESULT: "tool",
}
# A timeline read may hit records that project to nothing; each read asks for
# at least this many so a page with hidden records still needs few queries.
_MIN_READ = 16
# What a page shows of a batch of records: their items (a record projects to none or one).
Projector = Callable[[Sequence[StoredRecord]], list[JournalHistoryItem]]


def anchor_of(event: StoredRecord) -> int | None:
    """The seq of the record `event` belongs before, when it was written after it."""
    value = (event.metadata or {}).get("anchor_seq") if isinstance(event.metadata, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _created_at(event: StoredRecord) -> str:
    value = event.created_at
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _message_row(event: StoredRecord) -> JournalMessageItem | None:
    message_type = _MESSAGE_TYPES.get(event.event_type)
    if message_type is None:
        return None
    # What the user sent is conversation whatever marks it carries.
    if message_type != "human" and is_hidden(event.metadata):
        return None
    content = event.content
    if isinstance(content, dict):
        message: dict[str, object] = dict(content)
        message.setdefault("type", message_type)
    else:
        # A writer that journaled bare text: still a readable message.
        message = {"type": message_type, "content": content}
    message.setdefault("id", None)
    message["seq"] = stored_seq(event)
    message["run_id"] = event.run_id
    message["created_at"] = _created_at(event)
    # The writer's message dict, its fields kept as journaled (the schema leaves it open).
    return cast(JournalMessageItem, message)


def _ids(value: object) -> list[str]:
    return [str(i) for i in value if i is not None] if isinstance(value, list) else []


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: object) -> str | None:
    return None if value is None else value if isinstance(value, str) else str(value)


def _marker(event: StoredRecord) -> JournalSummaryMarker | None:
    if event.event_type != ev.MIDDLEWARE_SUMMARIZE:
        return None
    content: dict[str, object] = event.content if isinstance(event.content, dict) else {}
    action = content.get("action", "summarize")
    if action != "summarize":
        return None
    changes = content.get("changes")
    if not isinstance(changes, dict):
        # A marker of deer-flow's summarize-marker design alone: the summary in
        # the content, the counts in the metadata.
        metadata = event.metadata or {}
        changes = {k: metadata[k] for k in MARKER_COUNTS if k in metadata}
        changes["summary"] = content.get("content")
    replaced_ids = _ids(changes.get("replaced_message_ids"))
    earlier_summaries = set(_ids(changes.get("previous_summary_ids")))
    return {
        "type": "summary_marker",
        "id": f"summary-marker-{event.seq}",
        "seq": stored_seq(event),
        "run_id": event.run_id,
        "created_at": _created_at(event),
        "replaced_count": _count(changes.get("replaced_count")),
        # Records written before `condensed_count` existed count every replaced id.
        "condensed_count": _count(changes.get("condensed_count", changes.get("replaced_count"))),
        "preserved_count": _count(changes.get("preserved_count")),
        "summary": _text(changes.get("summary")),
        "summary_message_id": _text(changes.get("summary_message_id")),
        "replaced_message_ids": replaced_ids,
        "condensed_message_ids": [i for i in replaced_ids if i not in earlier_summaries],
    }


def _interrupts(value: object) -> list[JournalInterrupt]:
    """A `run.interrupt` record's interrupts, as the writer gave them (`{"id", "value"}` each)."""
    return cast(list[JournalInterrupt], value) if isinstance(value, list) else []


def _run_status(event: StoredRecord) -> JournalRunStatus | None:
    content, metadata = event.content, event.metadata or {}
    status: Literal["failed", "cancelled", "interrupted"]
    if event.event_type == ev.RUN_ERROR:
        error_type = _text(metadata.get("error_type"))
        status = "cancelled" if error_type == CANCELLED_ERROR_TYPE else "failed"
        message, interrupts = (content if isinstance(content, str) else None), []
    elif event.event_type == ev.RUN_INTERRUPT:
        status, error_type, message = "interrupted", None, None
        interrupts = _interrupts(content.get("interrupts") if isinstance(content, dict) else None)
    else:
        return None
    return {
        "type": "run_status",
        "id": f"run-status-{event.seq}",
        "seq": stored_seq(event),
        "run_id": event.run_id,
        "created_at": _created_at(event),
        "status": status,
        "error_type": error_type,
        "message": message,
        "interrupts": interrupts,
    }


def project_record(event: StoredRecord) -> JournalHistoryItem | None:
    """The item one record projects to, or None when it is not part of the conversation."""
    if event.category == ev.MESSAGE:
        return _message_row(event)
    if event.category == ev.MIDDLEWARE:
        return _marker(event)
    if event.category in (ev.ERROR, ev.OUTPUTS):
        return _run_status(event)
    return None


def project(events: Iterable[StoredRecord]) -> list[JournalHistoryItem]:
    """Items for `events`, in the order given (the store's ascending `seq`)."""
    items: list[JournalHistoryItem] = []
    for event in events:
        item = project_record(event)
        if item is not None:
            items.append(item)
    return items


def _markers_only(events: Iterable[StoredRecord]) -> list[JournalHistoryItem]:
    return [item for item in project(events) if item["type"] == MARKER_TYPE]


async def _read(
    store: RunEventStore,
    thread_id: str,
    categories: Sequence[str],
    projector: Projector,
    want: int,
    *,
    ceiling: int,
    before_seq: int | None = None,
    after_seq: int | None = None,
    branch: Branch | None = None,
) -> list[JournalHistoryItem]:
    """Up to `want` items next to a cursor, ascending seq, of the records up to
    `ceiling`: the newest below `before_seq` (the newest of all without a
    cursor), or the oldest above `after_seq`.

    A record may project to no item (or several), so the store is read in
    batches until enough items came or the records ran out. With a `branch`,
    only its records count, and reading skips the ranges off it.
    """
    if after_seq is None:
        before_seq = ceiling + 1 if before_seq is None else min(before_seq, ceiling + 1)
    if branch is not None:
        return await _read_branch(store, thread_id, categories, projector, want, before_seq, after_seq, branch, ceiling)
    backward = after_seq is None
    items: list[JournalHistoryItem] = []
    cursor = before_seq if backward else after_seq
    while len(items) < want:
        batch = max(want - len(items), _MIN_READ)
        records = await store.list_timeline(
            thread_id,
            categories=tuple(categories),
            limit=batch,
            before_seq=cursor if backward else None,
            after_seq=None if backward else cursor,
        )
        if not records:
            break
        if backward:
            items = projector(records) + items
            cursor = stored_seq(records[0])
        else:
            below = [r for r in records if stored_seq(r) <= ceiling]
            items.extend(projector(below))
            if len(below) < len(records):
                break
            cursor = stored_seq(records[-1])
        if len(records) < batch:
            break
    return items


async def _read_branch(
    store: RunEventStore,
    thread_id: str,
    categories: Sequence[str],
    projector: Projector,
    want: int,
    before_seq: int | None,
    after_seq: int | None,
    branch: Branch,
    ceiling: int,
) -> list[JournalHistoryItem]:
    """`_read` of the records on `branch`: range by range, newest first or oldest first."""
    items: list[JournalHistoryItem] = []
    if after_seq is None:
        cursor = before_seq
        while len(items) < want:
            found = await branch.range_below(cursor)
            if found is None:
                break
            high = found[1]
            batch = max(want - len(items), _MIN_READ)
            records = await store.list_timeline(
                thread_id, categories=tuple(categories), limit=batch,
                before_seq=None if high is None else high + 1,
            )
            if not records:
                break
            await branch.extend_to(stored_seq(records[0]))
            items = projector([r for r in records if branch.contains(stored_seq(r)) and branch.visible(r)]) + items
            if len(records) < batch:
                break  # nothing older anywhere
            cursor = stored_seq(records[0])
        return items
    ranges = sorted(await branch.all_ranges())
    for low, top in ranges:
        high = ceiling if top is None else min(top, ceiling)
        if high <= after_seq:
            continue
        cursor = max(after_seq, low - 1)
        while len(items) < want:
            batch = max(want - len(items), _MIN_READ)
            records = await store.list_timeline(thread_id, categories=tuple(categories), limit=batch, after_seq=cursor)
            in_range = [r for r in records if stored_seq(r) <= high]
            items.extend(projector([r for r in in_range if branch.visible(r)]))
            if len(records) < batch or len(in_range) < len(records):
                break  # the range (or the journal) ends here
            cursor = stored_seq(records[-1])
        if len(items) >= want:
            break
    return items


async def _displaced(store: RunEventStore, thread_id: str) -> dict[int, int]:
    """Seq -> anchor of the thread's records that belong before an earlier-written one."""
    found: dict[int, int] = {}
    after = 0
    while True:
        page = await store.list_events(thread_id, ORDER_RUN_ID, event_types=[ORDER_EVENT], limit=500, after_seq=after)
        for record in page:
            content = record.content if isinstance(record.content, dict) else {}
            for seq, anchor in (content.get("displaced") or {}).items():
                if str(seq).isdigit() and isinstance(anchor, int):
                    found[int(seq)] = anchor
        if len(page) < 500:
            return found
        after = stored_seq(page[-1])


async def _read_seqs(
    store: RunEventStore, thread_id: str, categories: Sequence[str], projector: Projector, seqs: Sequence[int]
) -> list[JournalHistoryItem]:
    """The items of the records with these seqs (ascending)."""
    wanted = set(seqs)
    items: list[JournalHistoryItem] = []
    cursor, last = min(seqs) - 1, max(seqs)
    while cursor < last:
        records = await store.list_timeline(thread_id, categories=tuple(categories), limit=500, after_seq=cursor)
        if not records:
            break
        items.extend(projector([r for r in records if r.seq in wanted]))
        cursor = stored_seq(records[-1])
        if len(records) < 500:
            break
    return items


def _order_key(seq: int, displaced: dict[int, int]) -> tuple[int, int, int]:
    anchor = displaced.get(seq)
    return (anchor, 0, seq) if anchor is not None else (seq, 1, seq)


@dataclass(frozen=True)
class _PageQuery:
    """One page asked of a thread: which records, how they are shown, and where."""

    categories: Sequence[str]
    projector: Projector
    limit: int
    before_seq: int | None
    after_seq: int | None
    ceiling: int  # the thread's last seq when the page was asked for
    branch: Branch | None = None


async def _ordered_page(
    store: RunEventStore, thread_id: str, query: _PageQuery, displaced: dict[int, int]
) -> JournalHistoryPage:
    """`_page` for a thread with displaced records: the same contract, in conversation order."""
    categories, projector, limit = query.categories, query.projector, query.limit
    before_seq, after_seq, ceiling = query.before_seq, query.after_seq, query.ceiling
    displaced = {seq: anchor for seq, anchor in displaced.items() if seq <= ceiling}
    moved = await _read_seqs(store, thread_id, categories, projector, sorted(displaced)) if displaced else []
    branch = query.branch
    if branch is not None:
        # A displaced record is on the branch its anchor is on.
        await branch.all_ranges()
        moved = [m for m in moved if branch.contains(displaced[m["seq"]])]

    def in_place(records: Sequence[StoredRecord]) -> list[JournalHistoryItem]:
        return projector([r for r in records if r.seq not in displaced])

    def key(item: JournalHistoryItem) -> tuple[int, int, int]:
        return _order_key(item["seq"], displaced)

    if after_seq is not None:
        cursor = _order_key(after_seq, displaced)
        # In-place items after the cursor: from its anchor on when it is displaced.
        start = cursor[0] if cursor[1] == 1 else cursor[0] - 1
        items = (await _read(
            store, thread_id, categories, in_place, limit + 1, ceiling=ceiling, after_seq=start, branch=branch
        ))[: limit + 1]
        last_shown = items[-1]["seq"] if len(items) > limit else None
        items += [m for m in moved if key(m) > cursor and (last_shown is None or displaced[m["seq"]] <= last_shown)]
        return _forward_page(sorted(items, key=key), limit, after_seq)
    before = _order_key(before_seq, displaced) if before_seq is not None else None
    items = await _read(
        store, thread_id, categories, in_place, limit + 1,
        ceiling=ceiling, before_seq=before[0] if before else None, branch=branch,
    )
    items = items[-(limit + 1):]
    floor = items[0]["seq"] if len(items) > limit else None
    items += [m for m in moved if (before is None or key(m) < before) and (floor is None or displaced[m["seq"]] > floor)]
    return _backward_page(sorted(items, key=key), limit)


async def _page(store: RunEventStore, thread_id: str, query: _PageQuery) -> JournalHistoryPage:
    limit, before_seq, after_seq = query.limit, query.before_seq, query.after_seq
    if limit < 1:
        raise InvalidArgument(f"limit: must be at least 1, got {limit}")
    if before_seq is not None and after_seq is not None:
        raise InvalidArgument("before_seq and after_seq: give at most one cursor")
    displaced = await _displaced(store, thread_id)
    if displaced:
        page = await _ordered_page(store, thread_id, query, displaced)
    else:
        categories, projector, branch = query.categories, query.projector, query.branch
        if after_seq is not None:
            items = await _read(
                store, thread_id, categories, projector, limit + 1,
                ceiling=query.ceiling, after_seq=after_seq, branch=branch,
            )
            page = _forward_page(items, limit, after_seq)
        else:
            items = await _read(
                store, thread_id, categories, projector, limit + 1,
                ceiling=query.ceiling, before_seq=before_seq, branch=branch,
            )
            page = _backward_page(items, limit)
    if query.branch is not None:
        await annotate_forks(store, thread_id, query.branch, page["data"])
    return page


def _forward_page(items: list[JournalHistoryItem], limit: int, after_seq: int) -> JournalHistoryPage:
    """The page of the first `limit` of `items` (oldest first), the items after `after_seq`."""
    data = items[:limit]
    return {
        "data": data,
        "has_more": len(items) > limit,
        # Items older than a forward page exist only past the cursor given.
        "next_before_seq": data[0]["seq"] if data and after_seq > 0 else None,
        "next_after_seq": data[-1]["seq"] if data else after_seq,
    }


def _backward_page(items: list[JournalHistoryItem], limit: int) -> JournalHistoryPage:
    """The page of the last `limit` of `items` (up to `limit + 1`, oldest first)."""
    has_more = len(items) > limit
    data = items[-limit:] if has_more else items
    return {
        "data": data,
        "has_more": has_more,
        "next_before_seq": data[0]["seq"] if has_more else None,
        "next_after_seq": data[-1]["seq"] if data else None,
    }


async def history_page(
    store: RunEventStore,
    thread_id: str,
    *,
    limit: int = 50,
    before_seq: int | None = None,
    after_seq: int | None = None,
    run_id: str | None = None,
    checkpoint: Mapping[str, object] | None = None,
    markers_only: bool = False,
) -> JournalHistoryPage:
    """One page of a thread's history: message rows and summary markers in `seq` order.

    Cursors as described in the module docstring; `ValueError` (naming the
    parameter) for a limit below 1 or both cursors at once. The items are those
    of the thread's current branch, of the branch ending with run `run_id`
    (`LookupError` when the thread has no such run), or of the branch as of a
    checkpoint (`checkpoint`: its state as the server gives it); see
    `journal_bridge.projection.branches`. `markers_only`: the page holds summary
    markers only.
    """
    ceiling = await store.last_seq(thread_id)
    branch = await branch_of(store, thread_id, run_id=run_id, checkpoint=checkpoint, ceiling=ceiling)
    categories, projector = ((ev.MIDDLEWARE,), _markers_only) if markers_only else (TIMELINE_CATEGORIES, project)
    return await _page(store, thread_id, _PageQuery(categories, projector, limit, before_seq, after_seq, ceiling, branch))

