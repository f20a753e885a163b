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

from collections.abc import Mapping, Sequence
from typing import Any

from journal_bridge.model import records
from journal_bridge.model.records import Draft

__all__ = ["Compactions", "is_removal", "message_ids", "summary_ids", "summary_text"]

REMOVE_ALL = "__remove_all__"


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


def summary_text(message: Mapping[str, Any]) -> str:
    """The summary a summary message carries, without upstream's template around it."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    text = str(content or "")
    if PREFIX and text.startswith(PREFIX) and text.endswith(SUFFIX):
        return text[len(PREFIX) : len(text) - len(SUFFIX) if SUFFIX else None]
    return text


def is_removal(message: Any) -> bool:
    return isinstance(message, Mapping) and message.get("type") == "remove"


def message_ids(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ids of `messages` (those that have one), as text."""
    return [str(m["id"]) for m in messages if m.get("id")]


def summary_ids(messages: Sequence[Mapping[str, Any]]) -> set[str]:
    """The ids of the summaries a compaction put among `messages` (marked in their
    `additional_kwargs`, empty on most messages: looked at first)."""
    return {
        str(m["id"]) for m in messages
        if m.get("additional_kwargs") and m.get("id") and records.is_summary_message(m)
    }


def _summary_key(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[str, str] | None:
    """A state key other than `messages` that now holds new text: where the summary went
    (a key named for it first)."""
    changed = [
        (key, value) for key, value in after.items()
        if key != "messages" and isinstance(value, str) and value and before.get(key) != value
    ]
    changed.sort(key=lambda kv: "summary" not in kv[0].lower())
    return changed[0] if changed else None


class Compactions:
    """The compactions of one run, each marked once (see the module docstring)."""

    def __init__(self) -> None:
        self._marked: set[str] = set()  # summary message ids marked
        self._replaced: list[frozenset[str]] = []  # the replaced ids of each marker so far
        self._waiting: Mapping[str, Any] | None = None  # an announcement without ids

    def announced(self, payload: Mapping[str, Any]) -> Draft | None:
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
        return records.summarize(payload)

    def from_update(self, before: Mapping[str, Any], update: Mapping[str, Any]) -> Draft | None:
        """A node's update (`events` path): a compaction when it removes messages.

        `before` is the state the node was given, `update` what it returned.
        """
        new = update.get("messages")
        if not isinstance(new, list) or not any(is_removal(m) for m in new):
            return None
        previous = records.message_dicts(before.get("messages") or [])
        kept = records.message_dicts(x for x in new if not is_removal(x))
        removed = {str(m.get("id")) for m in new if is_removal(m)}
        if REMOVE_ALL in removed:
            after = kept
        else:
            kept_ids = set(message_ids(kept))
            after = [m for m in previous if str(m.get("id")) not in removed and str(m.get("id")) not in kept_ids] + kept
        return self._compaction(message_ids(previous), summary_ids(previous), after, before, update)

    def from_states(
        self,
        before: Mapping[str, Any],
        previous_ids: list[str],
        previous_summaries: set[str],
        after: Mapping[str, Any],
        now: list[dict[str, Any]],
    ) -> Draft | None:
        """Two successive states (`values` path): a compaction when messages left.

        Of the state `before` only what a mapper keeps between states: its keys
        but `messages`, its messages' ids (`message_ids`) and its summaries' ids
        (`summary_ids`); `now` are the messages of `after` as message dicts."""
        present = set(message_ids(now))
        if not any(i not in present for i in previous_ids):
            return None
        return self._compaction(previous_ids, previous_summaries, now, before, after)

    def flush(self) -> Draft | None:
        """An announcement the state never showed: its marker alone."""
        waiting, self._waiting = self._waiting, None
        return records.summarize(waiting) if waiting is not None else None

    def _compaction(
        self,
        previous_ids: list[str],
        summaries: set[str],
        after: list[dict[str, Any]],
        state_before: Mapping[str, Any],
        state_after: Mapping[str, Any],
    ) -> Draft | None:
        present = set(message_ids(after))
        replaced = [i for i in previous_ids if i not in present]
        if not replaced:
            return None
        summary = next(
            (m for m in after if m.get("id") and records.is_summary_message(m) and str(m["id"]) not in summaries),
            None,
        )
        if summary is not None and str(summary["id"]) in self._marked:
            return None  # announced in full already
        if any(set(replaced) <= earlier for earlier in self._replaced):
            return None
        earlier = [i for i in replaced if i in summaries]
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
        if summary is None and (kept := _summary_key(state_before, state_after)) is not None:
            payload["summary_key"], payload["summary"] = kept
        waiting, self._waiting = self._waiting, None
        if waiting is not None:
            # What the announcement says that the state does not.
            payload.update({k: v for k, v in waiting.items() if v is not None and payload.get(k) is None})
            payload["summary"] = waiting.get("summary") or payload["summary"]
        if summary is not None:
            self._marked.add(str(summary["id"]))
        self._replaced.append(frozenset(replaced))
        return records.summarize(payload)
