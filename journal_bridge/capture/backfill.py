"""Backfill: rebuild the journal of threads the bridge never saw, from checkpoints.

A thread's checkpoint history (`threads.get_history`, paged back with
`before=`) holds every state the thread went through, on every branch. The
branch the thread is on (its newest checkpoint and that one's parents) is
walked oldest to newest:

- every message id that ever appeared, in order of first appearance, becomes
  the record the bridge would have written (`llm.human.input`,
  `llm.ai.response`, `llm.tool.result`, category `message`, the message dict
  as content);
- a summary message (`additional_kwargs.lc_source == "summarization"`) that is
  new in a checkpoint is a compaction: a `middleware:summarize` record whose
  `changes` say which ids of the previous checkpoint it replaced (present
  before, gone after; `previous_summary_ids` / `condensed_count` as the
  tracking middleware reports them) and which it preserved, placed before the messages new
  in that checkpoint -- where the bridge places it. The summary text is the
  message content without the upstream prefix.

Records carry `metadata.source = "backfill"`, the checkpoint's `run_id` and
`created_at`, and keys `backfill:message:{id}` / `backfill:summarize:{id}`.

Idempotency: a message whose id the thread's journal already holds (written by
the bridge, the tee, the follower or an earlier backfill) and a marker whose
`summary_message_id` it already holds are not written again, so a second
backfill, or one of a thread the plugin journaled, writes nothing.

Limits, reported per thread rather than hidden:
- history that does not start at the thread's first checkpoint (pruned, copied
  into a new thread, or `since_checkpoint`): messages already in the oldest
  checkpoint are journaled in their checkpoint order, but a compaction before it
  replaced messages that are gone (status `partial`);
- a busy thread (a run in progress) is skipped: its run is still being written;
- a run the runtime executed again (its worker died) whose earlier attempt
  journaled messages no checkpoint holds gets a `superseded_attempt` fork
  before the records written now (`journal_bridge.mapping.attempts`): the
  history shows the attempt that went on, the journal keeps both
  (`superseded` counts such runs);
- records appended to a thread that already had a journal go after it in seq;
  each such record that belongs before a journaled one carries
  `metadata.anchor_seq` (the seq of the journaled record it precedes), and one
  `journal.order` record (run `journal-bridge:order`, category `trace`) lists
  them, so the history shows them in conversation order
  (`journal_bridge.projection.history`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from journal_bridge.model import envelope as ev
from journal_bridge.model import records
from journal_bridge.model.envelope import RunEvent, make_event, stored_seq
from journal_bridge.projection.branches import read_forks
from journal_bridge.projection.history import ORDER_EVENT, ORDER_RUN_ID, anchor_of
from journal_bridge.mapping.attempts import checkpoint_attempt, checkpoint_run, run_message_ids
from journal_bridge.mapping.compactions import summary_text
from journal_bridge.mapping.reader import OWNER_KEY, owned
from journal_bridge.store import RunEventStore
from journal_bridge.store.base import supports
from journal_bridge.model.timestamps import parse_time
from journal_bridge.host.sdk import SdkClient

logger = logging.getLogger(__name__)

__all__ = [
    "BACKFILL_SOURCE",
    "BackfillSummary",
    "ThreadBackfill",
    "backfill",
    "backfill_thread",
]

BACKFILL_SOURCE = "backfill"
_EVENT_TYPES = {"human": ev.LLM_HUMAN_INPUT, "ai": ev.LLM_AI_RESPONSE, "tool": ev.LLM_TOOL_RESULT}
_PAGE = 100
_WRITE_BATCH = 500

COMPLETE = "complete"
PARTIAL = "partial"
NOT_RECOVERABLE = "not_recoverable"
BUSY = "busy"
NOT_FOUND = "not_found"
FAILED = "error"


@dataclass
class ThreadBackfill:
    """What backfill did for one thread. `status`: complete, partial, not_recoverable, busy, not_found, error."""

    thread_id: str
    status: str = COMPLETE
    checkpoints: int = 0
    messages: int = 0
    markers: int = 0
    written: int = 0
    already_present: int = 0
    owners_filled: int = 0  # records journaled before owners were recorded, given the thread's
    superseded: int = 0  # runs executed again whose earlier attempt's records left the history
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BackfillSummary:
    threads: list[ThreadBackfill] = field(default_factory=list)

    @property
    def written(self) -> int:
        return sum(t.written for t in self.threads)

    @property
    def already_present(self) -> int:
        return sum(t.already_present for t in self.threads)

    def not_recoverable(self) -> list[ThreadBackfill]:
        return [t for t in self.threads if t.status not in (COMPLETE,)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "threads": len(self.threads),
            "written": self.written,
            "already_present": self.already_present,
            "incomplete": [
                {"thread_id": t.thread_id, "status": t.status, "notes": t.notes} for t in self.not_recoverable()
            ],
            "results": [t.to_dict() for t in self.threads],
        }


def _is_summary(message: dict[str, Any]) -> bool:
    return records.is_summary_message(message)


def _messages(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    values = state.get("values")
    messages = values.get("messages") if isinstance(values, dict) else None
    return [m for m in messages or [] if isinstance(m, dict)]


def _checkpoint_id(state: Mapping[str, Any]) -> str | None:
    checkpoint = state.get("checkpoint") or {}
    return checkpoint.get("checkpoint_id") or state.get("checkpoint_id")


def _writer_node(previous: Mapping[str, Any] | None) -> str | None:
    """The node that produced a checkpoint: the one task its parent had pending."""
    if previous is None:
        return None
    names = [t.get("name") for t in previous.get("tasks") or [] if isinstance(t, dict)]
    names = names or list(previous.get("next") or [])
    return names[0] if len(names) == 1 else None


async def read_history(
    client: SdkClient, thread_id: str, *, page_size: int = _PAGE
) -> list[Mapping[str, Any]]:
    """The thread's root checkpoints, oldest first, every page of them."""
    states: list[Mapping[str, Any]] = []
    before: Any = None
    while True:
        page = await client.threads.get_history(thread_id, limit=page_size, before=before)
        page = [s for s in page if not ((s.get("checkpoint") or {}).get("checkpoint_ns"))]
        if not page:
            break
        states.extend(page)
        if len(page) < page_size:
            break
        before = page[-1]["checkpoint"]
    states = _current_branch(states)
    states.reverse()
    return states


def _current_branch(states: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Of a thread's checkpoints (newest first, every branch), those of the branch the
    newest is on, newest first: a backfill rebuilds the conversation the thread is in."""
    by_id = {_checkpoint_id(state): state for state in states}
    chain: list[Mapping[str, Any]] = []
    state = states[0] if states else None
    while state is not None:
        chain.append(state)
        parent = (state.get("parent_checkpoint") or {}).get("checkpoint_id")
        state = by_id.get(parent) if parent else None
    return chain


class _Reconstruction:
    """Walks checkpoints oldest to newest and collects the records they imply."""

    def __init__(self, thread_id: str, result: ThreadBackfill) -> None:
        self.thread_id = thread_id
        self.result = result
        self.records: list[RunEvent] = []
        # (kind, identity) per record, for the already-journaled check.
        self.identities: list[tuple[str, str]] = []

    def walk(self, states: list[Mapping[str, Any]]) -> None:
        seen: set[str] = set()
        previous: Mapping[str, Any] | None = None
        previous_ids: list[str] = []
        for state in states:
            messages = _messages(state)
            ids = [str(m.get("id")) for m in messages if m.get("id")]
            present = set(ids)
            for message in messages:
                if _is_summary(message) and message.get("id") and message["id"] not in set(previous_ids):
                    self._marker(message, state, previous, previous_ids, present)
            for message in messages:
                key = message.get("id")
                if not key or key in seen:
                    continue
                seen.add(key)
                if not _is_summary(message):
                    self._message(message, state, previous)
            previous, previous_ids = state, ids

    def _metadata(self, state: Mapping[str, Any], node: str | None) -> dict[str, Any]:
        metadata = state.get("metadata") or {}
        return {
            "source": BACKFILL_SOURCE,
            "checkpoint_id": _checkpoint_id(state),
            "langgraph_step": metadata.get("step"),
            "langgraph_node": node,
        }

    def _run_id(self, state: Mapping[str, Any]) -> str:
        return checkpoint_run(state) or BACKFILL_SOURCE

    def _message(self, message: dict[str, Any], state: Mapping[str, Any], previous: Mapping[str, Any] | None) -> None:
        event_type = _EVENT_TYPES.get(str(message.get("type")))
        if event_type is None:
            return
        node = _writer_node(previous)
        metadata = self._metadata(state, node)
        if event_type == ev.LLM_AI_RESPONSE:
            metadata.update(caller=node, usage=message.get("usage_metadata"))
        elif event_type == ev.LLM_TOOL_RESULT:
            metadata["tool"] = message.get("name")
        self.result.messages += 1
        self._record(("message", str(message["id"])), "message", state, event_type, ev.MESSAGE, dict(message), metadata)

    def _marker(
        self,
        summary: dict[str, Any],
        state: Mapping[str, Any],
        previous: Mapping[str, Any] | None,
        previous_ids: list[str],
        present: set[str],
    ) -> None:
        node = _writer_node(previous)
        name, _, hook = (node or "").rpartition(".")
        replaced: list[str] | None = None
        earlier_summaries: list[str] | None = None
        condensed: int | None = None
        if previous is None:
            # The summary is in the oldest checkpoint there is: what it replaced is gone.
            preserved = [str(m["id"]) for m in _messages(state) if m.get("id") and m["id"] != summary["id"]]
        else:
            replaced = [i for i in previous_ids if i not in present]
            preserved = [i for i in previous_ids if i in present]
            summaries = {str(m.get("id")) for m in _messages(previous) if _is_summary(m)}
            earlier_summaries = [i for i in replaced if i in summaries]
            condensed = len(replaced) - len(earlier_summaries)
        changes = {
            "event": ev.SUMMARIZATION_EVENT,
            "middleware": name or None,
            "hook": hook or "before_model",
            "replaced_count": None if replaced is None else len(replaced),
            "preserved_count": len(preserved),
            "replaced_message_ids": replaced,
            "previous_summary_ids": earlier_summaries,
            "condensed_count": condensed,
            "preserved_message_ids": preserved,
            "summary_message_id": summary["id"],
            "summary": summary_text(summary),
        }
        spec_content, counts = records.marker_fields(changes)
        metadata = {**self._metadata(state, node), **counts}
        if previous is None:
            metadata["incomplete"] = True
        self.result.markers += 1
        content = {
            "name": name or "SummarizationMiddleware",
            "hook": hook or "before_model",
            "action": "summarize",
            "changes": changes,
            **spec_content,
        }
        self._record(("marker", str(summary["id"])), "summarize", state, ev.MIDDLEWARE_SUMMARIZE, ev.MIDDLEWARE, content, metadata)

    def _record(
        self,
        identity: tuple[str, str],
        key_kind: str,
        state: Mapping[str, object],
        event_type: str,
        category: str,
        content: object,
        metadata: dict[str, object],
    ) -> None:
        """Collect the record of one message or marker found in `state`, under its
        (kind, identity) and the source key `backfill:<key_kind>:<identity>`."""
        self.identities.append(identity)
        self.records.append(
            make_event(
                thread_id=self.thread_id,
                run_id=self._run_id(state),
                event_type=event_type,
                category=category,
                content=content,
                metadata=metadata,
                created_at=parse_time(state.get("created_at")),
                source_key=f"backfill:{key_kind}:{identity[1]}",
            )
        )


async def _journaled_identities(
    store: RunEventStore, thread_id: str, by_run: dict[str, dict[str, int]] | None = None
) -> dict[tuple[str, str], int]:
    """Message ids and marker summary ids the thread's journal already holds, with
    the position each shows at in the history (its seq, or its anchor). `by_run`
    is given each run's conversation message ids, with the seq of each."""
    found: dict[tuple[str, str], int] = {}
    after = 0
    while True:
        page = await store.list_timeline(thread_id, limit=500, after_seq=after)
        for record in page:
            content = record.content
            if not isinstance(content, dict):
                continue
            position = anchor_of(record) or stored_seq(record)
            if record.category == ev.MESSAGE and content.get("id"):
                found.setdefault(("message", str(content["id"])), position)
                if by_run is not None and not records.is_hidden(record.metadata):
                    by_run.setdefault(record.run_id, {})[str(content["id"])] = int(record.seq or 0)
            elif record.event_type == ev.MIDDLEWARE_SUMMARIZE:
                summary_id = (content.get("changes") or {}).get("summary_message_id")
                if summary_id:
                    found.setdefault(("marker", str(summary_id)), position)
        if len(page) < 500:
            return found
        after = stored_seq(page[-1])


def _completeness(states: list[Mapping[str, Any]], result: ThreadBackfill, since_checkpoint: str | None) -> None:
    oldest = states[0]
    messages = _messages(oldest)
    truncated = since_checkpoint is not None or oldest.get("parent_checkpoint") is not None
    summaries = [m for m in messages if _is_summary(m)]
    # A summary in the oldest state means a compaction happened before it, even in
    # a thread whose first checkpoint this is (state copied in with update_state).
    if not summaries and (not truncated or not messages):
        return
    checkpoint = _checkpoint_id(oldest)
    if summaries:
        result.status = PARTIAL
        result.notes.append(
            f"history starts at checkpoint {checkpoint}, after a compaction: the messages its "
            f"summary replaced are gone ({len(messages) - len(summaries)} later messages recovered)"
        )
    else:
        result.status = PARTIAL
        result.notes.append(
            f"history starts at checkpoint {checkpoint}, which already holds {len(messages)} "
            "messages: they are journaled in checkpoint order; any earlier compaction is unknown"
        )


async def backfill_thread(
    client: SdkClient,
    store: RunEventStore,
    thread_id: str,
    *,
    since_checkpoint: str | None = None,
    page_size: int = _PAGE,
    allow_busy: bool = False,
    default_owner: str | None = None,
) -> ThreadBackfill:
    """Journal what `thread_id`'s checkpoints show and the journal lacks.

    `since_checkpoint` ignores checkpoints older than the given id, as if they
    had been pruned. The records written carry the thread's owner (its
    `metadata.user_id`, else `default_owner`), and records journaled before
    owners were recorded are given it (`result.owners_filled`). Never raises
    for a thread-level problem: the result says it.
    """
    result = ThreadBackfill(thread_id=thread_id)
    try:
        thread = await client.threads.get(thread_id)
    except Exception as exc:  # noqa: BLE001 - 404 and transport errors alike, reported
        status = getattr(getattr(exc, "response", None), "status_code", None)
        result.status = NOT_FOUND if status == 404 else FAILED
        result.notes.append(f"cannot read the thread: {exc}")
        return result
    if thread.get("status") == "busy" and not allow_busy:
        result.status = BUSY
        result.notes.append("a run is in progress; backfill the thread again once it is idle")
        return result
    owner = (thread.get("metadata") or {}).get(OWNER_KEY) or default_owner
    if isinstance(owner, str) and owner and supports(store, "fill_owner"):
        result.owners_filled = await store.fill_owner(thread_id, owner)
    states = await read_history(client, thread_id, page_size=page_size)
    if since_checkpoint is not None:
        ids = [_checkpoint_id(s) for s in states]
        if since_checkpoint not in ids:
            result.status = FAILED
            result.notes.append(f"checkpoint {since_checkpoint} is not in the thread's history")
            return result
        states = states[ids.index(since_checkpoint):]
    result.checkpoints = len(states)
    if not states:
        result.status = NOT_RECOVERABLE
        result.notes.append("the thread has no checkpoints")
        return result
    _completeness(states, result, since_checkpoint)

    rebuilt = _Reconstruction(thread_id, result)
    rebuilt.walk(states)
    by_run: dict[str, dict[str, int]] = {}
    known = await _journaled_identities(store, thread_id, by_run)
    if result.status == COMPLETE:
        # Before the records written now: they are the attempt that went on.
        result.superseded = await _supersede_attempts(client, store, thread_id, states, by_run)
    fresh: list[RunEvent] = []
    anchor: int | None = None
    # Walked newest first: a missing record belongs before the next journaled one.
    for record, ident in reversed(list(zip(rebuilt.records, rebuilt.identities))):
        if ident in known:
            anchor = known[ident]
            continue
        if anchor is not None:
            record = replace(record, metadata={**record.metadata, "anchor_seq": anchor})
        fresh.append(record)
    fresh = owned(fresh[::-1], owner if isinstance(owner, str) and owner else None)
    result.already_present = len(rebuilt.records) - len(fresh)
    placed = sum(1 for r in fresh if "anchor_seq" in r.metadata)
    if placed:
        result.notes.append(
            f"{placed} records belong between the {len(known)} the journal already held: "
            "appended, and shown in conversation order by the history"
        )
    last_seq = await store.last_seq(thread_id)
    displaced: dict[str, int] = {}
    for start in range(0, len(fresh), _WRITE_BATCH):
        stored = await store.put_batch(fresh[start: start + _WRITE_BATCH])
        # A key stored meanwhile comes back with its old seq: not written now.
        added = [r for r in stored if r.seq is not None and r.seq > last_seq]
        result.written += len(added)
        result.already_present += len(stored) - len(added)
        last_seq = max([last_seq, *(r.seq for r in added)])
        displaced.update({str(r.seq): anchor for r in added if (anchor := anchor_of(r)) is not None})
    if displaced:
        await store.put_batch([make_event(
            thread_id=thread_id, run_id=ORDER_RUN_ID, event_type=ORDER_EVENT, category=ev.TRACE,
            content={"displaced": displaced}, metadata={"source": BACKFILL_SOURCE},
            source_key=f"order:{min(map(int, displaced))}",
        )])
    return result


async def _supersede_attempts(
    client: SdkClient, store: RunEventStore, thread_id: str, states: list[Mapping[str, Any]],
    by_run: dict[str, dict[str, int]],
) -> int:
    """A fork for each run of the branch executed more than once whose journal holds
    messages none of the branch's checkpoints held (what a killed attempt of it
    journaled past its last checkpoint), unless one written since those records
    supersedes them; how many.

    Executed more than once: its checkpoints say a later attempt (`run_attempt`),
    or the journal holds an end of it whose last message the branch never held (a
    restart executed anew a run that had ended: the in-memory runtime does, for a
    run still running when it last saved its state).

    A run the server no longer has, none of whose messages the branch holds, is
    one a restart lost (the in-memory runtime, restarted from a state saved
    before the run was made): its fork keeps nothing (attempt 0)."""
    on_branch = {str(m["id"]) for state in states for m in _messages(state) if m.get("id")}
    chain = states[::-1]
    runs = list(dict.fromkeys(str(r) for r in ((s.get("metadata") or {}).get("run_id") for s in chain) if r))
    forks: list[RunEvent] = []
    read = await read_forks(store, thread_id)
    superseding: dict[str, int] = {}
    for fork in read:
        if fork.attempt is not None and fork.run_id:
            superseding[str(fork.run_id)] = max(superseding.get(str(fork.run_id), 0), fork.seq)
    for run_id in runs:
        strays = [seq for message_id, seq in (by_run.get(run_id) or {}).items() if message_id not in on_branch]
        if not strays:
            continue
        attempt = max(checkpoint_attempt(s) for s in chain if (s.get("metadata") or {}).get("run_id") == run_id)
        if attempt < 2 and not await _ended_elsewhere(store, thread_id, run_id, on_branch):
            # Executed once: messages no checkpoint holds are the run's own (a compaction
            # inside a run that checkpoints only at its end), never hidden on a guess.
            continue
        if superseding.get(run_id, 0) > max(strays):
            continue
        forks.append(records.superseded_attempt(thread_id, run_id, max(attempt, 2), run_message_ids(chain, run_id)))
    rolled_back = {fork.rolled_back_run_id for fork in read if fork.rolled_back_run_id}
    for run_id, messages in by_run.items():
        if (run_id in runs or run_id in superseding or run_id in rolled_back or run_id == thread_id
                or run_id.startswith(("state:", "journal-bridge:", BACKFILL_SOURCE))
                or any(message_id in on_branch for message_id in messages)):
            continue
        if not await _run_lost(client, thread_id, run_id):
            continue  # on another branch
        forks.append(records.superseded_attempt(thread_id, run_id, 0, ()))
    if forks:
        await store.put_batch(forks)
    return len(forks)


async def _run_lost(client: SdkClient, thread_id: str, run_id: str) -> bool:
    """Whether the server answers that it has no such run (anything else: not lost)."""
    try:
        await client.runs.get(thread_id, run_id)
    except Exception as exc:  # noqa: BLE001 - only a 404 says the run is gone
        return getattr(getattr(exc, "response", None), "status_code", None) == 404
    return False


async def _ended_elsewhere(store: RunEventStore, thread_id: str, run_id: str, on_branch: set[str]) -> bool:
    """Whether the journal holds an end of the run whose last message the branch never held."""
    for end in await store.list_events(thread_id, run_id, event_types=[ev.RUN_END], limit=10):
        last = end.content.get("last_message_id") if isinstance(end.content, dict) else None
        if last and str(last) not in on_branch:
            return True
    return False


async def _all_thread_ids(client: SdkClient, page_size: int = _PAGE) -> list[str]:
    ids: list[str] = []
    offset = 0
    while True:
        page = await client.threads.search(
            limit=page_size, offset=offset, sort_by="created_at", sort_order="asc", select=["thread_id"]
        )
        ids.extend(str(t["thread_id"]) for t in page)
        if len(page) < page_size:
            return list(dict.fromkeys(ids))
        offset += page_size


async def backfill(
    client: SdkClient,
    store: RunEventStore,
    thread_ids: Iterable[str] | None = None,
    *,
    since_checkpoint: str | None = None,
    on_thread: Callable[[int, int, ThreadBackfill], Awaitable[None] | None] | None = None,
    default_owner: str | None = None,
) -> BackfillSummary:
    """Backfill `thread_ids` (default: every thread on the server), one after another."""
    ids = list(thread_ids) if thread_ids else await _all_thread_ids(client)
    summary = BackfillSummary()
    for index, thread_id in enumerate(ids, start=1):
        try:
            result = await backfill_thread(
                client, store, thread_id, since_checkpoint=since_checkpoint, default_owner=default_owner
            )
        except Exception as exc:
            logger.exception("journal-bridge backfill: thread %s failed", thread_id)
            result = ThreadBackfill(thread_id=thread_id, status=FAILED, notes=[str(exc)])
        summary.threads.append(result)
        if on_thread is not None:
            outcome = on_thread(index, len(ids), result)
            if outcome is not None:
                await outcome
    return summary
