"""From `astream_events(version="v2")` stream parts, with the run's states, to journal records.

A `RunMapper` follows one server run captured through the `events` stream
mode together with `values`. The conversation is what the run committed to
its thread's `messages`, whatever wrote it -- a node, an agent run as a
sub-graph, a handoff, a tool's `Command`, a state update -- so it is read
from the `values` parts, by the state mapper (`journal_bridge.mapping.state_mapper`),
exactly as on the `values` + `custom` path. The callbacks add what only they
can see:

| part                                      | record                              |
|-------------------------------------------|-------------------------------------|
| root `on_chain_start`                     | `run.start`                         |
| `values`                                  | the messages new in the state, and a marker for a compaction it shows |
| `on_chat_model_end` whose message no state of the run holds | `llm.ai.response` (message, hidden by its `caller`): a summarizer, a title generator, an agent run inside a tool, a router |
| `on_tool_end` whose result no state of the run holds | `llm.tool.result` (message, hidden by its `caller`) |
| `on_custom_event` of `records.CUSTOM_EVENTS` | its record: `summarization` adds to (or is) the marker of its compaction |
| root `on_chain_end`                       | `run.end` (outputs), at `flush`     |
| root `on_chain_error`, an `error` part    | `run.error` (error)                 |

A model or tool call is decided at the first state after it: the server sends
a step's state once every task of the step has ended, so a call whose output
the step committed is in that state, and one whose output it is not in never
reached the conversation. A hidden call's `caller` is what the call says of
itself: `middleware:summarize` for a summarizer (`lc_source: summarization`,
or an answer that became a compaction's summary), `middleware:<name>` for a
call tagged so (deer-flow's `middleware:title`), else `subagent:<node>`.

What the stream cannot say -- that the run was cancelled, a failure whose
`error` part was missed, the interrupts a paused run waits on -- comes with
the run's outcome (`journal_bridge.host.outcome`) given to `flush`.

Records carry keys derived from the stream itself, so replaying a stream, or
receiving a frame twice, yields the same keys and the store keeps one record
per key. Parts the journal does not need are ignored. A part that is not
shaped like the server's output is counted in `malformed` and skipped; it
never raises. Most of an `events` stream's bytes are node starts and ends,
each carrying the whole state: `needs` tells from a part's bytes, before it is
parsed, whether this mapper would map it to anything, and none of those are.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from journal_bridge.host.compat import is_cancel_part
from journal_bridge.host.modes import EVENTS_MODE
from journal_bridge.host.outcome import CANCELLED, COMPLETED, ERRORED, INTERRUPTED, RunOutcome
from journal_bridge.mapping.compactions import message_text
from journal_bridge.mapping.state_mapper import VALUES_MODE, StateMapper
from journal_bridge.model import records
from journal_bridge.model.envelope import SUMMARIZATION_EVENT, SUMMARIZER_CALLER, RunEvent
from journal_bridge.model.errors import MalformedPart
from journal_bridge.model.records import Draft, message_dict

logger = logging.getLogger(__name__)

__all__ = ["RunMapper", "call_caller", "map_parts", "message_dict"]

# The server writes a callback event's name first and its `parent_ids` last
# (`{"event":"on_chain_end","data":{...},...,"parent_ids":[...]}`): both are
# read without scanning the state between. In JSON text a quote inside a
# string is escaped, so these marks are found only where they are the event's
# own keys and values, or a state's: never in message text.
_KIND = re.compile(rb'\s*\{\s*"event"\s*:\s*"(on_[a-z_]+)"')
_PARENTS_KEY = b'"parent_ids"'
_NO_PARENTS = re.compile(rb'"parent_ids"\s*:\s*\[\s*\]')
# What `_from_callback_event` maps, besides the root's start and end.
_MAPPED_KINDS = frozenset({b"on_chat_model_end", b"on_tool_end", b"on_custom_event", b"on_chain_error"})
_MIDDLEWARE_TAG = "middleware:"


def call_caller(event: Mapping[str, Any]) -> str:
    """The `caller` of a model or tool call outside the conversation, from what the call says of itself."""
    metadata = event.get("metadata") or {}
    if metadata.get("lc_source") == "summarization":
        return SUMMARIZER_CALLER
    for tag in event.get("tags") or ():
        if isinstance(tag, str) and tag.startswith(_MIDDLEWARE_TAG) and len(tag) > len(_MIDDLEWARE_TAG):
            return tag
    return records.subagent_caller(metadata.get("langgraph_node") or event.get("name"))


@dataclass
class _Call:
    """A model or tool call waiting for the state that shows whether it reached the conversation."""

    kind: str  # "ai" or "tool"
    message: dict[str, Any]
    key: str
    caller: str
    tool_call_ids: tuple[str, ...] = ()


class RunMapper:
    """Maps the `events` and `values` parts of one run, in order, to records of that run."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = str(thread_id)
        self.run_id = str(run_id)
        self._malformed = 0
        self._state = StateMapper(thread_id, run_id)
        self._calls: list[_Call] = []
        self._hidden_calls: dict[str, int] = {}  # caller -> model calls outside the conversation
        self._end: Draft | None = None
        self._failed = False
        self._started = False  # the root's start was mapped
        self._values_seen = False  # a `values` part came
        self._marked_by_last_state = 0  # markers made when the last state was read
        # Whether the root's events have no parents (its end is then known by its bytes).
        self._root_unparented = False
        self.ending: str | None = None  # how the journaled run ended (`journal_bridge.host.outcome`)

    @property
    def malformed(self) -> int:
        return self._malformed + self._state.malformed

    # -- public -----------------------------------------------------------

    def new_attempt(self) -> None:
        """The runtime executes the run again (`StateMapper.new_attempt`)."""
        self._state.new_attempt()

    def feed(self, event: str, data: object) -> list[RunEvent]:
        """Records for one stream part (`event` is the SSE event name)."""
        try:
            if event == VALUES_MODE:
                self._values_seen = True
                return self._committed(data)
            if event == EVENTS_MODE:
                return self._from_callback_event(data)
            if event == "error":
                if is_cancel_part(data):
                    return []  # a cancel: the outcome says so, with the server's reason
                return self._fail(records.run_error(data))
            return []
        except Exception as exc:  # noqa: BLE001 - a bad part must never stop a run's journal
            self._malformed += 1
            logger.warning(
                "journal-bridge: skipped a malformed %r part of run %s: %s",
                event,
                self.run_id,
                exc,
            )
            return []

    def needs(self, data: bytes) -> bool:
        """Whether an `events` part, as its JSON bytes, has to be parsed and fed:
        False only for one that `feed` would map to nothing.

        That is a callback this mapper does not map: every node's start and end
        (the states come as `values`) but the root's. Bytes not shaped like the
        server's events are parsed (and counted as malformed if they are).
        """
        kind = _KIND.match(data)
        if kind is None:
            return True
        name = kind.group(1)
        if name == b"on_chain_start":
            return not self._started
        if name == b"on_chain_end":
            if not self._root_unparented:
                return True
            parents = data.rfind(_PARENTS_KEY)
            return parents < 0 or _NO_PARENTS.match(data, parents) is not None
        return name in _MAPPED_KINDS

    @property
    def outcome_wanted(self) -> dict[str, object] | None:
        """What `flush` needs to know from the server (`read_outcome` arguments), or None."""
        if self._failed:
            return None
        if self._end is not None:
            # The root returned: the run succeeded, perhaps paused at an interrupt.
            return {"status": "success", "interrupts": True}
        return {"interrupts": True}

    def flush(self, outcome: RunOutcome | None = None, final_state: object = None) -> list[RunEvent]:
        """What the end of the stream adds: messages only `final_state` shows (a
        stream read in part), the calls no state showed, then how the run ended:
        `run.end` (after `run.interrupt` when the outcome shows interrupts) or,
        for a stream that just stopped, the `run.error` of a cancelled or failed run."""
        out = self._committed(final_state) if isinstance(final_state, Mapping) else self._decide()
        if (announced := self._state.compactions.flush()) is not None:
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
        return [*self._decide(), *self._emit(draft)]

    # -- callbacks ----------------------------------------------------------

    def _from_callback_event(self, data: object) -> list[RunEvent]:
        if not isinstance(data, Mapping):
            raise MalformedPart(f"expected an event object, got {type(data).__name__}")
        kind = data.get("event")
        if not isinstance(kind, str):
            raise MalformedPart("event object without an 'event' name")
        payload = data.get("data") or {}
        if not isinstance(payload, Mapping):
            raise MalformedPart(f"'data' of {kind} is {type(payload).__name__}, not an object")

        if kind == "on_chat_model_end":
            self._calls.append(self._model_call(data, payload))
            return []
        if kind == "on_tool_end":
            self._calls.append(self._tool_call(data, payload))
            return []
        if kind == "on_custom_event":
            if data.get("name") == SUMMARIZATION_EVENT:
                draft = self._state.compactions.announced(payload)
            else:
                draft = records.custom_event(data.get("name"), payload)
            return self._emit(draft) if draft is not None else []
        if not kind.startswith("on_chain") or not self._is_root(data):
            return []
        if kind == "on_chain_start":
            return self._run_start(data, payload)
        if kind == "on_chain_end":
            # `run.end` waits for `flush`: an interrupt the run paused at comes before it.
            output = payload.get("output")
            self._end = records.run_end(output)
            # A run created without `values` shows what it committed here alone.
            return [] if self._values_seen or not isinstance(output, Mapping) else self._committed(output)
        if kind == "on_chain_error":
            return self._fail(records.run_error(payload.get("error")))
        return []

    def _is_root(self, data: Mapping[str, object]) -> bool:
        if str(data.get("run_id")) == self.run_id:
            return True
        parents = data.get("parent_ids")
        return isinstance(parents, list) and not parents

    def _run_start(self, data: Mapping[str, Any], payload: Mapping[str, object]) -> list[RunEvent]:
        if self._started:
            return []
        self._started = True
        self._root_unparented = data.get("parent_ids") == []
        metadata = data.get("metadata") or {}
        graph = metadata.get("graph_id") or data.get("name")
        return self._state.start(graph, metadata.get("assistant_id"), payload.get("input"))

    # -- calls ------------------------------------------------------------------

    @staticmethod
    def _model_call(data: Mapping[str, object], payload: Mapping[str, object]) -> _Call:
        message = message_dict(payload.get("output"))
        if message is None:
            raise MalformedPart("on_chat_model_end without a message output")
        return _Call("ai", message, f"llm:{data.get('run_id')}", call_caller(data))

    @staticmethod
    def _tool_call(data: Mapping[str, object], payload: Mapping[str, object]) -> _Call:
        output = payload.get("output")
        message = message_dict(output) if isinstance(output, Mapping) else None
        ids: tuple[str, ...]
        if message is not None and message.get("type") == "tool":
            ids = (str(message.get("tool_call_id")),) if message.get("tool_call_id") else ()
        else:
            # A Command, or a raw value: what reached the state is its update's tool messages.
            ids = _update_tool_call_ids(output)
            message = {
                "type": "tool",
                "content": output if isinstance(output, str) else json.dumps(output, default=str),
                "name": data.get("name"),
                "tool_call_id": ids[0] if ids else None,
                "id": None,
            }
        return _Call("tool", message, f"tool:{data.get('run_id')}", call_caller(data), ids)

    def _committed(self, state: object) -> list[RunEvent]:
        """A state of the run: the calls it did not show, a marker for each summarizer
        call whose compaction it does not show either, then the messages it committed."""
        compactions = self._state.compactions
        answers = [message_text(c.message).strip() for c in self._calls if c.caller == SUMMARIZER_CALLER]
        # A compaction this state shows without its summary has it from its summarizer.
        compactions.heard(answers[-1] if answers else None)
        committed = self._state.feed(VALUES_MODE, state)
        compactions.heard(None)
        hidden = self._decide()
        # No marker since the last state, announced or shown: the summarizer's call is the marker.
        if compactions.marked == self._marked_by_last_state:
            for answer in filter(None, answers):
                hidden += self._emit(compactions.summarized(answer))
        self._marked_by_last_state = compactions.marked
        return [*hidden, *committed]

    def _decide(self) -> list[RunEvent]:
        """The calls the last state did not show: hidden records, in the order they ended."""
        if not self._calls:
            return []
        calls, self._calls = self._calls, []
        out: list[RunEvent] = []
        for call in calls:
            if call.kind == "ai":
                if self._state.committed(call.message.get("id")):
                    continue
                caller = SUMMARIZER_CALLER if self._is_summary(call.message) else call.caller
                self._hidden_calls[caller] = self._hidden_calls.get(caller, 0) + 1
                draft = records.model_call(call.message, call.key, caller, self._hidden_calls[caller])
            else:
                if any(i in self._state.tool_call_ids for i in call.tool_call_ids):
                    continue
                draft = records.nested_tool_result(call.message, call.key, call.caller)
            out += self._emit(draft)
        return out

    def _is_summary(self, message: Mapping[str, object]) -> bool:
        """An answer that became a compaction's summary: the call was its summarizer."""
        text = message_text(message).strip()
        return bool(text) and any(text in summary for summary in self._state.compactions.summaries)

    def _emit(self, draft: Draft) -> list[RunEvent]:
        return [records.record(self.thread_id, self.run_id, draft)]


def _update_tool_call_ids(output: object) -> tuple[str, ...]:
    """The tool call ids of the tool messages a `Command`'s update carries (as the server sends it)."""
    if not isinstance(output, Mapping):
        return ()
    update = output.get("update")
    if isinstance(update, (list, tuple)):  # `Command(update=[(key, value), ...])`
        update = {k: v for k, v in (u for u in update if isinstance(u, (list, tuple)) and len(u) == 2)}
    messages = update.get("messages") if isinstance(update, Mapping) else None
    if isinstance(messages, (Mapping, str)):
        messages = [messages]
    if not isinstance(messages, (list, tuple)):
        return ()
    found = (message_dict(m) for m in messages)
    return tuple(str(m["tool_call_id"]) for m in found if m and m.get("type") == "tool" and m.get("tool_call_id"))


def map_parts(
    thread_id: str, run_id: str, parts: Iterable[tuple[str, object]], outcome: RunOutcome | None = None
) -> list[RunEvent]:
    """All records of a complete stream (convenience for tests and tools)."""
    mapper = RunMapper(thread_id, run_id)
    out: list[RunEvent] = []
    for event, data in parts:
        out.extend(mapper.feed(event, data))
    out.extend(mapper.flush(outcome))
    return out
