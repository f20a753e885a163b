"""From `astream_events(version="v2")` stream parts to journal records.

A `RunMapper` follows one server run. It is fed the parts an SDK stream yields
(`event` = the stream mode, `data` = the payload) in order and returns the
records they stand for:

| part                                      | record                              |
|-------------------------------------------|-------------------------------------|
| root `on_chain_start`                     | `run.start` (trace)                 |
| human messages of the run input           | `llm.human.input` (message)         |
| `on_chat_model_end` of the agent model    | `llm.ai.response` (message)         |
| `on_chat_model_end` of the summarizer     | `llm.ai.response` (trace, hidden)   |
| `on_tool_end`                             | `llm.tool.result` (message)         |
| `on_custom_event` named `summarization`   | `middleware:summarize` (middleware) |
| root `on_chain_end`                       | `run.end` (outputs)                 |
| root `on_chain_error`, an `error` part    | `run.error` (error)                 |

Every record carries a `source_key` derived from the stream itself (the
LangChain run id of the callback, or the position of an input message), so
replaying a stream, or receiving a frame twice, yields the same keys and the
store keeps one record per key.

Parts the journal does not need are ignored. A part that is not shaped like
the server's output is counted in `malformed` and skipped; it never raises.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

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

logger = logging.getLogger(__name__)

__all__ = ["RunMapper", "map_parts", "message_dict"]


def message_dict(message: Any) -> dict[str, Any] | None:
    """A LangChain message (object, dict, tuple or text) as a plain message dict."""
    from langchain_core.messages import BaseMessage, convert_to_messages

    if isinstance(message, Mapping) and isinstance(message.get("type"), str):
        if message["type"] in {"human", "ai", "tool", "system", "function", "chat"}:
            return dict(message)
    try:
        converted = message if isinstance(message, BaseMessage) else convert_to_messages([message])[0]
    except Exception:  # noqa: BLE001 - anything unconvertible is not a message
        return None
    return converted.model_dump(mode="json")


def _is_summarizer_call(event: Mapping[str, Any]) -> bool:
    metadata = event.get("metadata") or {}
    tags = event.get("tags") or []
    return metadata.get("lc_source") == "summarization" or "nostream" in tags


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class RunMapper:
    """Maps the stream parts of one run, in order, to records of that run."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = str(thread_id)
        self.run_id = str(run_id)
        self.malformed = 0
        self.seen_parts = 0
        self._pending_input: list[dict[str, Any]] | None = None
        self._ended = False

    # -- public -----------------------------------------------------------

    def feed(self, event: str, data: Any) -> list[RunEvent]:
        """Records for one stream part (`event` is the SSE event name)."""
        self.seen_parts += 1
        try:
            if event == "events":
                return self._from_callback_event(data)
            if event == "error":
                return [self._error_record(data, key="run.error")]
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
        """Records still held back when the stream ends (input never placed)."""
        return self._input_records(None)

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
            return self._input_records(payload.get("input"))
        if kind == "on_chat_model_end":
            return [*self._input_records(None), self._ai_response(data, payload)]
        if kind == "on_tool_end":
            record = self._tool_result(data, payload)
            return [*self._input_records(None), *([record] if record else [])]
        if kind == "on_custom_event" and data.get("name") == SUMMARIZATION_EVENT:
            return [*self._input_records(None), self._summarize(data, payload)]
        if kind == "on_chain_end" and is_root:
            return [*self._input_records(None), self._run_end(payload)]
        if kind == "on_chain_error" and is_root:
            return [*self._input_records(None), self._error_record(payload.get("error"), "run.error")]
        return []

    def _is_root(self, data: Mapping[str, Any]) -> bool:
        if str(data.get("run_id")) == self.run_id:
            return True
        parents = data.get("parent_ids")
        return isinstance(parents, list) and not parents and data.get("event", "").startswith("on_chain")

    def _record(self, event_type: str, content: Any, *, key: str, category: str | None = None,
                metadata: dict[str, Any] | None = None) -> RunEvent:
        return make_event(
            thread_id=self.thread_id,
            run_id=self.run_id,
            event_type=event_type,
            category=category,
            content=content,
            metadata=metadata or {},
            source_key=f"{self.run_id}:{key}",
        )

    def _run_start(self, data: Mapping[str, Any], payload: Mapping[str, Any]) -> list[RunEvent]:
        run_input = payload.get("input")
        messages = run_input.get("messages") if isinstance(run_input, Mapping) else None
        if isinstance(messages, (list, tuple)):
            humans = [m for m in (message_dict(x) for x in messages) if m and m.get("type") == "human"]
        elif isinstance(messages, (str, dict)):
            one = message_dict(messages)
            humans = [one] if one and one.get("type") == "human" else []
        else:
            humans = []
        self._pending_input = humans
        metadata = data.get("metadata") or {}
        content = {
            "graph": data.get("name"),
            "assistant_id": metadata.get("assistant_id"),
            "input_keys": sorted(run_input) if isinstance(run_input, Mapping) else None,
            "input_messages": len(humans),
        }
        return [self._record(RUN_START, content, key="run.start")]

    def _input_records(self, state_input: Any) -> list[RunEvent]:
        """The run's human input, placed once the first node has seen it.

        The server's input step gives messages their ids; the first node's input
        holds them at the end of the state's message list, in input order, so
        that is where the ids are read from. Client-supplied ids are kept.
        """
        pending, self._pending_input = self._pending_input, None
        if not pending:
            return []
        state_messages = state_input.get("messages") if isinstance(state_input, Mapping) else None
        if isinstance(state_messages, list) and len(state_messages) >= len(pending):
            tail = state_messages[-len(pending):]
            for message, stored in zip(pending, tail):
                stored = message_dict(stored) or {}
                if not message.get("id") and stored.get("type") == "human" and stored.get("content") == message.get("content"):
                    message["id"] = stored.get("id")
        return [
            self._record(LLM_HUMAN_INPUT, message, key=f"human:{index}")
            for index, message in enumerate(pending)
        ]

    def _ai_response(self, data: Mapping[str, Any], payload: Mapping[str, Any]) -> RunEvent:
        output = payload.get("output")
        message = message_dict(output)
        if message is None:
            raise TypeError("on_chat_model_end without a message output")
        metadata = data.get("metadata") or {}
        usage = message.get("usage_metadata")
        key = f"llm:{data.get('run_id')}"
        if _is_summarizer_call(data):
            return self._record(
                LLM_AI_RESPONSE,
                message,
                key=key,
                category=TRACE,
                metadata={"caller": SUMMARIZER_CALLER, "usage": usage},
            )
        return self._record(
            LLM_AI_RESPONSE,
            message,
            key=key,
            metadata={
                "caller": metadata.get("langgraph_node") or data.get("name"),
                "usage": usage,
                "langgraph_step": metadata.get("langgraph_step"),
            },
        )

    def _tool_result(self, data: Mapping[str, Any], payload: Mapping[str, Any]) -> RunEvent | None:
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
        return self._record(
            LLM_TOOL_RESULT,
            message,
            key=f"tool:{data.get('run_id')}",
            metadata={"tool": data.get("name"), "langgraph_step": metadata.get("langgraph_step")},
        )

    def _summarize(self, data: Mapping[str, Any], payload: Mapping[str, Any]) -> RunEvent:
        metadata = data.get("metadata") or {}
        changes = dict(payload)
        content = {
            "name": changes.get("middleware") or "SummarizationMiddleware",
            "hook": changes.get("hook") or "before_model",
            "action": "summarize",
            "changes": changes,
        }
        identity = changes.get("summary_message_id") or _digest(changes)
        return self._record(
            MIDDLEWARE_SUMMARIZE,
            content,
            key=f"summarize:{data.get('run_id')}:{identity}",
            category=MIDDLEWARE,
            metadata={
                "langgraph_step": metadata.get("langgraph_step"),
                "langgraph_node": metadata.get("langgraph_node"),
                "langgraph_checkpoint_ns": metadata.get("langgraph_checkpoint_ns"),
            },
        )

    def _run_end(self, payload: Mapping[str, Any]) -> RunEvent:
        self._ended = True
        output = payload.get("output")
        messages = output.get("messages") if isinstance(output, Mapping) else None
        content: dict[str, Any] = {"output_keys": sorted(output) if isinstance(output, Mapping) else None}
        if isinstance(messages, list):
            last = message_dict(messages[-1]) if messages else None
            content["message_count"] = len(messages)
            content["last_message_id"] = last.get("id") if last else None
        return self._record(RUN_END, content, key="run.end")

    def _error_record(self, error: Any, key: str) -> RunEvent:
        if isinstance(error, Mapping):
            content = {"error": error.get("error"), "message": error.get("message")}
        else:
            content = {"error": type(error).__name__ if not isinstance(error, str) else "Error",
                       "message": str(error)}
        return self._record(RUN_ERROR, content, key=key)


def map_parts(thread_id: str, run_id: str, parts: Iterable[tuple[str, Any]]) -> list[RunEvent]:
    """All records of a complete stream (convenience for tests and tools)."""
    mapper = RunMapper(thread_id, run_id)
    records: list[RunEvent] = []
    for event, data in parts:
        records.extend(mapper.feed(event, data))
    records.extend(mapper.flush())
    return records
