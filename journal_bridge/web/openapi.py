"""The OpenAPI description of the journal's routes.

LangGraph Server builds the OpenAPI document of a custom `http.app` from its
route endpoints' docstrings: the text after the last `---` line is read as
YAML and becomes the route's operation object. `describe` writes that
docstring for an endpoint: its prose, then the operation as JSON (which is
YAML too), so `/openapi.json` lists every journal route with its parameters,
responses and error shapes, and a docstring's prose is never parsed as YAML.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

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
    "THREADS",
    "describe",
    "viewer_operation",
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
}
_RETRY_AFTER = {
    "Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}
}
_NULLABLE_INT = {"type": ["integer", "null"]}


def _error(description: str, *, retry: bool = False) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": _ERROR}},
    }
    if retry:
        response["headers"] = _RETRY_AFTER
    return response


def _ok(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_UNAUTHENTICATED = _error("authentication required (only when the server has `auth` configured)")
_BAD_PARAMETER = _error("a bad parameter; the detail starts with its name (`limit: must be at most 500, ...`)")
_UNAVAILABLE = _error("the journal store (or the access check) is unavailable; retry later", retry=True)
_INTERNAL = _error("the journal failed; the reason is in the server log")

def _parameter(
    name: str, description: str, schema: dict[str, Any], *, in_path: bool = False, **more: Any
) -> dict[str, Any]:
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


def _limit(default: int) -> dict[str, Any]:
    return _parameter(
        "limit", "items per page", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": default}
    )


def _seq(name: str, description: str) -> dict[str, Any]:
    return _parameter(name, description, {"type": "integer", "minimum": 0, "maximum": MAX_SEQ})


def _text(name: str, description: str) -> dict[str, Any]:
    return _parameter(name, description, {"type": "string"})


def _names(name: str, description: str) -> dict[str, Any]:
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
_FORK_POINT = {
    "type": "object",
    "description": "on the first item after a fork (a regenerate, an edit, a fork from a checkpoint): the alternatives there",
    "required": ["checkpoint_id", "index", "count", "alternatives"],
    "properties": {
        "checkpoint_id": {"type": ["string", "null"], "description": "the checkpoint the branches went on from"},
        "index": {"type": "integer", "minimum": 1, "description": "this branch's place among the alternatives"},
        "count": {"type": "integer", "minimum": 1},
        "alternatives": {
            "type": "array",
            "description": "the original continuation first, then each fork from the checkpoint, each by the run "
            "and seq of its first item (null while it has none); read one with run_id",
            "items": {
                "type": "object",
                "required": ["run_id", "seq"],
                "properties": {"run_id": {"type": ["string", "null"]}, "seq": {"type": ["integer", "null"]}},
            },
        },
    },
}

_MESSAGE_ROW = {
    "type": "object",
    "description": "a LangChain message dict plus the seq, run and time of its record",
    "required": ["type", "seq"],
    "properties": {
        "type": {"type": "string", "description": "human, ai, tool, system, ..."},
        "seq": {"type": "integer"},
        "run_id": {"type": ["string", "null"]},
        "created_at": {"type": "string", "format": "date-time"},
        "branch": _FORK_POINT,
        "id": {"type": ["string", "null"]},
        "content": {},
        "tool_calls": {"type": "array", "items": {"type": "object"}},
    },
    "additionalProperties": True,
}
_SUMMARY_MARKER = {
    "type": "object",
    "description": "where a compaction happened: after the messages it replaced, before the answer that followed",
    "required": ["type", "id", "seq"],
    "properties": {
        "type": {"type": "string", "enum": ["summary_marker"]},
        "id": {"type": "string", "description": "summary-marker-{seq}"},
        "seq": {"type": "integer"},
        "run_id": {"type": ["string", "null"]},
        "created_at": {"type": "string", "format": "date-time"},
        "branch": _FORK_POINT,
        "replaced_count": {"type": "integer", "description": "messages removed from the state, earlier summaries included"},
        "condensed_count": {"type": "integer", "description": "conversation messages removed: the number to show"},
        "preserved_count": {"type": "integer"},
        "summary": {"type": ["string", "null"]},
        "summary_message_id": {"type": ["string", "null"]},
        "replaced_message_ids": {"type": "array", "items": {"type": "string"}, "description": "every message id the compaction removed"},
        "condensed_message_ids": {"type": "array", "items": {"type": "string"}, "description": "the conversation messages among them: the rows the marker stands for"},
    },
}
_RUN_STATUS = {
    "type": "object",
    "description": "a run that did not simply return: failed, cancelled, or paused at an interrupt",
    "required": ["type", "id", "seq", "status"],
    "properties": {
        "type": {"type": "string", "enum": ["run_status"]},
        "id": {"type": "string", "description": "run-status-{seq}"},
        "seq": {"type": "integer"},
        "run_id": {"type": ["string", "null"]},
        "created_at": {"type": "string", "format": "date-time"},
        "branch": _FORK_POINT,
        "status": {"type": "string", "enum": ["failed", "cancelled", "interrupted"]},
        "error_type": {"type": ["string", "null"], "description": "CancelledError for a cancelled run"},
        "message": {"type": ["string", "null"], "description": "the error message, or the server's reason for a cancel"},
        "interrupts": {"type": "array", "items": {"type": "object"}, "description": "[{id, value}]: what a paused run waits on"},
    },
}


def _page(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["data", "has_more", "next_before_seq", "next_after_seq"],
        "properties": {
            "data": {"type": "array", "items": item, "description": "ascending seq"},
            "has_more": {"type": "boolean", "description": "more items in the paging direction"},
            "next_before_seq": {**_NULLABLE_INT, "description": "before_seq of the older page; null at the oldest item"},
            "next_after_seq": {**_NULLABLE_INT, "description": "after_seq of the newer page"},
        },
    }


_RUN_EVENT = {
    "type": "object",
    "description": "a journal record",
    "required": ["thread_id", "run_id", "seq", "event_type", "category", "content", "metadata", "created_at"],
    "properties": {
        "thread_id": {"type": "string"},
        "run_id": {"type": "string"},
        "seq": {"type": "integer"},
        "event_type": {"type": "string"},
        "category": {"type": "string"},
        "content": {},
        "metadata": {"type": "object"},
        "created_at": {"type": "string", "format": "date-time"},
    },
    "additionalProperties": True,
}
_THREAD = {
    "type": "object",
    "required": ["thread_id", "last_seq", "event_count", "updated_at"],
    "properties": {
        "thread_id": {"type": "string"},
        "last_seq": {"type": "integer"},
        "event_count": {"type": "integer"},
        "updated_at": {"type": "string", "format": "date-time", "description": "the last activity"},
        "title": {"type": ["string", "null"], "description": "the first human message, shortened"},
        "assistant_id": {"type": ["string", "null"], "description": "the assistant of the first journaled run"},
        "message_count": {"type": "integer"},
        "marker_count": {"type": "integer"},
    },
}
_RUN_SUMMARY = {
    "type": "object",
    "required": ["run_id", "status"],
    "properties": {
        "run_id": {"type": "string"},
        "status": {"type": "string", "description": "success, error, running, or unknown (start and end never journaled)"},
        "started_at": {"type": ["string", "null"], "format": "date-time"},
        "ended_at": {"type": ["string", "null"], "format": "date-time"},
        "duration_ms": _NULLABLE_INT,
        "error": {"type": ["string", "null"]},
        "error_type": {"type": ["string", "null"]},
        "assistant_id": {"type": ["string", "null"]},
    },
}
_BACKFILL = {
    "type": "object",
    "required": ["thread_id", "status", "written", "already_present"],
    "properties": {
        "thread_id": {"type": "string"},
        "status": {"type": "string", "enum": ["complete", "partial", "not_recoverable", "error"]},
        "checkpoints": {"type": "integer"},
        "messages": {"type": "integer"},
        "markers": {"type": "integer"},
        "written": {"type": "integer", "description": "records appended now"},
        "already_present": {"type": "integer", "description": "messages and markers already journaled"},
        "owners_filled": {"type": "integer", "description": "records journaled without an owner, given the thread's"},
        "notes": {"type": "array", "items": {"type": "string"}},
    },
}


def _operation(
    operation_id: str,
    parameters: list[dict[str, Any]],
    responses: dict[str, Any],
) -> dict[str, Any]:
    return {
        "tags": [TAG],
        "operationId": operation_id,
        "parameters": parameters,
        "responses": responses,
    }


def _api(
    operation_id: str,
    parameters: list[dict[str, Any]],
    ok: dict[str, Any],
    *,
    not_found: str | None = None,
    conflict: str | None = None,
) -> dict[str, Any]:
    """An API route's operation: its 200, the errors every API route may answer
    (see `journal_bridge.web.routes`), and the 404 and 409 of the routes that have them."""
    responses = {"200": ok, "401": _UNAUTHENTICATED}
    if not_found is not None:
        responses["404"] = _error(not_found)
    if conflict is not None:
        responses["409"] = _error(conflict, retry=True)
    responses.update({"422": _BAD_PARAMETER, "500": _INTERNAL, "503": _UNAVAILABLE})
    return _operation(operation_id, parameters, responses)


def _list_of(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": ["data"], "properties": {"data": {"type": "array", "items": item}}}


_UNKNOWN_THREAD = "the thread is unknown to the journal, or the caller may not read it"

THREADS = _api(
    "journal_threads",
    [_limit(50), _text("q", "only threads whose messages contain this text (any ASCII case)")],
    _ok("journaled threads the caller may read, most recently appended to first", _list_of(_THREAD)),
)
MESSAGES = _api(
    "journal_thread_messages",
    [_THREAD_ID, _limit(50), _BEFORE_SEQ, _AFTER_SEQ, _BRANCH_RUN, _BRANCH_CHECKPOINT],
    _ok(
        "message rows, summary markers and run statuses of the branch, ascending seq",
        _page({"anyOf": [_MESSAGE_ROW, _SUMMARY_MARKER, _RUN_STATUS]}),
    ),
    not_found=_UNKNOWN_THREAD,
)
MARKERS = _api(
    "journal_thread_markers",
    [_THREAD_ID, _limit(MAX_LIMIT), _BEFORE_SEQ, _AFTER_SEQ, _BRANCH_RUN, _BRANCH_CHECKPOINT],
    _ok("the summary markers of the branch, ascending seq", _page(_SUMMARY_MARKER)),
    not_found=_UNKNOWN_THREAD,
)
REPAIR = _api(
    "journal_thread_repair",
    [
        {**_THREAD_ID, "description": "the thread's id: a UUID, as every thread of the server has"},
        _text("since_checkpoint", "ignore checkpoints older than this one, as if they had been pruned"),
    ],
    _ok("what the backfill did", _BACKFILL),
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
    _ok("a summary of each run asked for, in the order asked", _list_of(_RUN_SUMMARY)),
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
    _ok(
        "the run's records, ascending seq",
        {
            "type": "object",
            "required": ["data", "has_more", "next_after_seq"],
            "properties": {
                "data": {"type": "array", "items": _RUN_EVENT},
                "has_more": {"type": "boolean"},
                "next_after_seq": _NULLABLE_INT,
            },
        },
    ),
    not_found=_UNKNOWN_THREAD,
)


def viewer_operation(operation_id: str, thread: bool) -> dict[str, Any]:
    return _operation(
        operation_id,
        [_THREAD_ID] if thread else [],
        {"200": {"description": "the viewer page", "content": {"text/html": {"schema": {"type": "string"}}}}},
    )


HEALTH = _operation(
    "journal_health",
    [],
    {
        "200": _ok(
            "the bridge's state: backlog, lag, retried and dropped counts",
            {"type": "object", "required": ["enabled"], "properties": {"enabled": {"type": "boolean"}}, "additionalProperties": True},
        )
    },
)


def describe(endpoint: Callable[..., Any], operation: dict[str, Any], prose: str | None = None) -> None:
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
