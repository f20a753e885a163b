"""The client's own view of a conversation, and how a journal's history compares with it.

The truth is every message id in any state the client received -- each `values`
frame of a stream; for `runs.wait`, the states of the thread's checkpoints the
run committed (what the same client reads from the thread's history: a wait
returns the last one alone) and its result; and, for a client that asked for no
`values`, the thread's state after each turn -- in the order first seen. A
summary a harness keeps in the state is state, not conversation, and is left
out: a message with `lc_source == "summarization"` (langchain's and deepagents'
summarization), one named `summary`, and langmem's running summary (a
`SystemMessage` "Summary of the conversation so far: ..."). Only human, AI and
tool messages of the `messages` key count. The compactions to expect are the
summarizer runs the model logged (`tests/harness/graphs/scripted_model.py`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MESSAGE_TYPES = ("human", "ai", "tool")
_LANGMEM_SUMMARY = "Summary of the conversation so far:"
# History items that are not messages.
_NOT_MESSAGES = ("summary_marker", "run_status")


def is_state_summary(message: dict[str, Any]) -> bool:
    """Whether a message in a state is a summary the harness keeps, not part of the conversation."""
    kwargs = message.get("additional_kwargs") or {}
    if kwargs.get("lc_source") == "summarization" or message.get("name") == "summary":
        return True
    content = message.get("content")
    return message.get("type") == "system" and isinstance(content, str) and content.startswith(_LANGMEM_SUMMARY)


@dataclass
class ClientView:
    """Message ids in the order the client first saw them in a state, and how many states it saw."""

    ids: list[str] = field(default_factory=list)
    states: int = 0
    _seen: set[str] = field(default_factory=set)

    def saw_state(self, state: Any) -> None:
        if not isinstance(state, dict):
            return
        self.states += 1
        for message in state.get("messages") or []:
            if not isinstance(message, dict) or not message.get("id"):
                continue
            if is_state_summary(message):
                continue
            if message.get("type") in MESSAGE_TYPES and message["id"] not in self._seen:
                self._seen.add(message["id"])
                self.ids.append(message["id"])


def summarizer_runs(log: Path, thread_id: str) -> int:
    """How many summarizer calls the model logged for `thread_id`."""
    if not log.exists():
        return 0
    lines = (json.loads(line) for line in log.read_text().splitlines() if line.strip())
    return sum(1 for line in lines if line.get("summarizer") and line.get("thread_id") == thread_id)


@dataclass
class Comparison:
    """A journal's history of a thread against the client's view: what a matrix cell prints and asserts."""

    truth: int
    journaled: int
    missing: list[str]
    unseen: list[str]
    duplicates: list[str]
    order_ok: bool
    markers: int
    summarizer_runs: int
    markers_without_summary: int

    @property
    def holds(self) -> bool:
        return (not self.missing and not self.unseen and not self.duplicates and self.order_ok
                and self.markers == self.summarizer_runs and not self.markers_without_summary)

    def problems(self) -> list[str]:
        found = []
        if self.missing:
            found.append(f"{len(self.missing)} of the client's {self.truth} messages missing: {self.missing[:5]}")
        if self.unseen:
            found.append(f"{len(self.unseen)} messages the client never saw: {self.unseen[:5]}")
        if self.duplicates:
            found.append(f"{len(self.duplicates)} duplicated ids: {self.duplicates[:5]}")
        if not self.order_ok:
            found.append("not in the order the client first saw them")
        if self.markers != self.summarizer_runs:
            found.append(f"{self.markers} markers for {self.summarizer_runs} summarizer runs")
        if self.markers_without_summary:
            found.append(f"{self.markers_without_summary} markers without a summary")
        return found


def compare(view: ClientView, items: list[dict[str, Any]], runs: int) -> Comparison:
    journaled = [i.get("id") for i in items if i.get("type") not in _NOT_MESSAGES]
    markers = [i for i in items if i.get("type") == "summary_marker"]
    truth = set(view.ids)
    counts: dict[str, int] = {}
    for message_id in journaled:
        if message_id is not None:
            counts[message_id] = counts.get(message_id, 0) + 1
    first_seen = list(dict.fromkeys(i for i in journaled if i in truth))
    return Comparison(
        truth=len(view.ids),
        journaled=len(journaled),
        missing=[i for i in view.ids if i not in counts],
        # A message without an id is one the client cannot have seen as such: each counts.
        unseen=[i for i in journaled if i is None] + [i for i in counts if i not in truth],
        duplicates=[i for i, n in counts.items() if n > 1],
        order_ok=first_seen == [i for i in view.ids if i in counts],
        markers=len(markers),
        summarizer_runs=runs,
        markers_without_summary=sum(1 for m in markers if not m.get("summary")),
    )
