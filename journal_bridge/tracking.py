"""`TrackingSummarizationMiddleware`: langchain's summarization, made observable.

Upstream `SummarizationMiddleware` compacts the `messages` channel silently: it
returns `[RemoveMessage(REMOVE_ALL_MESSAGES), summary, *kept]` and the removed
messages are gone from the checkpoint. This subclass does exactly the same and,
whenever it actually compacts, announces it once under the name `summarization`:

- as a custom callback event (`on_custom_event` in `astream_events(version="v2")`,
  the `events` stream mode of LangGraph Server), which the journal records;
- through the graph's stream writer (`stream_mode="custom"`), for live clients.

When it does not compact it emits nothing and returns what upstream returns.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from langchain.agents.middleware.summarization import SummarizationMiddleware
from langchain_core.callbacks.manager import (
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.messages import AnyMessage, BaseMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from journal_bridge.model.envelope import SUMMARIZATION_EVENT

__all__ = ["SUMMARIZATION_EVENT", "TrackingSummarizationMiddleware"]

# How upstream marks the summary message it puts in the state (`additional_kwargs`).
_SUMMARY_SOURCE = "summarization"


def _is_summary(message: BaseMessage) -> bool:
    return message.additional_kwargs.get("lc_source") == _SUMMARY_SOURCE


class TrackingSummarizationMiddleware(SummarizationMiddleware):
    """`SummarizationMiddleware` that reports every compaction it performs.

    Same constructor as the upstream middleware. The payload (a JSON-serialisable
    dict, identical on both channels):

    - `event`: `"summarization"`; `middleware`: this middleware's name;
      `hook`: `"before_model"`
    - `replaced_message_ids` / `replaced_count`: ids the update removes from the
      state, in their original order (input ids minus the ids the update keeps)
    - `previous_summary_ids`: the replaced ids that were summaries of an earlier
      compaction (state, never conversation)
    - `condensed_count`: the replaced conversation messages, i.e. `replaced_count`
      minus the earlier summaries: what "N messages condensed" counts
    - `preserved_message_ids` / `preserved_count`: ids kept after the summary
    - `summary_message_id`: id of the summary message as stored in the state
    - `summary`: the summary text (without the message's templated prefix)
    - `tokens_before` / `tokens_after`: the middleware's own token count of the
      messages before and after compaction
    - `trigger`: the trigger clause that fired, e.g. `{"type": "messages", "value": 8}`
    - `keep`: the retention policy, e.g. `{"type": "messages", "value": 4}`

    Subclasses can vary trigger and keep per call by overriding `_for_call`.
    """

    _summary_text: str | None = None

    def before_model(  # type: ignore[override]
        self, state: Any, runtime: Runtime[Any], config: RunnableConfig
    ) -> dict[str, object] | None:
        # `create_agent` injects `config` based on this (sync) signature, for both hooks.
        call = self._for_call(config)
        if call is None:
            return None
        messages = call._start(state)
        update = super(TrackingSummarizationMiddleware, call).before_model(state, runtime)
        payload = call._announcement(messages, update)
        if payload is not None:
            dispatch_custom_event(SUMMARIZATION_EVENT, payload, config=config)
            runtime.stream_writer(payload)
        return update

    async def abefore_model(  # type: ignore[override]
        self, state: Any, runtime: Runtime[Any], config: RunnableConfig
    ) -> dict[str, object] | None:
        call = self._for_call(config)
        if call is None:
            return None
        messages = call._start(state)
        update = await super(TrackingSummarizationMiddleware, call).abefore_model(state, runtime)
        payload = call._announcement(messages, update)
        if payload is not None:
            await adispatch_custom_event(SUMMARIZATION_EVENT, payload, config=config)
            runtime.stream_writer(payload)
        return update

    def _start(self, state: Any) -> list[object]:
        """The messages before this call's compaction; forgets any summary of an earlier call."""
        self._summary_text = None
        return list(state["messages"])

    def _announcement(self, messages: list[Any], update: dict[str, object] | None) -> dict[str, object] | None:
        """The `summarization` payload of the compaction `update` made of `messages`, if it made one."""
        return None if update is None else self._compaction_payload(messages, update)

    def _for_call(self, config: RunnableConfig) -> TrackingSummarizationMiddleware | None:
        """The middleware that handles this call, or `None` to skip summarization.

        Returns a private shallow copy, so per-call state (the captured summary
        text) never leaks between concurrent runs sharing this instance.
        """
        return copy.copy(self)

    def _with_settings(
        self,
        trigger: Any,
        keep: Any,
    ) -> TrackingSummarizationMiddleware:
        """A shallow copy with another trigger and keep, validated the upstream way."""
        call = copy.copy(self)
        call.trigger = call._copy_trigger(trigger)
        call._trigger_clauses = call._normalize_trigger(call.trigger)
        call._trigger_conditions = call._legacy_trigger_conditions(call.trigger)
        call.keep = call._validate_context_size(keep, "keep")
        return call

    def _build_new_messages(self, summary: str) -> list[Any]:  # type: ignore[override]
        # Upstream calls this with the bare summary text: capture it for the payload.
        self._summary_text = summary
        return SummarizationMiddleware._build_new_messages(summary)

    def _compaction_payload(
        self,
        messages: Sequence[AnyMessage],
        update: Mapping[str, Any],
    ) -> dict[str, object]:
        new_messages: list[BaseMessage] = list(update["messages"])
        if not (
            new_messages
            and isinstance(new_messages[0], RemoveMessage)
            and new_messages[0].id == REMOVE_ALL_MESSAGES
        ):
            msg = "summarization update does not start with RemoveMessage(REMOVE_ALL_MESSAGES)"
            raise ValueError(msg)
        after = new_messages[1:]
        # Upstream has assigned ids to id-less input messages by now (in place).
        input_ids = [m.id for m in messages]
        known = set(input_ids)
        summary_message = next((m for m in after if m.id is None or m.id not in known), None)
        if summary_message is None:
            msg = "summarization update carries no new summary message"
            raise ValueError(msg)
        if summary_message.id is None:
            # Otherwise the reducer picks a random id we could not report.
            summary_message.id = str(uuid.uuid4())
        kept_ids = [m.id for m in after if m.id in known]
        kept = set(kept_ids)
        replaced_ids = [i for i in input_ids if i not in kept]
        previous_summary_ids = [
            m.id for m in messages if m.id not in kept and _is_summary(m)
        ]
        # Counted only once compaction happened, so idle calls pay no extra count.
        tokens_before = self.token_counter(list(messages))
        summary = self._summary_text
        if summary is None:
            summary = summary_message.text
        return {
            "event": SUMMARIZATION_EVENT,
            "middleware": self.name,
            "hook": "before_model",
            "replaced_count": len(replaced_ids),
            "preserved_count": len(kept_ids),
            "replaced_message_ids": replaced_ids,
            "previous_summary_ids": previous_summary_ids,
            "condensed_count": len(replaced_ids) - len(previous_summary_ids),
            "preserved_message_ids": kept_ids,
            "summary_message_id": summary_message.id,
            "summary": summary,
            "tokens_before": tokens_before,
            "tokens_after": self.token_counter(after),
            "trigger": self._fired_trigger(list(messages), tokens_before),
            "keep": {"type": self.keep[0], "value": self.keep[1]},
        }

    def _fired_trigger(
        self, messages: list[AnyMessage], total_tokens: int
    ) -> dict[str, object] | None:
        """The first trigger clause that holds, in the payload's `{type, value}` form."""
        for clause in self._trigger_clauses:
            probe = copy.copy(self)
            probe._trigger_clauses = [clause]
            if probe._should_summarize(messages, total_tokens):
                return _describe_clause(clause)
        return None


def _describe_clause(clause: Mapping[str, object]) -> dict[str, object]:
    conditions = [{"type": kind, "value": value} for kind, value in clause.items()]
    if len(conditions) == 1:
        return conditions[0]
    # A multi-metric clause holds only when all of its conditions do.
    return {"type": "all", "conditions": conditions}
