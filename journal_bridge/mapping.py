"""From `astream_events(version="v2")` stream parts to journal records.

A `RunMapper` follows one server run. It is fed the parts an SDK stream yields
(`event` = the stream mode, `data` = the payload) in order and returns the
records they stand for:

| part                                      | record                              |
|-------------------------------------------|-------------------------------------|
| root `on_chain_start`                     | `run.start` (trace)                 |
| messages of the run input                 | `llm.human.input` / `llm.ai.response` / `llm.tool.result` (message) |
| `on_chat_model_end` in a top-level node   | `llm.ai.response` (message)         |
| `on_chat_model_end` elsewhere             | `llm.ai.response` (trace): the summarizer, models called inside tools or subgraphs |
| `on_tool_end` in a top-level node         | `llm.tool.result` (message)         |
| `on_custom_event` named `summarization`   | `middleware:summarize` (middleware) |
| root `on_chain_end`                       | `run.end` (outputs)                 |
| root `on_chain_error`, an `error` part    | `run.error` (error)                 |

Every record carries a `source_key` derived from the stream itself, so
replaying a stream, or receiving a frame twice, yields the same keys and the
store keeps one record per key. A message with an id is keyed by that id
(`message:{id}`, unique in a thread), so a message a client sends again in a
later run's input is journaled once; everything else by the run and the
callback's own run id.

Parts the journal does not need are ignored. A part that is not shaped like
the server's output is counted in `malformed` and skipped; it never raises.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages

from journal_bridge.events import (
    LLM_AI_RESPONSE,
    LLM_HUMAN_INPUT,
    LLM_TOOL_RESULT,
    MIDDLEWARE,
    MIDDLEWARE_SUMMARIZE,
    RUN_END,
    RUN_ERROR,
    RUN_START,
    SUMMARIZATION_EVENT,
    SUMMARIZER_CALLER,
    TRACE,
    RunEvent,
    make_event,
)
from journal_bridge.modes import EVENTS_MODE

logger = logging.getLogger(__name__)

__all__ = ["RunMapper", "map_parts", "message_dict"]


def message_dict(message: Any) -> dict[str, Any] | None:
    """A LangChain message (object, dict, tuple or text) as a plain message dict."""
    if isinstance(message, Mapping) and isinstance(message.get("type"), str):
        if message["type"] in {"human", "ai", "tool", "system", "function", "chat"}:
            return dict(message)
    try:
        converted = message if isinstance(message, BaseMessage) else convert_to_messages([message])[0]
    except Exception:  # noqa: BLE001 - anything unconvertible is not a message
        return None
    return converted.model_dump(mode="json")


def _is_summarizer_call(event: Mapping[str, Any]) -> bool:
    # Upstream marks its summarizer calls so; a plain `nostream` tag is not enough,
    # user graphs tag conversation models that way too.
    return (event.get("metadata") or {}).get("lc_source") == "summarization"


def _in_conversation(event: Mapping[str, Any]) -> bool:
    """A callback of the graph's own nodes, not of a tool's or a subgraph's insides."""
    metadata = event.get("metadata") or {}
    namespace = metadata.get("langgraph_checkpoint_ns") or ""
    return "|" not in namespace and not _is_summarizer_call(event)


_MESSAGE_EVENT_TYPES = {"human": LLM_HUMAN_INPUT, "ai": LLM_AI_RESPONSE, "tool": LLM_TOOL_RESULT}


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class _Pending:
    """A record waiting for its message's id, or queued behind one that is."""

    event_type: str
    content: Any
    key: str
    category: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    is_message: bool = False


class RunMapper:
    """Maps the stream parts of one run, in order, to records of that run.

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
        self._held: list[_Pending] = []
        self._input_count = 0
        # Tool calls in progress: model calls and tools under them are not the conversation.
        self._tool_runs: set[Any] = set()

    # -- public -----------------------------------------------------------

    def feed(self, event: str, data: Any) -> list[RunEvent]:
        """Records for one stream part (`event` is the SSE event name)."""
        try:
            if event == EVENTS_MODE:
                return self._from_callback_event(data)
            if event == "error":
                return self._emit(self._error(data))
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

    def flush(self) -> list[RunEvent]:
        """Records still held back when the stream ends, with the ids they have."""
        return self._release(None, final=True)

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
        if kind == "on_custom_event" and data.get("name") == SUMMARIZATION_EVENT:
            return self._emit(self._summarize(data, payload))
        if kind == "on_chain_end" and is_root:
            output = payload.get("output")
            return [*self._release(output, final=True), *self._emit(self._run_end(output))]
        if kind == "on_chain_error" and is_root:
            return [*self._release(None, final=True), *self._emit(self._error(payload.get("error")))]
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

    def _emit(self, pending: _Pending) -> list[RunEvent]:
        message = pending.content if pending.is_message else None
        if not self._held and (message is None or message.get("id")):
            return [self._record(pending)]
        self._held.append(pending)
        return []

    def _release(self, state: Any, *, final: bool) -> list[RunEvent]:
        """Give held messages the ids `state` shows; release what no longer waits."""
        if not self._held:
            return []
        messages = state.get("messages") if isinstance(state, Mapping) else None
        if isinstance(messages, list):
            self._resolve_ids([m for m in (message_dict(x) for x in messages) if m])
        released: list[RunEvent] = []
        while self._held:
            head = self._held[0]
            waiting = head.is_message and not head.content.get("id")
            if waiting and not final:
                break
            released.append(self._record(self._held.pop(0)))
        return released

    def _resolve_ids(self, state_messages: list[dict[str, Any]]) -> None:
        by_call = {m.get("tool_call_id"): m.get("id") for m in state_messages if m.get("type") == "tool"}
        tail = state_messages[-self._input_count :] if self._input_count else []
        for pending in self._held:
            message = pending.content
            if not pending.is_message or message.get("id"):
                continue
            if message.get("type") == "tool" and by_call.get(message.get("tool_call_id")):
                message["id"] = by_call[message["tool_call_id"]]
            elif pending.key.startswith("input:") and len(tail) == self._input_count:
                stored = tail[int(pending.key.split(":", 1)[1])]
                if stored.get("type") == message.get("type") and stored.get("content") == message.get("content"):
                    message["id"] = stored.get("id")

    def _record(self, pending: _Pending) -> RunEvent:
        message_id = pending.content.get("id") if pending.is_message else None
        # A message id is unique within the thread; anything else is keyed within the run.
        source_key = f"message:{message_id}" if message_id else f"{self.run_id}:{pending.key}"
        return make_event(
            thread_id=self.thread_id,
            run_id=self.run_id,
            event_type=pending.event_type,
            category=pending.category,
            content=pending.content,
            metadata=pending.metadata,
            source_key=source_key,
        )

    # -- records ------------------------------------------------------------------

    def _run_start(self, data: Mapping[str, Any], payload: Mapping[str, Any]) -> list[RunEvent]:
        run_input = payload.get("input")
        messages = run_input.get("messages") if isinstance(run_input, Mapping) else None
        if isinstance(messages, (str, dict)):
            messages = [messages]
        converted = [message_dict(m) for m in messages] if isinstance(messages, (list, tuple)) else []
        inputs = [m for m in converted if m and m.get("type") in _MESSAGE_EVENT_TYPES]
        self._input_count = len(inputs)
        metadata = data.get("metadata") or {}
        content = {
            "graph": data.get("name"),
            "assistant_id": metadata.get("assistant_id"),
            "input_keys": sorted(run_input) if isinstance(run_input, Mapping) else None,
            "input_messages": len(inputs),
        }
        records = self._emit(_Pending(RUN_START, content, "run.start"))
        for index, message in enumerate(inputs):
            pending = _Pending(
                _MESSAGE_EVENT_TYPES[message["type"]],
                message,
                f"input:{index}",
                metadata={"caller": "input"},
                is_message=True,
            )
            # Input messages wait for the first node, which shows them with their ids.
            self._held.append(pending)
        return records

    def _ai_response(self, data: Mapping[str, Any], payload: Mapping[str, Any]) -> _Pending:
        message = message_dict(payload.get("output"))
        if message is None:
            raise TypeError("on_chat_model_end without a message output")
        metadata = data.get("metadata") or {}
        usage = message.get("usage_metadata")
        key = f"llm:{data.get('run_id')}"
        if _is_summarizer_call(data):
            return _Pending(LLM_AI_RESPONSE, message, key, TRACE, {"caller": SUMMARIZER_CALLER, "usage": usage})
        details = {
            "caller": metadata.get("langgraph_node") or data.get("name"),
            "usage": usage,
            "langgraph_step": metadata.get("langgraph_step"),
        }
        if self._nested(data):
            return _Pending(LLM_AI_RESPONSE, message, key, TRACE, details)
        return _Pending(LLM_AI_RESPONSE, message, key, None, details, is_message=True)

    def _tool_result(self, data: Mapping[str, Any], payload: Mapping[str, Any]) -> _Pending:
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
        metadata = data.get("metadata") or {}
        details = {"tool": data.get("name"), "langgraph_step": metadata.get("langgraph_step")}
        key = f"tool:{data.get('run_id')}"
        if self._nested(data):
            return _Pending(LLM_TOOL_RESULT, message, key, TRACE, details)
        return _Pending(LLM_TOOL_RESULT, message, key, None, details, is_message=True)

    def _summarize(self, data: Mapping[str, Any], payload: Mapping[str, Any]) -> _Pending:
        metadata = data.get("metadata") or {}
        changes = dict(payload)
        content = {
            "name": changes.get("middleware") or "SummarizationMiddleware",
            "hook": changes.get("hook") or "before_model",
            "action": "summarize",
            "changes": changes,
        }
        identity = changes.get("summary_message_id") or _digest(changes)
        return _Pending(
            MIDDLEWARE_SUMMARIZE,
            content,
            f"summarize:{data.get('run_id')}:{identity}",
            MIDDLEWARE,
            {
                "langgraph_step": metadata.get("langgraph_step"),
                "langgraph_node": metadata.get("langgraph_node"),
                "langgraph_checkpoint_ns": metadata.get("langgraph_checkpoint_ns"),
            },
        )

    def _run_end(self, output: Any) -> _Pending:
        messages = output.get("messages") if isinstance(output, Mapping) else None
        content: dict[str, Any] = {"output_keys": sorted(output) if isinstance(output, Mapping) else None}
        if isinstance(messages, list):
            last = message_dict(messages[-1]) if messages else None
            content["message_count"] = len(messages)
            content["last_message_id"] = last.get("id") if last else None
        return _Pending(RUN_END, content, "run.end")

    def _error(self, error: Any) -> _Pending:
        if isinstance(error, Mapping):
            content = {"error": error.get("error"), "message": error.get("message")}
        elif isinstance(error, str):
            content = {"error": "Error", "message": error}
        else:
            content = {"error": type(error).__name__, "message": str(error)}
        # An error part and the root's on_chain_error describe one failure: one key.
        return _Pending(RUN_ERROR, content, "run.error")


def map_parts(thread_id: str, run_id: str, parts: Iterable[tuple[str, Any]]) -> list[RunEvent]:
    """All records of a complete stream (convenience for tests and tools)."""
    mapper = RunMapper(thread_id, run_id)
    records: list[RunEvent] = []
    for event, data in parts:
        records.extend(mapper.feed(event, data))
    records.extend(mapper.flush())
    return records
