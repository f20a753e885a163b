"""From the `values` and `custom` stream modes to journal records.

The `events` stream mode makes the server run `astream_events`, which streams
every model call instead of invoking it: a run captured that way is executed
differently. A `StateMapper` journals a run from modes that leave execution
alone:

- each `values` part is the thread's state after a step; a message that was
  not in the state before the run and appears in it now is a new conversation
  message, journaled once, in state order, with the id the state gives it;
- a compaction -- messages a state held and the next one does not -- is a
  marker, placed before the messages new in the state that shows it, whatever
  the middleware announced (`journal_bridge.mapping.compactions`): a
  `custom` part named `summarization` with ids is the marker itself, one with
  only `{summary, replaced_count}` adds to the marker the states show (any
  other custom event of `records.CUSTOM_EVENTS` makes the same record as on
  the `events` path);
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
from itertools import repeat
from typing import Any

from journal_bridge.model import records
from journal_bridge.host.compat import is_cancel_part
from journal_bridge.mapping.compactions import Compactions, message_ids, summary_ids
from journal_bridge.model.envelope import SUMMARIZATION_EVENT, RunEvent
from journal_bridge.model.errors import MalformedPart
from journal_bridge.host.outcome import CANCELLED, COMPLETED, ERRORED, INTERRUPTED, RunOutcome
from journal_bridge.model.records import Draft

logger = logging.getLogger(__name__)

__all__ = ["StateMapper"]

VALUES_MODE = "values"
CUSTOM_MODE = "custom"
INTERRUPT_KEY = "__interrupt__"


def _unwrap(event: str, data: object) -> tuple[str, object]:
    """A protocol v2 part as the plain part of the root graph; `("", None)` for a subgraph's."""
    if not (isinstance(data, Mapping) and data.get("type") == "event" and isinstance(data.get("params"), Mapping)):
        return event, data
    params = data["params"]
    if params.get("namespace"):
        return "", None
    return str(data.get("method") or event), params.get("data")


def _raw_id(message: object) -> object:
    """A state's message's id as the part gives it (a dict's, or a message object's)."""
    return message.get("id") if isinstance(message, Mapping) else getattr(message, "id", None)


def _raw_ids(raw: list[Any]) -> list[object]:
    """The ids of a state's messages as the part gives them (`_raw_id` of each)."""
    try:
        # Parsed JSON: plain dicts, read in one C loop (a state holds the thread's history).
        return list(map(dict.get, raw, repeat("id")))
    except TypeError:  # message objects, tuples, text
        return [_raw_id(x) for x in raw]


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
        self.assistant_id: str | None = None  # the run's, once `start` knows it
        self._seen: set[str] | None = None
        self.tool_call_ids: set[str] = set()  # of the tool messages new in the run's states
        self._calls = 0
        self._compactions = Compactions()
        # Of the last state only what the next one and the run's end need, not the
        # state: a parsed state holds the thread's history, and one kept while the
        # run goes on would outlive young collections into the oldest generation.
        self._end: Draft | None = None  # its `run.end`
        self._last_rest: Mapping[str, Any] = {}  # its keys but `messages`
        self._last_ids: list[Any] | None = None  # its messages' ids as the part gave them
        self._last_history: list[str] | None = None  # its messages' ids as text (`message_ids`)
        self._last_summaries: set[str] = set()  # its summaries' ids
        self._failed = False
        self._interrupts: list[dict[str, Any]] = []
        self.ending: str | None = None  # how the journaled run ended (`journal_bridge.host.outcome`)

    def start(self, graph: str | None, assistant_id: str | None, run_input: object) -> list[RunEvent]:
        """`run.start`; the run's input tells which messages of the first state are new."""
        self.assistant_id = assistant_id
        inputs = records.input_messages(run_input)
        self._inputs = [(m.get("type"), m.get("content")) for m in inputs]
        self._input_count = len(self._inputs)
        return [self._record(records.run_start(graph, assistant_id, run_input, inputs))]

    def feed(self, event: str, data: object) -> list[RunEvent]:
        """Records for one stream part (`event` is the SSE event name)."""
        try:
            event, data = _unwrap(event, data)
            if event == VALUES_MODE:
                return self._state(data)
            if event == CUSTOM_MODE:
                if not isinstance(data, Mapping):
                    return []
                if data.get("event") == SUMMARIZATION_EVENT:
                    draft = self._compactions.announced(data)
                else:
                    draft = records.custom_event(data.get("event"), data)
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

    def flush(self, final_state: object = None, outcome: RunOutcome | None = None) -> list[RunEvent]:
        """What the end of the stream adds: messages only `final_state` shows
        (a stream read in part), then how the run ended: the `run.error` of a
        cancelled or failed run, else `run.end` (after `run.interrupt` when
        the run paused). An unknown outcome counts as returned."""
        out = self._state(final_state) if isinstance(final_state, Mapping) else []
        if (announced := self._compactions.flush()) is not None:
            out.append(self._record(announced))
        if self._failed or self.ending is not None:
            return out
        if outcome is not None and outcome.cancelled:
            self.ending = CANCELLED
            return [*out, self._record(records.run_cancelled(outcome.reason, outcome.cancel_action))]
        if outcome is not None and outcome.failed:
            self._failed, self.ending = True, ERRORED
            return [*out, self._record(records.run_error(outcome.failure()))]
        if self._end is None:
            return out
        interrupts = self._interrupts or (list(outcome.interrupts) if outcome is not None else [])
        if interrupts:
            out.append(self._record(records.run_interrupt(interrupts)))
        self.ending = INTERRUPTED if interrupts else COMPLETED
        out.append(self._record(self._end))
        return out

    # -- internals -----------------------------------------------------------

    def _state(self, state: object) -> list[RunEvent]:
        if not isinstance(state, Mapping):
            raise MalformedPart(f"a values part is {type(state).__name__}, not an object")
        # What the run waits on is what its last state shows.
        self._interrupts = records.interrupt_values(state.get(INTERRUPT_KEY))
        if INTERRUPT_KEY in state:
            state = {key: value for key, value in state.items() if key != INTERRUPT_KEY}
            if not state:
                return []
        raw = state.get("messages")
        self._end = records.run_end(state)
        previous_rest, self._last_rest = self._last_rest, {k: v for k, v in state.items() if k != "messages"}
        previous_ids, self._last_ids = self._last_ids, None
        previous_history, self._last_history = self._last_history, None
        if not isinstance(raw, list):
            return []
        ids = _raw_ids(raw)
        out: list[RunEvent] = []
        if (
            self._seen is not None
            and previous_ids is not None
            and previous_history is not None
            and ids[: len(previous_ids)] == previous_ids
        ):
            # The last state's messages, then new ones (a thread's usual step): none
            # left, and those before were seen. Only the new ones are converted, so a
            # step costs its own messages, not the thread's whole history.
            messages = records.message_dicts(raw[len(previous_ids) :])
            history = previous_history + message_ids(messages)
            self._last_summaries |= summary_ids(messages)
            if (viewed := self._compactions.from_view(self._last_rest, history, self._last_summaries)) is not None:
                out.append(self._record(viewed))
        elif self._seen is None:
            # The first state: everything before the run's input was there before.
            if records.all_message_dicts(raw):
                # Parsed JSON: the thread's history is read in place, the run's own copied.
                at = self._input_at(raw)
                self._seen = {str(i) for i in ids[:at] if i}
                messages = [dict(m) for m in raw[at:]]
                history = message_ids(raw)
                self._last_summaries = summary_ids(raw)
            else:
                messages = records.message_dicts(raw)
                before = messages[: self._input_at(messages)]
                self._seen = {str(m["id"]) for m in before if m.get("id")}
                history = message_ids(messages)
                self._last_summaries = summary_ids(messages)
            # What the model was shown instead of older messages before the run is not its compaction.
            self._compactions.seen_view(self._last_rest, history)
        else:
            messages = records.message_dicts(raw)
            # A compaction comes before the messages new in the state that shows it.
            compaction = (
                self._compactions.from_states(previous_rest, previous_history, self._last_summaries, state, messages)
                if previous_history is not None
                else None
            )
            history = message_ids(messages)
            summaries = summary_ids(messages)
            if compaction is None:
                compaction = self._compactions.from_view(self._last_rest, history, summaries)
            if compaction is not None:
                out.append(self._record(compaction))
            self._last_summaries = summaries
        self._last_ids, self._last_history = ids, history
        for message in messages:
            message_id = message.get("id")
            if not message_id or str(message_id) in self._seen:
                continue
            self._seen.add(str(message_id))
            if message.get("type") == "tool" and message.get("tool_call_id"):
                self.tool_call_ids.add(str(message["tool_call_id"]))
            if records.is_summary_message(message):
                # State, not conversation: its marker stands for it. One no removal
                # showed is a compaction inside a sub-graph (an agent run as a node).
                if (nested := self._compactions.summary_added(message)) is not None:
                    out.append(self._record(nested))
                continue
            call = self._calls + 1 if message.get("type") == "ai" else 0
            draft = records.conversation_message(message, f"message:{message_id}", call)
            if draft is not None:
                self._calls = call or self._calls
                out.append(self._record(draft))
        return out

    def new_attempt(self) -> None:
        """The runtime executes the run again: its next state follows the state the
        attempt went on from, not the killed attempt's last one, and what that one
        held beyond it is no compaction."""
        self._last_ids = self._last_history = None

    def committed(self, message_id: object) -> bool:
        """Whether a message with this id was in a state of the run's thread the mapper read."""
        return self._seen is not None and message_id is not None and str(message_id) in self._seen

    @property
    def compactions(self) -> Compactions:
        """The run's compactions: an announcement read elsewhere (a callback) adds to them."""
        return self._compactions

    def _input_at(self, messages: list[dict[str, object]]) -> int:
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

    def _record(self, draft: Draft) -> RunEvent:
        return records.record(self.thread_id, self.run_id, draft)
