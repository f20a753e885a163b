"""Compactions, whatever the middleware: found in what a step did to the state.

A summarization middleware compacts by replacing `messages`: a
`RemoveMessage` (all, or by id) and the messages it keeps. Where it keeps the
summary differs -- a message marked `lc_source: summarization` in `messages`
(upstream `SummarizationMiddleware`), or a state key of its own (current
deer-flow's `summary_text`) -- and so does what it announces: the full
`summarization` custom event (`TrackingSummarizationMiddleware`), only
`{summary, replaced_count}` (deer-flow's), or nothing. A `Compactions` of one
run journals one marker per compaction in every case:

- a full announcement is the marker, and the compaction it names is not
  marked again when the state shows it;
- a compaction seen in the state (a node's update on the `events` path, two
  successive `values` states on the other) is the marker, its replaced,
  preserved and condensed ids read off the states;
- an announcement without ids waits for the compaction the state shows and
  adds what it says (the summary, the counts) to its marker; one the state
  never shows is journaled alone when the run ends.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from journal_bridge.model import records
from journal_bridge.model.records import Draft

__all__ = ["Compactions", "condensed_view", "is_removal", "message_ids", "message_text", "summary_ids", "summary_text"]

REMOVE_ALL = "__remove_all__"
SYSTEM = "system"


def _summary_prefix() -> tuple[str, str]:
    """The text upstream puts around a summary, read from upstream itself."""
    try:
        from langchain.agents.middleware.summarization import SummarizationMiddleware

        sentinel = "\x00journal-bridge\x00"
        (message,) = SummarizationMiddleware._build_new_messages(sentinel)
        before, _, after = str(message.content).partition(sentinel)
        return before, after
    except Exception:  # noqa: BLE001 - an upstream change: fall back to the whole content
        return "", ""


PREFIX, SUFFIX = _summary_prefix()


def message_text(message: Mapping[str, object]) -> str:
    """A message's text: its content, or its content blocks' text joined."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content or "")


def summary_text(message: Mapping[str, object]) -> str:
    """The summary a summary message carries, without upstream's template around it."""
    text = message_text(message)
    if PREFIX and text.startswith(PREFIX) and text.endswith(SUFFIX):
        return text[len(PREFIX) : len(text) - len(SUFFIX) if SUFFIX else None]
    return text


def is_removal(message: object) -> bool:
    return isinstance(message, Mapping) and message.get("type") == "remove"


def message_ids(messages: Sequence[Mapping[str, object]]) -> list[str]:
    """The ids of `messages` (those that have one), as text."""
    return [str(m["id"]) for m in messages if m.get("id")]


def summary_ids(messages: Sequence[Mapping[str, object]]) -> set[str]:
    """The ids of the messages among `messages` that are state rather than
    conversation: summaries a compaction put there (`records.is_summary_message`)
    and system messages (a summarizer node's running summary, a prompt); a
    compaction that replaces only these condenses nothing."""
    return {
        str(m["id"]) for m in messages
        if m.get("id") and (m.get("type") == SYSTEM or records.is_summary_message(m))
    }


def _summary_key(before: Mapping[str, object], after: Mapping[str, object]) -> tuple[str, str] | None:
    """A state key other than `messages` that holds the summary: one that now holds
    new text (a key named for it first), else a key named for it whose text a
    later compaction wrote again unchanged."""
    texts = [(key, value) for key, value in after.items() if key != "messages" and isinstance(value, str) and value]
    changed = [(key, value) for key, value in texts if before.get(key) != value]
    changed.sort(key=lambda kv: "summary" not in kv[0].lower())
    if changed:
        return changed[0]
    return next(((key, value) for key, value in texts if "summary" in key.lower()), None)


_SUMMARY_TAGS = re.compile(r"<summary>\s*(.*?)\s*</summary>", re.DOTALL)


def _view_summary(value: object) -> str | None:
    """The text of a condensed view's summary (a message, or text)."""
    if isinstance(value, Mapping):
        text = summary_text(value)
    elif isinstance(value, str):
        text = value
    else:
        return None
    # A summary wrapped in a template that names the summary part.
    inner = _SUMMARY_TAGS.search(text)
    return inner.group(1) if inner else text


def _view_of(value: object, history: Sequence[str]) -> tuple[frozenset[str], str | None] | None:
    """What a state value says the model no longer sees, as (message ids, summary), or None.

    Two shapes keep the messages and show the model a summary instead of the
    oldest ones: an index into the state's messages with the summary message
    (`cutoff_index`, `summary_message`: deepagents), or the summarized ids
    with the summary's text (`summarized_message_ids`, `summary`: langmem's
    running summary)."""
    if not isinstance(value, Mapping):
        return None
    cutoff = value.get("cutoff_index")
    if isinstance(cutoff, int) and not isinstance(cutoff, bool) and "summary_message" in value:
        return frozenset(history[: max(cutoff, 0)]), _view_summary(value.get("summary_message"))
    summarized = value.get("summarized_message_ids")
    if isinstance(summarized, (list, tuple, set, frozenset)) and "summary" in value:
        return frozenset(str(i) for i in summarized if i), _view_summary(value.get("summary"))
    return None


def condensed_view(rest: Mapping[str, object], history: Sequence[str]) -> tuple[frozenset[str], str | None] | None:
    """The condensed view a state's keys but `messages` hold (`_view_of`), looked
    for in each key's value and one level inside it; None when there is none."""
    for value in rest.values():
        if not isinstance(value, Mapping):
            continue
        found = _view_of(value, history)
        if found is None:
            found = next((v for v in map(lambda inner: _view_of(inner, history), value.values()) if v), None)
        if found is not None:
            return found
    return None


class Compactions:
    """The compactions of one run, each marked once (see the module docstring)."""

    def __init__(self) -> None:
        self._marked: set[str] = set()  # summary message ids marked
        self._replaced: list[frozenset[str]] = []  # the replaced ids of each marker so far
        self._waiting: Mapping[str, Any] | None = None  # an announcement without ids
        self._view: frozenset[str] | None = None  # the messages the model no longer sees
        self.summaries: list[str] = []  # the summaries of this run's markers, in order
        self._heard: str | None = None  # a summarizer's answer no marker has taken yet
        self.marked = 0  # markers made so far

    def heard(self, answer: str | None) -> None:
        """A summarizer call's answer: the summary of a compaction the next state shows
        without one (None: the state was read, the answer is not wanted any more)."""
        self._heard = answer or None

    def announced(self, payload: Mapping[str, object]) -> Draft | None:
        """A `summarization` custom event: the marker, or None while it waits for the state."""
        replaced = payload.get("replaced_message_ids")
        summary_id = payload.get("summary_message_id")
        if not summary_id and not replaced:
            # The summary as the state would show it: without upstream's template.
            summary = payload.get("summary")
            self._waiting = {**payload, "summary": summary_text({"content": summary}) if summary else summary}
            return None
        if summary_id:
            self._marked.add(str(summary_id))
        if isinstance(replaced, list):
            self._replaced.append(frozenset(str(i) for i in replaced))
        return self._marker(payload)

    def from_states(
        self,
        before: Mapping[str, object],
        previous_ids: list[str],
        previous_summaries: set[str],
        after: Mapping[str, object],
        now: list[dict[str, object]],
    ) -> Draft | None:
        """Two successive states: a compaction when messages left.

        Of the state `before` only what a mapper keeps between states: its keys
        but `messages`, its messages' ids (`message_ids`) and its summaries' ids
        (`summary_ids`); `now` are the messages of `after` as message dicts."""
        present = set(message_ids(now))
        if not any(i not in present for i in previous_ids):
            return None
        return self._compaction(previous_ids, previous_summaries, now, before, after)

    def from_view(self, rest: Mapping[str, object], history: Sequence[str], summaries: set[str]) -> Draft | None:
        """A state's condensed view (`condensed_view`): a compaction when the model
        now sees fewer of the messages than before, though the state keeps them.

        `rest` are the state's keys but `messages`, `history` its messages' ids,
        `summaries` the ids among them that are state (`summary_ids`)."""
        view = condensed_view(rest, history)
        if view is None:
            return None
        condensed_ids, summary = view
        previous, self._view = self._view or frozenset(), condensed_ids
        new = [i for i in history if i in condensed_ids and i not in previous and i not in summaries]
        if not new:
            return None
        if any(set(new) <= earlier for earlier in self._replaced):
            return None  # the same compaction, marked from the messages it removed
        self._replaced.append(frozenset(new))
        present = [i for i in history if i not in condensed_ids]
        payload: dict[str, Any] = {
            "event": "summarization",
            "replaced_count": len(new),
            "condensed_count": len(new),
            "preserved_count": len(present),
            "replaced_message_ids": new,
            "previous_summary_ids": [],
            "preserved_message_ids": present,
            "summary_message_id": None,
            "summary": summary,
            "kept_in_state": True,
            "source": "state",
        }
        return self._marker(payload)

    def summary_added(self, message: Mapping[str, object]) -> Draft | None:
        """A summary message new in the state whose compaction no state showed: an
        agent run as a sub-graph compacted what its model sees, and the parent's
        messages, merged by id, keep what it replaced. The marker has the summary;
        which messages it condensed the parent's state cannot tell."""
        summary_id = str(message.get("id") or "")
        if not summary_id or summary_id in self._marked:
            return None
        self._marked.add(summary_id)
        payload: dict[str, Any] = {
            "event": "summarization",
            "replaced_count": None,
            "condensed_count": None,
            "preserved_count": None,
            "replaced_message_ids": None,
            "previous_summary_ids": None,
            "summary_message_id": summary_id,
            "summary": summary_text(message),
            "nested": True,
            "source": "state",
        }
        return self._marker(payload)

    def seen_view(self, rest: Mapping[str, object], history: Sequence[str]) -> None:
        """The condensed view of a state that was there before the run: not this run's compaction."""
        view = condensed_view(rest, history)
        self._view = view[0] if view is not None else frozenset()

    def flush(self) -> Draft | None:
        """An announcement the state never showed: its marker alone."""
        waiting, self._waiting = self._waiting, None
        return self._marker(waiting) if waiting is not None else None

    def summarized(self, answer: str) -> Draft:
        """A summarizer call whose compaction no state shows: an agent run as a
        sub-graph that hands its parent only its last message compacted what its
        own model sees. The marker is the call's: its answer, no counts."""
        payload: dict[str, Any] = {
            "event": "summarization",
            "replaced_count": None,
            "condensed_count": None,
            "preserved_count": None,
            "summary": answer,
            "nested": True,
            "source": "summarizer_call",
        }
        return self._marker(payload)

    def _marker(self, payload: Mapping[str, object]) -> Draft:
        self.marked += 1
        heard, self._heard = self._heard, None
        if not payload.get("summary") and heard:
            payload = {**payload, "summary": heard}
        summary = payload.get("summary")
        if isinstance(summary, str) and summary:
            self.summaries.append(summary)
        return records.summarize(payload)

    def _compaction(
        self,
        previous_ids: list[str],
        summaries: set[str],
        after: list[dict[str, object]],
        state_before: Mapping[str, object],
        state_after: Mapping[str, object],
    ) -> Draft | None:
        present = set(message_ids(after))
        replaced = [i for i in previous_ids if i not in present]
        if not replaced:
            return None
        summary = next(
            (m for m in after if m.get("id") and str(m["id"]) not in summaries and _is_state_summary(m)),
            None,
        )
        if summary is not None and str(summary["id"]) in self._marked:
            return None  # announced in full already
        if any(set(replaced) <= earlier for earlier in self._replaced):
            return None
        earlier = [i for i in replaced if i in summaries]
        if len(earlier) == len(replaced) and self._waiting is None:
            # Only summaries left, the same one written again: nothing condensed, no summarizer ran.
            return None
        payload: dict[str, Any] = {
            "event": "summarization",
            "replaced_count": len(replaced),
            "condensed_count": len(replaced) - len(earlier),
            "preserved_count": len([i for i in previous_ids if i in present]),
            "replaced_message_ids": replaced,
            "previous_summary_ids": earlier,
            "preserved_message_ids": [i for i in previous_ids if i in present],
            "summary_message_id": str(summary["id"]) if summary is not None else None,
            "summary": summary_text(summary) if summary is not None else None,
            "source": "state",
        }
        # The view it left is this compaction's: a later view is measured from it.
        view = condensed_view({k: v for k, v in state_after.items() if k != "messages"}, message_ids(after))
        if summary is None and (kept := _summary_key(state_before, state_after)) is not None:
            payload["summary_key"], payload["summary"] = kept
        if summary is None and not payload["summary"] and view is not None and view[1]:
            payload["summary"] = view[1]
        waiting, self._waiting = self._waiting, None
        if waiting is not None:
            # What the announcement says that the state does not.
            payload.update({k: v for k, v in waiting.items() if v is not None and payload.get(k) is None})
            payload["summary"] = waiting.get("summary") or payload["summary"]
        if summary is not None:
            self._marked.add(str(summary["id"]))
        self._replaced.append(frozenset(replaced))
        if view is not None:
            self._view = view[0]
        return self._marker(payload)


def _is_state_summary(message: Mapping[str, object]) -> bool:
    """A message a compaction put in the state to stand for what it replaced."""
    return message.get("type") == SYSTEM or records.is_summary_message(message)
