"""The shapes the journal hands across a module or the HTTP boundary, as types.

Each `TypedDict` here is the Python side of a schema the served OpenAPI
document names (`journal_bridge.web.openapi.SCHEMAS`, under the same name):
the projection builds them, the routes answer with them, the clients return
them. The schemas stay the one description of what each field means;
tests/unit/test_shapes.py checks that every class here has its schema's
fields, the same required ones and the same types, so neither drifts alone.

`JournalMessageItem` is a LangChain message dict: the fields listed are the
ones the schema names, and a message may hold more (the schema leaves it
open). A value the journal passes on as the writer gave it (a message's
content blocks, a tool's artifact, a record's content) is typed `object`, or
`JsonObject` when it is a JSON object: a reader checks what it holds before
using it.
"""

# No `from __future__ import annotations`: a TypedDict tells its required
# keys from `Required` and `NotRequired` only when its annotations are evaluated.
from typing import Literal, NotRequired, Required, TypeAlias, TypedDict

__all__ = [
    "JsonObject",
    "JournalBranchAlternative",
    "JournalBranchPoint",
    "JournalHealth",
    "JournalHistoryItem",
    "JournalHistoryPage",
    "JournalInterrupt",
    "JournalMarkersPage",
    "JournalMessageItem",
    "JournalRepairResult",
    "JournalRunEvent",
    "JournalRunEventsPage",
    "JournalRunStatus",
    "JournalRunSummary",
    "JournalRunSummaryList",
    "JournalSummaryMarker",
    "JournalThread",
    "JournalThreadList",
    "JournalToolCall",
    "StoredThread",
]

# A JSON object as the journal keeps it: its values are whatever the writer gave.
JsonObject: TypeAlias = dict[str, object]


class JournalBranchAlternative(TypedDict):
    run_id: str | None
    seq: int | None


class JournalBranchPoint(TypedDict):
    checkpoint_id: str | None
    index: int
    count: int
    alternatives: list[JournalBranchAlternative]


class JournalToolCall(TypedDict):
    name: str
    args: JsonObject
    id: NotRequired[str | None]
    type: NotRequired[Literal["tool_call"]]


class JournalMessageItem(TypedDict, total=False):
    type: Required[Literal["human", "ai", "tool"]]
    id: Required[str | None]
    seq: Required[int]
    run_id: Required[str]
    created_at: Required[str]
    content: str | list[object]
    name: str | None
    additional_kwargs: JsonObject
    response_metadata: JsonObject
    tool_calls: list[JournalToolCall]
    invalid_tool_calls: list[JsonObject]
    usage_metadata: JsonObject | None
    tool_call_id: str
    status: Literal["success", "error"]
    artifact: object
    branch: JournalBranchPoint


class JournalSummaryMarker(TypedDict):
    type: Literal["summary_marker"]
    id: str
    seq: int
    run_id: str
    created_at: str
    replaced_count: int | None
    condensed_count: int | None
    preserved_count: int | None
    summary: str | None
    summary_message_id: str | None
    replaced_message_ids: list[str]
    condensed_message_ids: list[str]
    branch: NotRequired[JournalBranchPoint]


class JournalInterrupt(TypedDict):
    id: str | None
    value: object


class JournalRunStatus(TypedDict):
    type: Literal["run_status"]
    id: str
    seq: int
    run_id: str
    created_at: str
    status: Literal["failed", "cancelled", "interrupted"]
    error_type: str | None
    message: str | None
    interrupts: list[JournalInterrupt]
    branch: NotRequired[JournalBranchPoint]


JournalHistoryItem: TypeAlias = JournalMessageItem | JournalSummaryMarker | JournalRunStatus


class JournalHistoryPage(TypedDict):
    data: list[JournalHistoryItem]
    has_more: bool
    next_before_seq: int | None
    next_after_seq: int | None


class JournalMarkersPage(TypedDict):
    data: list[JournalSummaryMarker]
    has_more: bool
    next_before_seq: int | None
    next_after_seq: int | None


class StoredThread(TypedDict):
    """A thread as the store lists it (`RunEventStore.list_threads`)."""

    thread_id: str
    last_seq: int
    event_count: int
    updated_at: str


class JournalThread(StoredThread):
    title: str | None
    assistant_id: str | None
    message_count: int
    marker_count: int


class JournalThreadList(TypedDict):
    data: list[JournalThread]


class JournalRunSummary(TypedDict):
    run_id: str
    status: str
    started_at: str | None
    ended_at: str | None
    duration_ms: int | None
    error: str | None
    error_type: str | None
    assistant_id: str | None


class JournalRunSummaryList(TypedDict):
    data: list[JournalRunSummary]


class JournalRunEvent(TypedDict):
    thread_id: str
    run_id: str
    seq: int
    event_type: str
    category: str
    content: object
    metadata: JsonObject
    created_at: str
    source_key: NotRequired[str]
    user_id: NotRequired[str]


class JournalRunEventsPage(TypedDict):
    data: list[JournalRunEvent]
    has_more: bool
    next_after_seq: int | None


class JournalRepairResult(TypedDict):
    thread_id: str
    status: Literal["complete", "partial", "not_recoverable", "error"]
    checkpoints: int
    messages: int
    markers: int
    written: int
    already_present: int
    owners_filled: int
    superseded: int
    notes: list[str]


class JournalHealth(TypedDict, total=False):
    """What `/journal/health` answers: `enabled` alone while the plugin journals
    nothing, else the verdict (`journal_bridge.delivery.health.assess`) and the counters."""

    enabled: Required[bool]
    status: Literal["ok", "degraded", "unavailable"]
    reason: str | None
    backlog_growing: bool
    store_url: str
    store_open: bool
    store_failing: bool
    backlog: int
    lag_seconds: float
    stalled_seconds: float
    backlog_growing_seconds: float
    growing_after: float
    spool: str | None
    spool_recovered: int
    records_enqueued: int
    records_written: int
    retried: int
    dropped: int
    last_error: str | None
    active_runs: int
    runs_observed: int
    runs_read: int
    runs_read_elsewhere: int
    runs_read_from_client_joins: int
    runs_completed: int
    runs_failed: int
    runs_errored: int
    runs_cancelled: int
    runs_interrupted: int
    parts_seen: int
    malformed: int
    retained_frames: int
    frames_released: int
    unplanned_requests: int
    stream_replays: int
    streams_repaired: int
    reconciler: JsonObject
    frame_spool: JsonObject
