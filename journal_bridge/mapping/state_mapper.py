"""From the `values` and `custom` stream modes to journal records.

The `events` stream mode makes the server run `astream_events`, which streams
every model call instead of invoking it: a run captured that way is executed
differently. A `StateMapper` journals a run from modes that leave execution
alone:

- each `values` part is the thread's state after a step; a message that was
  not in the state before the run and appears in it now is a new conversation
  message, journaled once, in state order, with the id the state gives it;
- a `custom` part named `summarization` (what `TrackingSummarizationMiddleware`
  writes) is the compaction marker; it arrives before the `values` part that
  shows the compacted state, so the marker sits after the messages it
  replaced and before the answer that followed (any other custom event of
  `records.CUSTOM_EVENTS` makes the same record as on the `events` path);
- a summary message new in a state, with no such `custom` part before it
  (a summarization middleware that does not write one, or a protocol v2 run,
  whose stream carries no `custom` parts of middleware), is the same marker,
  read off the states as backfill reads checkpoints: the ids the previous
  state held and this one does not were replaced;
- the last state is the run's output (`run.end`); an `error` part is `run.error`;
- `__interrupt__` in a `values` part (a run paused at `interrupt()`) is
  `run.interrupt`, journaled before `run.end`.

Whether a stream that just stopped was a cancelled run, or a failure whose
`error` part was missed, comes with the run's outcome
(`journal_bridge.host.outcome`) given to `flush`.

It yields the same message, middleware and outputs records as the `events`
mapper (`journal_bridge.mapping.events_mapper`), built by the same functions
(`journal_bridge.model.records`), with the same keys.

Protocol v2 runs (`POST /threads/{id}/commands`) stream the same modes
wrapped in an envelope, `{"type": "event", "method": mode, "params":
{"namespace": [...], "data": ...}}`, subgraphs included: the root's data is
read as the plain part would be, subgraph parts are not the conversation.

Which messages belong to the run: those of the first `values` part read
that come before the run's input messages (found by type and content, now
with their ids) were there before the run and are not journaled again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from journal_bridge.model import records
from journal_bridge.host.compat import is_cancel_part
from journal_bridge.model.envelope import MIDDLEWARE_SUMMARIZE, RunEvent
from journal_bridge.host.outcome import CANCELLED, COMPLETED, ERRORED, INTERRUPTED, RunOutcome
from journal_bridge.model.records import Draft, message_dict

logger = logging.getLogger(__name__)

__all__ = ["StateMapper"]

VALUES_MODE = "values"
CUSTOM_MODE = "custom"
INTERRUPT_KEY = "__interrupt__"


def _unwrap(event: str, data: Any) -> tuple[str, Any]:
    """A protocol v2 part as the plain part of the root graph; `("", None)` for a subgraph's."""
    if not (isinstance(data, Mapping) and data.get("type") == "event" and isinstance(data.get("params"), Mapping)):
        return event, data
    params = data["params"]
    if params.get("namespace"):
        return "", None
    return str(data.get("method") or event), params.get("data")


class StateMapper:
    """Maps the `values`/`custom`/`error` parts of one run, in order, to records.

    Call `start(...)` first (the run's graph, assistant and input, from the run
    object), then `feed` each part, then `flush` when the stream ends.
    """

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = str(thread_id)
        self.run_id = str(run_id)
        self.malformed = 0
        self._input_count: int | None = None
        self._inputs: list[tuple[Any, Any]] = []
        self._seen: set[str] | None = None
        self._calls = 0
        self._marked: set[str] = set()  # summary ids a marker was journaled for
        self._previous_ids: list[str] = []
        self._previous_summaries: set[str] = set()
        self._last_state: Mapping[str, Any] | None = None
        self._failed = False
        self._interrupts: list[dict[str, Any]] = []
        self.ending: str | None = None  # how the journaled run ended (`journal_bridge.host.outcome`)

    def start(self, graph: str | None, assistant_id: str | None, run_input: Any) -> list[RunEvent]:
        """`run.start`; the run's input tells which messages of the first state are new."""
        self._inputs = [(m.get("type"), m.get("content")) for m in records.input_messages(run_input)]
        self._input_count = len(self._inputs)
        return [self._record(records.run_start(graph, assistant_id, run_input))]

    def feed(self, event: str, data: Any) -> list[RunEvent]:
        """Records for one stream part (`event` is the SSE event name)."""
        try:
            event, data = _unwrap(event, data)
            if event == VALUES_MODE:
                return self._state(data)
            if event == CUSTOM_MODE:
                if not isinstance(data, Mapping):
                    return []
                draft = records.custom_event(data.get("event"), data)
                if draft is not None and draft.event_type == MIDDLEWARE_SUMMARIZE and data.get("summary_message_id"):
                    # Its summary message is marked: a later state does not mark it again.
                    self._marked.add(str(data["summary_message_id"]))
                return [self._record(draft)] if draft is not None else []
            if event == "error":
                if is_cancel_part(data):
                    return []  # a cancel: the outcome says so, with the server's reason
                self._failed = True
                self.ending = ERRORED
                return [self._record(records.run_error(data))]
            return []
        except Exception as exc:  # noqa: BLE001 - a bad part must never stop a run's journal
            self.malformed += 1
            logger.warning("journal-bridge: skipped a malformed %r part of run %s: %s", event, self.run_id, exc)
            return []

    @property
    def outcome_wanted(self) -> dict[str, Any] | None:
        """What `flush` needs to know from the server (`read_outcome` arguments), or None.

        Only the status: the stream itself shows interrupts."""
        return None if self._failed else {}

    def flush(self, final_state: Any = None, outcome: RunOutcome | None = None) -> list[RunEvent]:
        """What the end of the stream adds: messages only `final_state` shows
        (a stream read in part), then how the run ended: the `run.error` of a
        cancelled or failed run, else `run.end` (after `run.interrupt` when
        the run paused). An unknown outcome counts as returned."""
        out = self._state(final_state) if isinstance(final_state, Mapping) else []
        if self._failed or self.ending is not None:
            return out
        if outcome is not None and outcome.cancelled:
            self.ending = CANCELLED
            return [*out, self._record(records.run_cancelled(outcome.reason, outcome.cancel_action))]
        if outcome is not None and outcome.failed:
            self._failed, self.ending = True, ERRORED
            return [*out, self._record(records.run_error(outcome.failure()))]
        if self._last_state is None:
            return out
        interrupts = self._interrupts or (list(outcome.interrupts) if outcome is not None else [])
        if interrupts:
            out.append(self._record(records.run_interrupt(interrupts)))
        self.ending = INTERRUPTED if interrupts else COMPLETED
        out.append(self._record(records.run_end(self._last_state)))
        return out

    # -- internals -----------------------------------------------------------

    def _state(self, state: Any) -> list[RunEvent]:
        if not isinstance(state, Mapping):
            raise TypeError(f"a values part is {type(state).__name__}, not an object")
        # What the run waits on is what its last state shows.
        self._interrupts = records.interrupt_values(state.get(INTERRUPT_KEY))
        if INTERRUPT_KEY in state:
            state = {key: value for key, value in state.items() if key != INTERRUPT_KEY}
            if not state:
                return []
        raw = state.get("messages")
        self._last_state = state
        if not isinstance(raw, list):
            return []
        messages = [m for m in (message_dict(x) for x in raw) if m]
        if self._seen is None:
            # The first state: everything before the run's input was there before.
            before = messages[: self._input_at(messages)]
            self._seen = {str(m["id"]) for m in before if m.get("id")}
        out: list[RunEvent] = []
        ids = [str(m["id"]) for m in messages if m.get("id")]
        for message in messages:
            message_id = message.get("id")
            if not message_id or str(message_id) in self._seen:
                continue
            self._seen.add(str(message_id))
            if records.is_summary_message(message):
                if str(message_id) not in self._marked and self._previous_ids:
                    self._marked.add(str(message_id))
                    out.append(self._record(records.summarize(self._compaction(message, ids))))
                continue
            call = self._calls + 1 if message.get("type") == "ai" else 0
            draft = records.conversation_message(message, f"message:{message_id}", call)
            if draft is not None:
                self._calls = call or self._calls
                out.append(self._record(draft))
        self._previous_ids = ids
        self._previous_summaries = {str(m["id"]) for m in messages if m.get("id") and records.is_summary_message(m)}
        return out

    def _input_at(self, messages: list[dict[str, Any]]) -> int:
        """Where the run's input starts in the first state read: the last place its
        messages (type and content) appear, which is the end of the run's first
        state and earlier in a later one (a stream joined after the run began);
        without a match, the end less the input's length."""
        count = self._input_count or 0
        if not count:
            return len(messages)
        for start in range(len(messages) - count, -1, -1):
            window = messages[start : start + count]
            if [(m.get("type"), m.get("content")) for m in window] == self._inputs:
                return start
        return max(0, len(messages) - count)

    def _compaction(self, summary: Mapping[str, Any], ids: list[str]) -> dict[str, Any]:
        """The summarization payload a compaction implies: what the previous state held and this one lost."""
        from journal_bridge.capture.backfill import summary_text

        present = set(ids)
        replaced = [i for i in self._previous_ids if i not in present]
        earlier = [i for i in replaced if i in self._previous_summaries]
        preserved = [i for i in self._previous_ids if i in present]
        return {
            "event": "summarization",
            "replaced_count": len(replaced),
            "condensed_count": len(replaced) - len(earlier),
            "preserved_count": len(preserved),
            "replaced_message_ids": replaced,
            "previous_summary_ids": earlier,
            "preserved_message_ids": preserved,
            "summary_message_id": str(summary["id"]),
            "summary": summary_text(dict(summary)),
            "source": "state",
        }

    def _record(self, draft: Draft) -> RunEvent:
        return records.record(self.thread_id, self.run_id, draft)
