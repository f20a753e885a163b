"""The OpenAPI description of the journal's routes.

LangGraph Server builds the OpenAPI document of a custom `http.app` from its
route endpoints' docstrings: the text after the last `---` line is read as
YAML and becomes the route's operation object. `describe` writes that
docstring for an endpoint: its prose, then the operation as JSON (which is
YAML too), so `/openapi.json` lists every journal route with its parameters,
responses and error shapes, and a docstring's prose is never parsed as YAML.

The shapes of the answers are named schemas (`SCHEMAS`: `JournalHistoryItem`,
`JournalHistoryPage`, `JournalThread`, ...) that the operations refer to as
`#/components/schemas/...`. A docstring can only describe an operation, so
the plugin adds `SCHEMAS` to the document the server built (`with_components`;
`document` builds the document of a list of routes the same way).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from starlette.routing import BaseRoute
from starlette.schemas import SchemaGenerator

__all__ = [
    "HEALTH",
    "MARKERS",
    "MAX_LIMIT",
    "MAX_RUN_IDS",
    "MAX_SEQ",
    "MESSAGES",
    "REPAIR",
    "RUNS",
    "RUN_EVENTS",
    "SCHEMAS",
    "THREADS",
    "describe",
    "document",
    "viewer_operation",
    "with_components",
]

MAX_LIMIT = 500
MAX_RUN_IDS = 100
# The largest seq every store can hold (a signed 64-bit integer in SQLite and Postgres).
MAX_SEQ = 2**63 - 1
TAG = "Journal"

_ERROR = {
    "type": "object",
    "required": ["detail"],
    "properties": {"detail": {"type": "string", "description": "what went wrong, in a sentence"}},
    "additionalProperties": False,
}
_RETRY_AFTER = {
    "Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}
}
_NULLABLE_INT = {"type": ["integer", "null"]}


def _error(description: str, *, retry: bool = False) -> dict[str, object]:
    response: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": _ERROR}},
    }
    if retry:
        response["headers"] = _RETRY_AFTER
    return response


def _ok(description: str, schema: Mapping[str, object]) -> dict[str, object]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_UNAUTHENTICATED = _error("authentication required (only when the server has `auth` configured)")
_BAD_PARAMETER = _error("a bad parameter; the detail starts with its name (`limit: must be at most 500, ...`)")
_UNAVAILABLE = _error("the journal store (or the access check) is unavailable; retry later", retry=True)
_INTERNAL = _error("the journal failed; the reason is in the server log")

def _parameter(
    name: str, description: str, schema: Mapping[str, object], *, in_path: bool = False, **more: object
) -> dict[str, object]:
    """A route parameter: a path segment, which is always there, or an optional query parameter."""
    return {
        "name": name,
        "in": "path" if in_path else "query",
        "required": in_path,
        "description": description,
        "schema": schema,
        **more,
    }


_THREAD_ID = _parameter(
    "thread_id", "the thread's id (one with a NUL character is refused with 422)", {"type": "string"}, in_path=True
)
_RUN_ID = _parameter("run_id", "the run's id", {"type": "string"}, in_path=True)


def _limit(default: int) -> dict[str, object]:
    return _parameter(
        "limit", "items per page", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": default}
    )


def _seq(name: str, description: str) -> dict[str, object]:
    return _parameter(name, description, {"type": "integer", "minimum": 0, "maximum": MAX_SEQ})


def _text(name: str, description: str) -> dict[str, object]:
    return _parameter(name, description, {"type": "string"})


def _names(name: str, description: str) -> dict[str, object]:
    """A query parameter of several names: comma-separated, or the parameter repeated."""
    return _parameter(
        name, description, {"type": "array", "items": {"type": "string"}}, style="form", explode=True
    )


_BEFORE_SEQ = _seq("before_seq", "cursor: the page of items with a seq below it (older items); not with after_seq")
_AFTER_SEQ = _seq("after_seq", "cursor: the page of items with a seq above it (newer items); not with before_seq")

_BRANCH_RUN = _text(
    "run_id",
    "the branch that ends with this run instead of the thread's current one (an abandoned regenerate or edit); "
    "404 when the thread has no such run",
)
_BRANCH_CHECKPOINT = _text(
    "checkpoint_id",
    "the branch as of this checkpoint of the thread (what a branch switcher shows); not with run_id; "
    "404 when the thread has no such checkpoint",
)
_STRING_OR_NULL = {"type": ["string", "null"]}
_TIME = {"type": "string", "format": "date-time"}


def _ref(name: str) -> dict[str, object]:
    return {"$ref": f"#/components/schemas/{name}"}


def _closed(required: list[str], properties: Mapping[str, object], **more: object) -> dict[str, object]:
    """An object schema whose answers hold these properties and no others."""
    return {"type": "object", **more, "required": required, "properties": properties, "additionalProperties": False}


def _item(kind: str, **properties: object) -> tuple[list[str], dict[str, object]]:
    """An item other than a message: `type`, its record's place and time, and `properties`;
    the names every such item holds (all but `branch`) and the properties."""
    fields = {
        "type": {"type": "string", "enum": [kind]},
        "id": {"type": "string", "description": f"{kind.replace('_', '-')}-{{seq}}"},
        "seq": {"type": "integer"},
        "run_id": {"type": "string"},
        "created_at": _TIME,
        **properties,
        "branch": _ref("JournalBranchPoint"),
    }
    return [name for name in fields if name != "branch"], fields


def _page(item: Mapping[str, object], description: str) -> dict[str, object]:
    return _closed(
        ["data", "has_more", "next_before_seq", "next_after_seq"],
        {
            "data": {"type": "array", "items": item, "description": "ascending seq (conversation order)"},
            "has_more": {"type": "boolean", "description": "more items in the paging direction"},
            "next_before_seq": {**_NULLABLE_INT, "description": "before_seq of the older page; null at the oldest item"},
            "next_after_seq": {
                **_NULLABLE_INT,
                "description": "after_seq of the newer page: the page's newest seq (the cursor given when it is empty)",
            },
        },
        description=description,
    )


def _list_of(item: Mapping[str, object], description: str) -> dict[str, object]:
    return _closed(["data"], {"data": {"type": "array", "items": item}}, description=description)


_MARKER_REQUIRED, _MARKER_FIELDS = _item(
    "summary_marker",
    replaced_count={**_NULLABLE_INT, "description": "messages removed from the state, earlier summaries included"},
    condensed_count={**_NULLABLE_INT, "description": "conversation messages removed: the number to show"},
    preserved_count={**_NULLABLE_INT, "description": "messages the compaction kept"},
    summary=_STRING_OR_NULL,
    summary_message_id={**_STRING_OR_NULL, "description": "the id of the summary message put into the state"},
    replaced_message_ids={
        "type": "array", "items": {"type": "string"},
        "description": "every message id the compaction removed (empty when its record named none)",
    },
    condensed_message_ids={
        "type": "array", "items": {"type": "string"},
        "description": "the conversation messages among them: the message items the marker stands for",
    },
)
_STATUS_REQUIRED, _STATUS_FIELDS = _item(
    "run_status",
    status={"type": "string", "enum": ["failed", "cancelled", "interrupted"]},
    error_type={**_STRING_OR_NULL, "description": "the exception's type; CancelledError for a cancelled run"},
    message={**_STRING_OR_NULL, "description": "the error message, or the server's reason for a cancel"},
    interrupts={
        "type": "array",
        "description": "what a paused run waits on (empty unless interrupted)",
        "items": _ref("JournalInterrupt"),
    },
)
_RUN_EVENT_FIELDS = {
    "thread_id": {"type": "string"},
    "run_id": {"type": "string"},
    "seq": {"type": "integer"},
    "event_type": {"type": "string", "description": "llm.human.input, llm.ai.response, run.start, ..."},
    "category": {"type": "string", "description": "message, middleware, trace, error, outputs, ..."},
    "content": {"description": "what the event carries: a message dict, a run's input or output, an error text, ..."},
    "metadata": {"type": "object"},
    "created_at": _TIME,
    "source_key": {"type": "string", "description": "the writer's key for the record, when it gave one"},
    "user_id": {"type": "string", "description": "the owner of the thread, when known"},
}
# The counters of `/journal/health` that are whole numbers of runs, parts or frames.
_RUN_COUNTERS = (
    "active_runs", "runs_observed", "runs_read", "runs_read_elsewhere", "runs_read_from_client_joins",
    "runs_completed", "runs_failed", "runs_errored", "runs_cancelled", "runs_interrupted", "parts_seen",
    "malformed", "retained_frames", "frames_released", "unplanned_requests",
    "stream_replays", "streams_repaired",
)
_RUN_EVENT_REQUIRED = [name for name in _RUN_EVENT_FIELDS if name not in ("source_key", "user_id")]

# The shapes the journal's routes answer with, named in the OpenAPI document's
# `components/schemas` (prefixed: the server's own schemas hold a `Thread`).
# These are the only description of them: the projection, the README and the
# clients refer here, and tests/unit/test_item_shapes.py checks the routes'
# real answers against them.
SCHEMAS: dict[str, dict[str, Any]] = {
    "JournalBranchAlternative": _closed(
        ["run_id", "seq"],
        {
            "run_id": {**_STRING_OR_NULL, "description": "the run of the branch's first item"},
            "seq": {**_NULLABLE_INT, "description": "the seq of the branch's first item; null while it has none"},
        },
        description="one branch from a fork point: read it with ?run_id",
    ),
    "JournalBranchPoint": _closed(
        ["checkpoint_id", "index", "count", "alternatives"],
        {
            "checkpoint_id": {**_STRING_OR_NULL, "description": "the checkpoint the branches went on from"},
            "index": {"type": "integer", "minimum": 1, "description": "this branch's place among the alternatives"},
            "count": {"type": "integer", "minimum": 1, "description": "how many alternatives there are"},
            "alternatives": {
                "type": "array",
                "minItems": 1,
                "items": _ref("JournalBranchAlternative"),
                "description": "the original continuation first, then each fork from the checkpoint, in the order made",
            },
        },
        description="`branch` of the first item after a fork (a regenerate, an edit, a fork from a checkpoint)",
    ),
    "JournalToolCall": {
        "type": "object",
        "required": ["name", "args"],
        "properties": {
            "name": {"type": "string"},
            "args": {"type": "object"},
            "id": _STRING_OR_NULL,
            "type": {"type": "string", "enum": ["tool_call"]},
        },
    },
    "JournalMessageItem": {
        "type": "object",
        "description": "a LangChain message dict (its own fields kept as the writer journaled them) "
        "plus the seq, run and time of its record",
        "required": ["type", "id", "seq", "run_id", "created_at"],
        "properties": {
            "type": {"type": "string", "enum": ["human", "ai", "tool"]},
            "id": {**_STRING_OR_NULL, "description": "the message's id"},
            "seq": {"type": "integer"},
            "run_id": {"type": "string"},
            "created_at": _TIME,
            "content": {"type": ["string", "array"], "description": "text, or a list of content blocks"},
            "name": _STRING_OR_NULL,
            "additional_kwargs": {"type": "object"},
            "response_metadata": {"type": "object"},
            "tool_calls": {"type": "array", "items": _ref("JournalToolCall"), "description": "ai: the tools it called"},
            "invalid_tool_calls": {"type": "array", "items": {"type": "object"}},
            "usage_metadata": {"type": ["object", "null"], "description": "ai: the tokens the call used"},
            "tool_call_id": {"type": "string", "description": "tool: the call it answers"},
            "status": {"type": "string", "enum": ["success", "error"], "description": "tool: how the call went"},
            "artifact": {"description": "tool: what the tool returned beside its content"},
            "branch": _ref("JournalBranchPoint"),
        },
        "additionalProperties": True,
    },
    "JournalSummaryMarker": _closed(
        _MARKER_REQUIRED,
        _MARKER_FIELDS,
        description="where a compaction happened: after the messages it replaced, before the answer that followed",
    ),
    "JournalInterrupt": {
        "type": "object",
        "description": "an interrupt a paused run waits on",
        "required": ["id", "value"],
        "properties": {"id": _STRING_OR_NULL, "value": {"description": "what interrupt() was given"}},
    },
    "JournalRunStatus": _closed(
        _STATUS_REQUIRED,
        _STATUS_FIELDS,
        description="a run that did not simply return: failed, cancelled, or paused at an interrupt",
    ),
    "JournalHistoryItem": {
        "description": "an item of a thread's history; `type` tells the kinds apart (neither `summary_marker` "
        "nor `run_status` is a LangChain message type)",
        "oneOf": [_ref("JournalMessageItem"), _ref("JournalSummaryMarker"), _ref("JournalRunStatus")],
        "discriminator": {
            "propertyName": "type",
            "mapping": {
                "human": "#/components/schemas/JournalMessageItem",
                "ai": "#/components/schemas/JournalMessageItem",
                "tool": "#/components/schemas/JournalMessageItem",
                "summary_marker": "#/components/schemas/JournalSummaryMarker",
                "run_status": "#/components/schemas/JournalRunStatus",
            },
        },
    },
    "JournalHistoryPage": _page(_ref("JournalHistoryItem"), "a page of a branch's history"),
    "JournalMarkersPage": _page(_ref("JournalSummaryMarker"), "a page of a branch's summary markers"),
    "JournalThread": _closed(
        ["thread_id", "last_seq", "event_count", "updated_at", "title", "assistant_id", "message_count", "marker_count"],
        {
            "thread_id": {"type": "string"},
            "last_seq": {"type": "integer"},
            "event_count": {"type": "integer"},
            "updated_at": {**_TIME, "description": "the last activity"},
            "title": {**_STRING_OR_NULL, "description": "the first human message, shortened"},
            "assistant_id": {**_STRING_OR_NULL, "description": "the assistant of the first journaled run"},
            "message_count": {"type": "integer"},
            "marker_count": {"type": "integer"},
        },
    ),
    "JournalThreadList": _list_of(_ref("JournalThread"), "threads, most recently appended to first"),
    "JournalRunSummary": _closed(
        ["run_id", "status", "started_at", "ended_at", "duration_ms", "error", "error_type", "assistant_id"],
        {
            "run_id": {"type": "string"},
            "status": {
                "type": "string",
                "description": "success, error, cancelled, interrupted, running, or unknown (start and end never "
                "journaled); a run whose end names another status keeps it",
            },
            "started_at": {"type": ["string", "null"], "format": "date-time"},
            "ended_at": {"type": ["string", "null"], "format": "date-time"},
            "duration_ms": _NULLABLE_INT,
            "error": _STRING_OR_NULL,
            "error_type": _STRING_OR_NULL,
            "assistant_id": _STRING_OR_NULL,
        },
    ),
    "JournalRunSummaryList": _list_of(_ref("JournalRunSummary"), "one summary per run asked for, in that order"),
    "JournalRunEvent": _closed(_RUN_EVENT_REQUIRED, _RUN_EVENT_FIELDS, description="a journal record"),
    "JournalRunEventsPage": _closed(
        ["data", "has_more", "next_after_seq"],
        {
            "data": {"type": "array", "items": _ref("JournalRunEvent")},
            "has_more": {"type": "boolean"},
            "next_after_seq": {**_NULLABLE_INT, "description": "after_seq of the next page"},
        },
    ),
    "JournalRepairResult": _closed(
        ["thread_id", "status", "checkpoints", "messages", "markers", "written", "already_present",
         "owners_filled", "superseded", "notes"],
        {
            "thread_id": {"type": "string"},
            "status": {"type": "string", "enum": ["complete", "partial", "not_recoverable", "error"]},
            "checkpoints": {"type": "integer", "description": "checkpoints read"},
            "messages": {"type": "integer", "description": "messages found in them"},
            "markers": {"type": "integer", "description": "compactions found in them"},
            "written": {"type": "integer", "description": "records appended now"},
            "already_present": {"type": "integer", "description": "messages and markers already journaled"},
            "owners_filled": {"type": "integer", "description": "records journaled without an owner, given the thread's"},
            "superseded": {"type": "integer", "description": (
                "runs the runtime executed again whose earlier attempt's records, of messages no "
                "checkpoint holds, left the history")},
            "notes": {"type": "array", "items": {"type": "string"}},
        },
        description="what the backfill did",
    ),
    "JournalHealth": {
        "type": "object",
        "description": "`enabled` alone while the plugin journals nothing; else the verdict and the counters "
        "(docs/operations.md describes each)",
        "required": ["enabled"],
        "properties": {
            "enabled": {"type": "boolean"},
            "status": {"type": "string", "enum": ["ok", "degraded", "unavailable"]},
            "reason": {**_STRING_OR_NULL, "description": "why the status is not ok, in a sentence"},
            "backlog_growing": {"type": "boolean"},
            "store_url": {"type": "string", "description": "the store's URL, its password left out"},
            "store_open": {"type": "boolean"},
            "store_failing": {"type": "boolean"},
            "backlog": {"type": "integer", "description": "records accepted and not yet in the store"},
            "lag_seconds": {"type": "number"},
            "stalled_seconds": {"type": "number"},
            "backlog_growing_seconds": {"type": "number"},
            "growing_after": {"type": "number"},
            "spool": _STRING_OR_NULL,
            "spool_recovered": {"type": "integer"},
            "records_enqueued": {"type": "integer"},
            "records_written": {"type": "integer"},
            "retried": {"type": "integer"},
            "dropped": {"type": "integer"},
            "last_error": _STRING_OR_NULL,
            **{name: {"type": "integer"} for name in _RUN_COUNTERS},
            "reconciler": {"type": "object", "description": "the reconciler's counters, when it runs"},
            "frame_spool": {"type": "object", "description": "the frame spool's counters, when it is on"},
        },
        "additionalProperties": False,
    },
}


def with_components(spec: dict[str, Any]) -> dict[str, object]:
    """`spec` (an OpenAPI document) with `SCHEMAS` in its `components/schemas`; returned."""
    spec.setdefault("components", {}).setdefault("schemas", {}).update(SCHEMAS)
    return spec


def _operation(
    operation_id: str,
    parameters: Sequence[Mapping[str, object]],
    responses: Mapping[str, object],
) -> dict[str, object]:
    return {
        "tags": [TAG],
        "operationId": operation_id,
        "parameters": parameters,
        "responses": responses,
    }


def _api(
    operation_id: str,
    parameters: list[dict[str, object]],
    ok: dict[str, object],
    *,
    not_found: str | None = None,
    conflict: str | None = None,
) -> dict[str, object]:
    """An API route's operation: its 200, the errors every API route may answer
    (see `journal_bridge.web.routes`), and the 404 and 409 of the routes that have them."""
    responses = {"200": ok, "401": _UNAUTHENTICATED}
    if not_found is not None:
        responses["404"] = _error(not_found)
    if conflict is not None:
        responses["409"] = _error(conflict, retry=True)
    responses.update({"422": _BAD_PARAMETER, "500": _INTERNAL, "503": _UNAVAILABLE})
    return _operation(operation_id, parameters, responses)


_UNKNOWN_THREAD = "the thread is unknown to the journal, or the caller may not read it"

THREADS = _api(
    "journal_threads",
    [_limit(50), _text("q", "only threads whose messages contain this text (any ASCII case)")],
    _ok("journaled threads the caller may read, most recently appended to first", _ref("JournalThreadList")),
)
MESSAGES = _api(
    "journal_thread_messages",
    [_THREAD_ID, _limit(50), _BEFORE_SEQ, _AFTER_SEQ, _BRANCH_RUN, _BRANCH_CHECKPOINT],
    _ok(
        "message rows, summary markers and run statuses of the branch, ascending seq",
        _ref("JournalHistoryPage"),
    ),
    not_found=_UNKNOWN_THREAD,
)
MARKERS = _api(
    "journal_thread_markers",
    [_THREAD_ID, _limit(MAX_LIMIT), _BEFORE_SEQ, _AFTER_SEQ, _BRANCH_RUN, _BRANCH_CHECKPOINT],
    _ok("the summary markers of the branch, ascending seq", _ref("JournalMarkersPage")),
    not_found=_UNKNOWN_THREAD,
)
REPAIR = _api(
    "journal_thread_repair",
    [
        {**_THREAD_ID, "description": "the thread's id: a UUID, as every thread of the server has"},
        _text("since_checkpoint", "ignore checkpoints older than this one, as if they had been pruned"),
    ],
    _ok("what the backfill did", _ref("JournalRepairResult")),
    not_found="the server has no such thread, or the caller may not read it",
    conflict="a run is in progress on the thread, or its journal is still catching up",
)
RUNS = _api(
    "journal_thread_runs",
    [
        _THREAD_ID,
        _names(
            "run_ids",
            f"the runs to describe; comma-separated, or the parameter repeated; at most {MAX_RUN_IDS}",
        ),
    ],
    _ok("a summary of each run asked for, in the order asked", _ref("JournalRunSummaryList")),
    not_found=_UNKNOWN_THREAD,
)
RUN_EVENTS = _api(
    "journal_run_events",
    [
        _THREAD_ID,
        _RUN_ID,
        _names("event_types", "only these event types; comma-separated, or the parameter repeated"),
        _AFTER_SEQ,
        _limit(MAX_LIMIT),
    ],
    _ok("the run's records, ascending seq", _ref("JournalRunEventsPage")),
    not_found=_UNKNOWN_THREAD,
)


def viewer_operation(operation_id: str, thread: bool) -> dict[str, object]:
    return _operation(
        operation_id,
        [_THREAD_ID] if thread else [],
        {"200": {"description": "the viewer page", "content": {"text/html": {"schema": {"type": "string"}}}}},
    )


HEALTH = _operation(
    "journal_health",
    [],
    {
        "200": _ok("the bridge's state: backlog, lag, retried and dropped counts", _ref("JournalHealth")),
        "503": _ok("journaling is not keeping up: the store is unavailable or the backlog grows", _ref("JournalHealth")),
    },
)


def describe(endpoint: Callable[..., object], operation: Mapping[str, object], prose: str | None = None) -> None:
    """Give `endpoint` the docstring the server reads its OpenAPI operation from.

    `prose` (default: the endpoint's own docstring) becomes the operation's
    summary (its first line) and description (the rest).
    """
    text = inspect.cleandoc(prose if prose is not None else endpoint.__doc__ or "")
    summary, _, description = text.partition("\n")
    operation = dict(operation)
    if summary:
        operation["summary"] = summary.strip()
    if description.strip():
        operation["description"] = description.strip()
    endpoint.__doc__ = f"{text}\n\n---\n{json.dumps(operation, indent=2)}"


def document(routes: list[BaseRoute]) -> dict[str, Any]:
    """The OpenAPI document of `routes`, read from their docstrings as the server
    reads them, with `SCHEMAS` in its components."""
    spec = SchemaGenerator({"openapi": "3.1.0", "info": {"title": "journal-bridge", "version": "1"}}).get_schema(
        routes=routes
    )
    return with_components(spec)
