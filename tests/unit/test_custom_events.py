"""Custom events: one table says which become records, read the same on both capture paths."""

from __future__ import annotations

from typing import Any

from journal_bridge.mapping.events_mapper import map_parts
from journal_bridge.mapping.state_mapper import StateMapper
from journal_bridge.model import records
from journal_bridge.model.envelope import OUTPUTS

RUN = "11111111-1111-1111-1111-111111111111"


def _note(payload: Any) -> records.Draft:
    return records.Draft("run.note", {"text": payload["text"]}, "note", category=OUTPUTS)


def test_a_custom_event_in_the_table_is_journaled_alike_from_events_and_from_custom_parts(monkeypatch):
    monkeypatch.setitem(records.CUSTOM_EVENTS, "note", _note)
    payload = {"event": "note", "text": "remember the milk"}
    part = {"event": "on_custom_event", "name": "note", "run_id": "node", "data": payload,
            "metadata": {"run_id": RUN}, "tags": [], "parent_ids": []}
    (from_events,) = map_parts("t", RUN, [("events", part)])
    (from_state,) = StateMapper("t", RUN).feed("custom", payload)
    assert from_events.event_type == "run.note" and from_events.content == {"text": "remember the milk"}
    assert (from_events.content, from_events.source_key) == (from_state.content, from_state.source_key)


def test_a_custom_event_not_in_the_table_is_not_journaled():
    part = {"event": "on_custom_event", "name": "progress", "run_id": "node", "data": {"done": 3},
            "metadata": {"run_id": RUN}, "tags": [], "parent_ids": []}
    assert map_parts("t", RUN, [("events", part)]) == []
    assert StateMapper("t", RUN).feed("custom", {"event": "progress", "done": 3}) == []
