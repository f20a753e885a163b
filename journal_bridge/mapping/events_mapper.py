"""From `astream_events(version="v2")` stream parts to journal records.

A `RunMapper` follows one server run captured through the `events` stream
mode. It is fed the parts an SDK stream yields (`event` = the stream mode,
`data` = the payload) in order and returns the records they stand for; what
each record says is defined once, in `journal_bridge.model.records`:

| part                                      | record                              |
|-------------------------------------------|-------------------------------------|
| root `on_chain_start`                     | `run.start`, then the input messages |
| `on_chat_model_end` in a top-level node   | `llm.ai.response` (message)         |
| `on_chat_model_end` elsewhere             | `llm.ai.response` (message, hidden by its `caller`): the summarizer, models called inside tools or subgraphs |
| `on_tool_end` in a top-level node         | `llm.tool.result` (message)         |
| `on_tool_end` inside a tool or subgraph   | `llm.tool.result` (message, hidden by its `caller`) |
| `on_custom_event` of `records.CUSTOM_EVENTS` | its record: `summarization` is `middleware:summarize` (middleware) |
| `on_chain_end` of a top-level node whose update removes messages | `middleware:summarize`: a compaction, whatever the middleware announced (`journal_bridge.mapping.compactions`) |
| root `on_chain_end`                       | `run.end` (outputs), at `flush`     |
| root `on_chain_error`, an `error` part    | `run.error` (error)                 |

What the stream cannot say -- that the run was cancelled, a failure whose
`error` part was missed, the interrupts a paused run waits on -- comes with
the run's outcome (`journal_bridge.host.outcome`) given to `flush`.

Records carry keys derived from the stream itself, so replaying a stream, or
receiving a frame twice, yields the same keys and the store keeps one record
per key. The state mapper (`journal_bridge.mapping.state_mapper`) yields the same
message, middleware and outputs records from the `values` and `custom` modes;
only the hidden model calls and tool results above are particular to this one.

Parts the journal does not need are ignored. A part that is not shaped like
the server's output is counted in `malformed` and skipped; it never raises.
Most of an `events` stream's bytes are node starts and ends, each carrying the
whole state: `needs` tells from a part's bytes, before it is parsed, whether
this mapper would map it to anything, so a reader holding the raw frame need
not parse the ones it would not.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from journal_bridge.model import records
from journal_bridge.host.compat import is_cancel_part
from journal_bridge.mapping.compactions import Compactions
from journal_bridge.model.envelope import SUMMARIZATION_EVENT, SUMMARIZER_CALLER, RunEvent
from journal_bridge.host.modes import EVENTS_MODE
from journal_bridge.host.outcome import CANCELLED, COMPLETED, ERRORED, INTERRUPTED, RunOutcome
from journal_bridge.model.records import Draft, message_dict

logger = logging.getLogger(__name__)

__all__ = ["RunMapper", "map_parts", "message_dict"]

# The server writes a callback event's name first and its `parent_ids` last
# (`{"event":"on_chain_end","data":{...},...,"parent_ids":[...]}`): both are
# read without scanning the state between. In JSON text a quote inside a
# string is escaped, so these marks are found only where they are the event's
# own keys and values, or a state's: never in message text.
_KIND = re.compile(rb'\s*\{\s*"event"\s*:\s*"(on_[a-z_]+)"')
_PARENTS_KEY = b'"parent_ids"'
_NO_PARENTS = re.compile(rb'"parent_ids"\s*:\s*\[\s*\]')
_REMOVE_MARK = b'"remove"'  # a `RemoveMessage`'s type: how a compaction shows in an update
# What `_from_callback_event` maps, besides node starts and ends.
_MAPPED_KINDS = frozenset({b"on_tool_start", b"on_chat_model_end", b"on_tool_end", b"on_custom_event", b"on_chain_error"})


def _is_summarizer_call(event: Mapping[str, Any]) -> bool:
    # Upstream marks its summarizer calls so; a plain `nostream` tag is not enough,
    # user graphs tag conversation models that way too.
    return (event.get("metadata") or {}).get("lc_source") == "summarization"


def _in_conversation(event: Mapping[str, Any]) -> bool:
    """A callback of the graph's own nodes, not of a tool's or a subgraph's insides."""
    metadata = event.get("metadata") or {}
    namespace = metadata.get("langgraph_checkpoint_ns") or ""
    return "|" not in namespace and not _is_summarizer_call(event)


class RunMapper:
    """Maps the `events` parts of one run, in order, to records of that run.

    Message records need the id the message has in the thread's state. Input
    messages get theirs from the server's input step, a tool's result often
    from the reducer after `on_tool_end`: neither id is in the event itself.
    Such records are held back, and every record after them too so the order
    stays the stream's, until a node's input shows the state that holds them
    (or the run ends). Ids are matched structurally: a tool result by its
    `tool_call_id`, an input message by position from the end of the state.
    """

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = str(thread_id)
        self.run_id = str(run_id)
        self.malformed = 0
        self._held: list[Draft] = []
        self._input_count = 0
        self._calls = 0
        self._hidden_calls: dict[str, int] = {}  # caller -> model calls outside the conversation
        # Tool calls in progress: model calls and tools under them are not the conversation.
        self._tool_runs: set[Any] = set()
        self._end: Draft | None = None
        self._compactions = Compactions()
        self._failed = False
        self._started = False  # the root's start was mapped
        # Whether the root's events have no parents (its end is then known by its bytes).
        self._root_unparented = False
        self.ending: str | None = None  # how the journaled run ended (`journal_bridge.host.outcome`)

    # -- public -----------------------------------------------------------

    def feed(self, event: str, data: Any) -> list[RunEvent]:
        """Records for one stream part (`event` is the SSE event name)."""
        try:
            if event == EVENTS_MODE:
                return self._from_callback_event(data)
            if event == "error":
                if is_cancel_part(data):
                    return []  # a cancel: the outcome says so, with the server's reason
                return self._fail(records.run_error(data))
            return []
        except Exception as exc:  # noqa: BLE001 - a bad part must never stop a run's journal
            self.malformed += 1
            logger.warning(
                "journal-bridge: skipped a malformed %r part of run %s: %s",
                event,
                self.run_id,
                exc,
            )
            return []

    def needs(self, data: bytes) -> bool:
        """Whether an `events` part, as its JSON bytes, has to be parsed and fed:
        False only for one that `feed` would map to nothing now.

        That is a callback this mapper does not map, a node's start while no
        record waits for the ids its input shows, and a node's end whose update
        removes no message (so compacts nothing). Bytes not shaped like the
        server's events are parsed (and counted as malformed if they are).
        """
        kind = _KIND.match(data)
        if kind is None:
            return True
        name = kind.group(1)
        if name == b"on_chain_start":
            return not self._started or bool(self._held)
        if name == b"on_chain_end":
            if not self._root_unparented:
                return True
            parents = data.rfind(_PARENTS_KEY)
            if parents < 0 or _NO_PARENTS.match(data, parents) is not None:
                return True  # the root's end, or not shaped like the server's
            return _REMOVE_MARK in data
        return name in _MAPPED_KINDS

    @property
    def outcome_wanted(self) -> dict[str, Any] | None:
        """What `flush` needs to know from the server (`read_outcome` arguments), or None."""
        if self._failed:
            return None
        if self._end is not None:
            # The root returned: the run succeeded, perhaps paused at an interrupt.
            return {"status": "success", "interrupts": True}
        return {"interrupts": True}

    def flush(self, outcome: RunOutcome | None = None) -> list[RunEvent]:
        """Records still held back when the stream ends, with the ids they have,
        then how the run ended: `run.end` (after `run.interrupt` when the
        outcome shows interrupts) or, for a stream that just stopped, the
        `run.error` of a cancelled or failed run."""
        out = self._release(None, final=True)
        if (announced := self._compactions.flush()) is not None:
            out += self._emit(announced)
        if self._failed or self.ending is not None:
            return out
        if self._end is not None:
            interrupts = list(outcome.interrupts) if outcome is not None else []
            if interrupts:
                out += self._emit(records.run_interrupt(interrupts))
            self.ending = INTERRUPTED if interrupts else COMPLETED
            return out + self._emit(self._end)
        if outcome is not None and outcome.cancelled:
            self.ending = CANCELLED
            return out + self._emit(records.run_cancelled(outcome.reason, outcome.cancel_action))
        if outcome is not None and outcome.failed:
            return out + self._fail(records.run_error(outcome.failure()))
        return out

    def _fail(self, draft: Draft) -> list[RunEvent]:
        self._failed = True
        self.ending = ERRORED
        return self._emit(draft)

    # -- callbacks ----------------------------------------------------------

    def _from_callback_event(self, data: Any) -> list[RunEvent]:
        if not isinstance(data, Mapping):
            raise TypeError(f"expected an event object, got {type(data).__name__}")
        kind = data.get("event")
        if not isinstance(kind, str):
            raise TypeError("event object without an 'event' name")
        is_root = self._is_root(data)
        payload = data.get("data") or {}
        if not isinstance(payload, Mapping):
            raise TypeError(f"'data' of {kind} is {type(payload).__name__}, not an object")

        if kind == "on_chain_start":
            if is_root:
                return self._run_start(data, payload)
            return self._release(payload.get("input"), final=False)
        if kind == "on_tool_start":
            self._tool_runs.add(data.get("run_id"))
            return []
        if kind == "on_chat_model_end":
            return self._emit(self._ai_response(data, payload))
        if kind == "on_tool_end":
            return self._emit(self._tool_result(data, payload))
        if kind == "on_custom_event":
            if data.get("name") == SUMMARIZATION_EVENT:
                draft = self._compactions.announced(payload)
            else:
                draft = records.custom_event(data.get("name"), payload)
            return self._emit(draft) if draft is not None else []
        if kind == "on_chain_end" and not is_root:
            before, update = payload.get("input"), payload.get("output")
            if isinstance(before, Mapping) and isinstance(update, Mapping) and _in_conversation(data):
                draft = self._compactions.from_update(before, update)
                return self._emit(draft) if draft is not None else []
            return []
        if kind == "on_chain_end" and is_root:
            output = payload.get("output")
            # `run.end` waits for `flush`: an interrupt the run paused at comes before it.
            self._end = records.run_end(output)
            return self._release(output, final=True)
        if kind == "on_chain_error" and is_root:
            return [*self._release(None, final=True), *self._fail(records.run_error(payload.get("error")))]
        return []

    def _is_root(self, data: Mapping[str, Any]) -> bool:
        if str(data.get("run_id")) == self.run_id:
            return True
        parents = data.get("parent_ids")
        return isinstance(parents, list) and not parents and data.get("event", "").startswith("on_chain")

    def _nested(self, data: Mapping[str, Any]) -> bool:
        """Inside a tool call or a subgraph: not something the graph said to the user."""
        parents = data.get("parent_ids") or []
        return not _in_conversation(data) or any(p in self._tool_runs for p in parents)

    # -- ordering -------------------------------------------------------------

    def _emit(self, draft: Draft) -> list[RunEvent]:
        if not self._held and (not draft.is_message or draft.message_id):
            return [records.record(self.thread_id, self.run_id, draft)]
        self._held.append(draft)
        return []

    def _release(self, state: Any, *, final: bool) -> list[RunEvent]:
        """Give held messages the ids `state` shows; release what no longer waits."""
        if not self._held:
            return []
        messages = state.get("messages") if isinstance(state, Mapping) else None
        if isinstance(messages, list):
            self._resolve_ids(messages)
        released: list[RunEvent] = []
        while self._held:
            head = self._held[0]
            if head.is_message and not head.message_id and not final:
                break
            released.append(records.record(self.thread_id, self.run_id, self._held.pop(0)))
        return released

    def _resolve_ids(self, state_messages: list[Any]) -> None:
        """Give held messages their ids from the state's messages, read from the end
        only as far as the held ones need (the state repeats the thread's history)."""
        wanted = {
            d.content.get("tool_call_id")
            for d in self._held
            if d.is_message and not d.message_id and d.content.get("type") == "tool"
        }
        tail_wanted = self._input_count if any(d.key.startswith("input:") for d in self._held) else 0
        by_call: dict[Any, Any] = {}  # the last tool message of each call, as in the state
        tail: list[dict[str, Any]] = []  # the state's last messages, newest first
        for raw in reversed(state_messages):
            if len(tail) >= tail_wanted and not wanted:
                break
            message = message_dict(raw)
            if not message:
                continue
            if len(tail) < tail_wanted:
                tail.append(message)
            if message.get("type") == "tool" and message.get("tool_call_id") not in by_call:
                by_call[message.get("tool_call_id")] = message.get("id")
                wanted.discard(message.get("tool_call_id"))
        tail.reverse()
        for draft in self._held:
            message = draft.content
            if not draft.is_message or draft.message_id:
                continue
            if message.get("type") == "tool" and by_call.get(message.get("tool_call_id")):
                message["id"] = by_call[message["tool_call_id"]]
            elif draft.key.startswith("input:") and len(tail) == self._input_count:
                stored = tail[int(draft.key.split(":", 1)[1])]
                if stored.get("type") == message.get("type") and stored.get("content") == message.get("content"):
                    message["id"] = stored.get("id")

    # -- records ------------------------------------------------------------------

    def _next_call(self) -> int:
        self._calls += 1
        return self._calls

    def _hidden_call(self, message: dict[str, Any], key: str, caller: str) -> Draft:
        self._hidden_calls[caller] = self._hidden_calls.get(caller, 0) + 1
        return records.model_call(message, key, caller, self._hidden_calls[caller])

    @staticmethod
    def _subagent(data: Mapping[str, Any]) -> str:
        return records.subagent_caller((data.get("metadata") or {}).get("langgraph_node") or data.get("name"))

    def _run_start(self, data: Mapping[str, Any], payload: Mapping[str, Any]) -> list[RunEvent]:
        self._started = True
        self._root_unparented = data.get("parent_ids") == []
        run_input = payload.get("input")
        metadata = data.get("metadata") or {}
        graph = metadata.get("graph_id") or data.get("name")
        inputs = records.input_messages(run_input)
        emitted = self._emit(records.run_start(graph, metadata.get("assistant_id"), run_input, inputs))
        self._input_count = len(inputs)
        for index, message in enumerate(inputs):
            call = self._next_call() if message.get("type") == "ai" else 0
            draft = records.conversation_message(message, f"input:{index}", call)
            # Input messages wait for the first node, which shows them with their ids.
            if draft is not None:
                self._held.append(draft)
        return emitted

    def _ai_response(self, data: Mapping[str, Any], payload: Mapping[str, Any]) -> Draft:
        message = message_dict(payload.get("output"))
        if message is None:
            raise TypeError("on_chat_model_end without a message output")
        key = f"llm:{data.get('run_id')}"
        if _is_summarizer_call(data):
            return self._hidden_call(message, key, SUMMARIZER_CALLER)
        if self._nested(data):
            return self._hidden_call(message, key, self._subagent(data))
        return records.ai_response(message, self._next_call(), key)

    def _tool_result(self, data: Mapping[str, Any], payload: Mapping[str, Any]) -> Draft:
        self._tool_runs.discard(data.get("run_id"))
        output = payload.get("output")
        message = message_dict(output) if isinstance(output, Mapping) else None
        if message is None or message.get("type") != "tool":
            # A tool that returned a Command or a raw value: keep what it said.
            message = {
                "type": "tool",
                "content": output if isinstance(output, str) else json.dumps(output, default=str),
                "name": data.get("name"),
                "tool_call_id": None,
                "id": None,
            }
        key = f"tool:{data.get('run_id')}"
        if self._nested(data):
            return records.nested_tool_result(message, key, self._subagent(data))
        return records.tool_result(message, key)


def map_parts(
    thread_id: str, run_id: str, parts: Iterable[tuple[str, Any]], outcome: RunOutcome | None = None
) -> list[RunEvent]:
    """All records of a complete stream (convenience for tests and tools)."""
    mapper = RunMapper(thread_id, run_id)
    out: list[RunEvent] = []
    for event, data in parts:
        out.extend(mapper.feed(event, data))
    out.extend(mapper.flush(outcome))
    return out
