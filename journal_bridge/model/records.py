"""One definition per event type: what each record of a run says (the record itself is `envelope.RunEvent`).

Every producer -- the `events` mapper, the state mapper, backfill -- builds its
records with these functions, so the content, metadata and idempotency key of a
record do not depend on how the run was captured. A `Draft` is a record before
the run it belongs to is attached (`RunDraft.record`).

Content and metadata follow deer-flow's run event stream contract:

| event_type             | content                                        | metadata |
|------------------------|------------------------------------------------|----------|
| `run.start`            | `chain`, `graph`, `assistant_id`, `input_keys`, `input_messages` | `caller` |
| `llm.human.input`      | the message dict                               | `caller` |
| `llm.ai.response`      | the message dict                               | `caller`, `usage`, `latency_ms`, `llm_call_index` |
| `llm.tool.result`      | the message dict                               | `tool` |
| `llm.ai.response`, `llm.tool.result` outside the conversation | the message dict | `caller` `middleware:summarize` (the summarizer) or `subagent:{node}` (inside a tool or a subgraph), `usage`, `latency_ms`, `llm_call_index` |
| `middleware:summarize` | `name`, `hook`, `action`, `changes` (the summarization payload), `role`, `content` (the summary) | `replaced_count`, `preserved_count`, `condensed_count` |
| `run.interrupt`        | `interrupts`: `[{"id", "value"}]`, what the run waits on | -- |
| `run.end`              | `output_keys`, `message_count`, `last_message_id` | `status` |
| `run.error`            | the error message (text)                       | `error_type` |

Every `llm.*` record is category `message`, as the contract fixes; the ones
outside the conversation are told apart by their `caller`
(`HIDDEN_CALLER_PREFIXES`), which history projections hide, as deer-flow's
does. `llm_call_index` numbers one caller's calls within the run, from 1, so
the conversation's numbering is the same whether or not a path sees the
other calls.

How a run ends, in its last records:

- it returned: `run.end` (`status` is always `success`, as in deer-flow: the
  root graph returned, which says nothing more);
- it paused at `interrupt()`: `run.interrupt`, then `run.end` -- the graph
  returned, waiting; the run that resumes it (`Command(resume=...)`) journals
  its own records, continuing the same conversation;
- it failed: `run.error` with the error's type and message, no `run.end`;
- it was cancelled (`runs.cancel`, a client leaving with
  `on_disconnect="cancel"`): `run.error` with `error_type` `CancelledError`
  (what deer-flow's journal writes when the graph task is cancelled), the
  server's reason as content and `metadata.action` (`interrupt` or
  `rollback`: the server also removed the run and its checkpoints), no
  `run.end`;
- its worker died and the runtime executed it again (same run id, the next
  `attempt` in its `metadata` frame and in its checkpoints' `run_attempt`):
  the attempt that goes on has a `superseded_attempt` fork; what the earlier
  attempts journaled of messages the thread's checkpoints do not hold leaves
  the history (`projection/branches.py`).

Keys: a message with an id is keyed by it (`message:{id}`, unique in a thread,
so a message sent again in a later run's input is journaled once); everything
else by the run (`{run_id}:{what}`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages

from journal_bridge.model.envelope import (
    LLM_AI_RESPONSE,
    LLM_HUMAN_INPUT,
    LLM_TOOL_RESULT,
    MIDDLEWARE_SUMMARIZE,
    RUN_END,
    RUN_ERROR,
    RUN_INTERRUPT,
    RUN_START,
    SUMMARIZATION_EVENT,
    HIDDEN_CALLER_PREFIXES,
    TRACE,
    RunEvent,
    make_event,
)
from journal_bridge.model.errors import MalformedPart

__all__ = [
    "BRANCHES_RUN_ID",
    "CANCELLED_ERROR_TYPE",
    "FORK_EVENT",
    "CONVERSATION_CALLER",
    "CUSTOM_EVENTS",
    "Draft",
    "ai_response",
    "conversation_message",
    "custom_event",
    "fork",
    "state_fork",
    "input_messages",
    "is_summary_message",
    "marker_fields",
    "message_dict",
    "is_hidden",
    "model_call",
    "nested_tool_result",
    "record",
    "run_cancelled",
    "run_end",
    "run_error",
    "run_interrupt",
    "rollback",
    "run_start",
    "superseded_attempt",
    "state_messages",
    "summarization_changes",
    "subagent_caller",
    "summarize",
    "tool_result",
]

# The caller deer-flow's history view expects for the conversation's own
# messages (its contract fixes it for human input).
CONVERSATION_CALLER = "lead_agent"

# The `error_type` of a cancelled run, as deer-flow's journal records it.
CANCELLED_ERROR_TYPE = "CancelledError"
# A thread's forks: one record each, all under one run, read in one query.
BRANCHES_RUN_ID = "journal-bridge:branches"
FORK_EVENT = "journal.fork"
# How many of a fork checkpoint's newest message ids its record keeps.
FORK_MESSAGE_IDS = 32

_MESSAGE_TYPES = {"human", "ai", "tool", "system", "function", "chat"}
_CONVERSATION_EVENT_TYPES = {"human": LLM_HUMAN_INPUT, "ai": LLM_AI_RESPONSE, "tool": LLM_TOOL_RESULT}
# Upstream summarization marks the summary message it puts in the state so.
_SUMMARY_SOURCE = "summarization"
_SUMMARY_NAME = "summary"
_SUMMARY_TYPES = frozenset({"human", "system"})


@dataclass
class Draft:
    """A record of a run before its ids are attached.

    `key` identifies the record within its run; a message record whose message
    has an id is keyed by that id instead (see `record`).
    """

    event_type: str
    content: Any
    key: str
    metadata: dict[str, Any] = field(default_factory=dict)
    category: str | None = None
    is_message: bool = False

    @property
    def message_id(self) -> str | None:
        if self.is_message and isinstance(self.content, Mapping):
            value = self.content.get("id")
            return str(value) if value else None
        return None


def record(thread_id: str, run_id: str, draft: Draft) -> RunEvent:
    """The journal record of `draft` in run `run_id` of `thread_id`."""
    message_id = draft.message_id
    source_key = f"message:{message_id}" if message_id else f"{run_id}:{draft.key}"
    return make_event(
        thread_id=thread_id,
        run_id=run_id,
        event_type=draft.event_type,
        category=draft.category,
        content=draft.content,
        metadata=draft.metadata,
        source_key=source_key,
    )


# -- messages -------------------------------------------------------------------


def message_dict(message: Any) -> dict[str, object] | None:
    """A LangChain message (object, dict, tuple or text) as a plain message dict."""
    if (type(message) is dict or isinstance(message, Mapping)) and message.get("type") in _MESSAGE_TYPES:
        return dict(message)
    try:
        converted = message if isinstance(message, BaseMessage) else convert_to_messages([message])[0]
    except Exception:  # noqa: BLE001 - anything unconvertible is not a message
        return None
    return converted.model_dump(mode="json")


def message_dicts(messages: Iterable[object]) -> list[dict[str, object]]:
    """`message_dict` of each of `messages`; what is not a message left out."""
    return [m for m in map(message_dict, messages) if m]


def all_message_dicts(messages: list[Any]) -> bool:
    """Whether every entry of `messages` is a plain dict of a message type: what
    `message_dict` copies as it is (parsed JSON), checked without a Python loop."""
    return set(map(type, messages)) <= {dict} and set(map(dict.get, messages, repeat("type"))) <= _MESSAGE_TYPES


def is_summary_message(message: Mapping[str, Any]) -> bool:
    """The summary a compaction put in the state: state, not conversation.

    Upstream marks it with `lc_source`; others name it (deer-flow's
    `HumanMessage(name="summary")`)."""
    if (message.get("additional_kwargs") or {}).get("lc_source") == _SUMMARY_SOURCE:
        return True
    return message.get("name") == _SUMMARY_NAME and message.get("type") in _SUMMARY_TYPES


def input_messages(run_input: object) -> list[dict[str, object]]:
    """The conversation messages of a run's input, as message dicts."""
    messages = run_input.get("messages") if isinstance(run_input, Mapping) else None
    if isinstance(messages, (str, dict)):
        messages = [messages]
    if not isinstance(messages, (list, tuple)):
        return []
    return [m for m in message_dicts(messages) if m.get("type") in _CONVERSATION_EVENT_TYPES]


# -- records ----------------------------------------------------------------------


def run_start(graph: str | None, assistant_id: str | None, run_input: object, inputs: list[dict[str, object]]) -> Draft:
    """`run.start`; `inputs` are `input_messages(run_input)`, converted once by the
    caller, which needs them too (converting a message is most of this record's cost)."""
    content = {
        "chain": graph,
        "graph": graph,
        "assistant_id": assistant_id,
        "input_keys": sorted(run_input) if isinstance(run_input, Mapping) else None,
        "input_messages": len(inputs),
    }
    return Draft(RUN_START, content, "run.start", {"caller": CONVERSATION_CALLER})


def ai_response(message: dict[str, object], call_index: int, key: str) -> Draft:
    metadata = {
        "caller": CONVERSATION_CALLER,
        "usage": message.get("usage_metadata") or {},
        "latency_ms": None,
        "llm_call_index": call_index,
    }
    return Draft(LLM_AI_RESPONSE, message, key, metadata, is_message=True)


def tool_result(message: dict[str, object], key: str) -> Draft:
    return Draft(LLM_TOOL_RESULT, message, key, {"tool": message.get("name")}, is_message=True)


def conversation_message(message: dict[str, object], key: str, call_index: int) -> Draft | None:
    """The record of a conversation message of any type; None for other types.

    `call_index` numbers AI messages within the run, from 1.
    """
    kind = message.get("type")
    if kind == "ai":
        return ai_response(message, call_index, key)
    if kind == "tool":
        return tool_result(message, key)
    if kind == "human":
        return Draft(LLM_HUMAN_INPUT, message, key, {"caller": CONVERSATION_CALLER}, is_message=True)
    return None


def model_call(message: dict[str, object], key: str, caller: str, call_index: int) -> Draft:
    """A model call that is not the conversation: the summarizer's
    (`SUMMARIZER_CALLER`), or one inside a tool or a subgraph (`subagent_caller`);
    `call_index` numbers that caller's calls in the run, from 1."""
    metadata = {
        "caller": caller,
        "usage": message.get("usage_metadata") or {},
        "latency_ms": None,
        "llm_call_index": call_index,
    }
    return Draft(LLM_AI_RESPONSE, message, key, metadata)


def nested_tool_result(message: dict[str, object], key: str, caller: str) -> Draft:
    """What a tool called inside a tool or a subgraph returned: not the conversation."""
    return Draft(LLM_TOOL_RESULT, message, key, {"tool": message.get("name"), "caller": caller})


def subagent_caller(node: object) -> str:
    """The `caller` of what happens inside a tool call or a subgraph run from `node`."""
    return f"subagent:{node or 'unknown'}"


def is_hidden(metadata: object) -> bool:
    """A message record outside the conversation, by its `caller`."""
    caller = metadata.get("caller") if isinstance(metadata, Mapping) else None
    return isinstance(caller, str) and caller.startswith(HIDDEN_CALLER_PREFIXES)


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def summarization_changes(payload: Mapping[str, Any]) -> dict[str, object]:
    """The summarization payload, completed where a minimal emitter left fields out.

    `TrackingSummarizationMiddleware` sends every field; a middleware that sends
    only `summary` and `replaced_count` (deer-flow's) still yields a full marker.
    """
    changes = dict(payload)
    changes.setdefault("event", "summarization")
    replaced_ids = changes.get("replaced_message_ids")
    if not isinstance(changes.get("replaced_count"), int) and isinstance(replaced_ids, list):
        changes["replaced_count"] = len(replaced_ids)
    if not isinstance(changes.get("condensed_count"), int) and isinstance(changes.get("replaced_count"), int):
        previous = changes.get("previous_summary_ids")
        changes["condensed_count"] = changes["replaced_count"] - (len(previous) if isinstance(previous, list) else 0)
    return changes


# The role deer-flow's summarize-marker design gives the summary it keeps in a marker's content.
SUMMARY_ROLE = "system"
# The counts a marker's metadata repeats from its changes, for readers of that design.
MARKER_COUNTS = ("replaced_count", "preserved_count", "condensed_count")


def marker_fields(changes: Mapping[str, object]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What a marker adds beside `name`, `hook`, `action` and `changes` for
    readers of deer-flow's summarize-marker design, derived from `changes`: in
    the content `role` and `content` (the summary, "" when none is known), in
    the metadata the counts `changes` knows (`MARKER_COUNTS`)."""
    summary = changes.get("summary")
    content = {"role": SUMMARY_ROLE, "content": summary if isinstance(summary, str) else ""}
    counts = {k: changes[k] for k in MARKER_COUNTS if type(changes.get(k)) is int}
    return content, counts


def summarize(payload: Mapping[str, object]) -> Draft:
    """The marker record of one compaction, keyed by the summary it produced.

    Its content is deer-flow's middleware record (`name`, `hook`, `action`,
    `changes`) with `marker_fields` beside it, so both deer-flow's contract and
    the readers of its summarize-marker design read it."""
    changes = summarization_changes(payload)
    spec_content, counts = marker_fields(changes)
    content = {
        "name": changes.get("middleware") or "SummarizationMiddleware",
        "hook": changes.get("hook") or "before_model",
        "action": "summarize",
        "changes": changes,
        **spec_content,
    }
    identity = changes.get("summary_message_id") or _digest(changes)
    return Draft(MIDDLEWARE_SUMMARIZE, content, f"summarize:{identity}", counts)



# What a custom event makes: by its name (an `on_custom_event`'s name, or the
# `event` field of a `custom` stream part), the record both capture paths
# journal for its payload. A new custom event is one entry here.
CUSTOM_EVENTS: dict[str, Callable[[Mapping[str, Any]], Draft]] = {
    SUMMARIZATION_EVENT: summarize,
}


def custom_event(name: object, payload: object) -> Draft | None:
    """The record of custom event `name`, or None for an event the journal ignores."""
    make = CUSTOM_EVENTS.get(name) if isinstance(name, str) else None
    if make is None:
        return None
    if not isinstance(payload, Mapping):
        raise MalformedPart(f"{name} payload is not an object")
    return make(payload)

def run_end(output: object) -> Draft:
    messages = output.get("messages") if isinstance(output, Mapping) else None
    content: dict[str, Any] = {"output_keys": sorted(output) if isinstance(output, Mapping) else None}
    if isinstance(messages, list):
        last = message_dict(messages[-1]) if messages else None
        content["message_count"] = len(messages)
        content["last_message_id"] = last.get("id") if last else None
    return Draft(RUN_END, content, "run.end", {"status": "success"})


def run_error(error: object) -> Draft:
    """A failed run. An error part and the root's error callback describe one
    failure, so both map to the same key."""
    if isinstance(error, Mapping):
        error_type, message = error.get("error"), error.get("message")
    elif isinstance(error, str):
        error_type, message = "Error", error
    else:
        error_type, message = type(error).__name__, str(error)
    text = message if isinstance(message, str) else json.dumps(message, default=str)
    return Draft(RUN_ERROR, text, "run.error", {"error_type": str(error_type or "Error")})


def run_cancelled(reason: str | None, action: str | None = None) -> Draft:
    """A cancelled run: `reason` is the server's, `action` how it cancelled
    (`interrupt`, or `rollback` when it also removed the run's checkpoints).
    Keyed like `run_error`: a run ends in one `run.error` at most."""
    metadata: dict[str, Any] = {"error_type": CANCELLED_ERROR_TYPE}
    if action:
        metadata["action"] = action
    return Draft(RUN_ERROR, reason or "the run was cancelled", "run.error", metadata)


def interrupt_values(raw: object) -> list[dict[str, object]]:
    """`__interrupt__` of a state, or a checkpoint's `interrupts`, as `[{"id", "value"}]`."""
    if isinstance(raw, Mapping):
        raw = [raw]
    if not isinstance(raw, (list, tuple)):
        return []
    out = []
    for item in raw:
        if isinstance(item, Mapping) and "value" in item:
            out.append({"id": item.get("id"), "value": item.get("value")})
    return out


def run_interrupt(interrupts: list[dict[str, object]]) -> Draft:
    """A run paused at `interrupt()`, with what it waits on (`interrupt_values`)."""
    return Draft(RUN_INTERRUPT, {"interrupts": interrupts}, "run.interrupt")


# -- branches -------------------------------------------------------------------


def state_messages(state: Mapping[str, object] | None) -> list[dict[str, object]]:
    values = (state or {}).get("values")
    messages = values.get("messages") if isinstance(values, Mapping) else None
    return [dict(m) for m in messages if isinstance(m, Mapping)] if isinstance(messages, list) else []


def fork(
    thread_id: str,
    run_id: str | None,
    checkpoint: Mapping[str, object],
    state: Mapping[str, object] | None,
    *,
    head_checkpoint_id: str | None = None,
    edited_message_ids: list[str] | None = None,
) -> RunEvent:
    """The record of a fork: run `run_id` (or a state update, run None) went on
    from `checkpoint` instead of the thread's head.

    `state` is the checkpoint's state as the server returns it (None when it
    could not be read): its run and newest message ids say where in the journal
    the branch leaves off. A state update names the checkpoint it wrote
    (`head_checkpoint_id`) and the messages it changed in place
    (`edited_message_ids`: the branch shows their new version only).
    """
    # A checkpoint the server does not have comes back as an empty state without a time.
    state = state if state and state.get("created_at") is not None else {}
    ids = [str(m["id"]) for m in state_messages(state) if m.get("id")]
    metadata = state.get("metadata")
    if not isinstance(metadata, Mapping):
        metadata = {}
    content = {
        "run_id": run_id,
        "checkpoint_id": checkpoint.get("checkpoint_id"),
        "checkpoint_run_id": metadata.get("run_id"),
        "known": bool(state),
        # The graph had ended at the checkpoint: the run's outcome is on the branch too.
        "finished": bool(state) and not state.get("next"),
        "message_ids": ids[-FORK_MESSAGE_IDS:],
        "message_count": len(ids),
    }
    if head_checkpoint_id:
        content["head_checkpoint_id"] = head_checkpoint_id
    if edited_message_ids:
        content["edited_message_ids"] = list(edited_message_ids)
    # One fork per run and checkpoint: a run executed anew after a crash forks again.
    key = (f"fork:{run_id}:{checkpoint.get('checkpoint_id')}" if run_id
           else f"fork:state:{head_checkpoint_id or checkpoint.get('checkpoint_id')}")
    return make_event(
        thread_id=thread_id,
        run_id=BRANCHES_RUN_ID,
        event_type=FORK_EVENT,
        category=TRACE,
        content=content,
        metadata={},
        source_key=key,
    )


def rollback(thread_id: str, run_id: str) -> RunEvent:
    """The fork of a run the server rolled back (removed with its checkpoints):
    the thread goes on from where the run started, its records off the branch."""
    return make_event(
        thread_id=thread_id,
        run_id=BRANCHES_RUN_ID,
        event_type=FORK_EVENT,
        category=TRACE,
        content={"run_id": None, "rolled_back_run_id": run_id, "known": True},
        metadata={},
        source_key=f"fork:rollback:{run_id}",
    )


def superseded_attempt(thread_id: str, run_id: str, attempt: int, kept_message_ids: Iterable[str]) -> RunEvent:
    """The fork of a run the runtime executed again (its worker died, a restart):
    attempt `attempt` superseded the earlier ones. The run's message records
    below the fork stay in the journal but leave the history, except those of
    `kept_message_ids`: the run's messages the thread's checkpoints hold. Attempt
    0 with nothing kept: the server lost the run (a restart from a state saved
    before it). One per run and attempt."""
    return make_event(
        thread_id=thread_id,
        run_id=BRANCHES_RUN_ID,
        event_type=FORK_EVENT,
        category=TRACE,
        content={
            "run_id": run_id,
            "attempt": int(attempt),
            "superseded_run_id": run_id,
            "kept_message_ids": sorted({str(i) for i in kept_message_ids}),
            "known": True,
        },
        metadata={},
        source_key=f"fork:attempt:{run_id}:{int(attempt)}",
    )


def state_fork(
    thread_id: str,
    checkpoint: Mapping[str, object],
    base: Mapping[str, object] | None,
    updated: Mapping[str, object] | None,
    head_checkpoint_id: str | None,
) -> list[RunEvent]:
    """The records of a state update that went on from `checkpoint` (state `base`)
    and wrote `head_checkpoint_id` (state `updated`): its fork, then each message
    it added or changed, in the state's order, under run `state:{head}`."""
    before = {str(m.get("id")): m for m in state_messages(base) if m.get("id")}
    changed = [m for m in state_messages(updated) if m.get("id") and before.get(str(m["id"])) != m]
    edited = [str(m["id"]) for m in changed if str(m["id"]) in before]
    out = [fork(thread_id, None, checkpoint, base, head_checkpoint_id=head_checkpoint_id, edited_message_ids=edited)]
    run_id = f"state:{head_checkpoint_id or checkpoint.get('checkpoint_id')}"
    for message in changed:
        draft = conversation_message(message, f"message:{message['id']}", 0)
        if draft is not None:
            out.append(make_event(
                thread_id=thread_id, run_id=run_id, event_type=draft.event_type, category=draft.category,
                content=draft.content, metadata=draft.metadata, source_key=f"{run_id}:{draft.key}",
            ))
    return out
