"""The record envelope: catalog, JSON form, validation and content preparation."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, replace
from datetime import UTC, datetime, timedelta, timezone

import pytest

from journal_bridge.model import envelope as events
from journal_bridge.model.envelope import (
    EVENT_CATEGORIES,
    InvalidEvent,
    RunEvent,
    make_event,
    prepare_event,
    validate_event,
)


def test_catalog_pairs_each_event_type_with_its_category():
    assert EVENT_CATEGORIES == {
        "run.start": "trace",
        "llm.human.input": "message",
        "llm.ai.response": "message",
        "llm.tool.result": "message",
        "middleware:summarize": "middleware",
        "run.end": "outputs",
        "run.interrupt": "outputs",
        "run.error": "error",
    }
    assert (
        events.MESSAGE,
        events.MIDDLEWARE,
        events.TRACE,
        events.OUTPUTS,
        events.ERROR,
    ) == (
        "message",
        "middleware",
        "trace",
        "outputs",
        "error",
    )


def test_make_event_defaults():
    before = datetime.now(UTC)
    made = make_event(thread_id="t", run_id="r", event_type=events.RUN_START)
    assert made.category == events.TRACE
    assert made.metadata == {} and made.content == "" and made.seq is None
    assert made.created_at.tzinfo is not None and made.created_at >= before


def test_make_event_needs_a_category_outside_the_catalog():
    with pytest.raises(InvalidEvent, match="category"):
        make_event(thread_id="t", run_id="r", event_type="custom.thing")
    assert (
        make_event(
            thread_id="t", run_id="r", event_type="custom", category="x"
        ).category
        == "x"
    )


def test_run_event_is_frozen():
    with pytest.raises(FrozenInstanceError):
        make_event(thread_id="t", run_id="r", event_type=events.RUN_END).seq = 3  # type: ignore[misc]


def test_to_dict_is_the_json_envelope():
    created = datetime(2025, 3, 4, 5, 6, 7, 89, tzinfo=timezone(timedelta(hours=1)))
    record = RunEvent(
        "t", "r", "llm.ai.response", "message", {"a": 1}, {"m": 2}, created, seq=7
    )
    assert record.to_dict() == {
        "thread_id": "t",
        "run_id": "r",
        "seq": 7,
        "event_type": "llm.ai.response",
        "category": "message",
        "content": {"a": 1},
        "metadata": {"m": 2},
        "created_at": "2025-03-04T05:06:07.000089+01:00",
    }
    assert replace(record, source_key="k").to_dict()["source_key"] == "k"


def test_from_dict_inverts_to_dict_and_ignores_unknown_fields():
    record = make_event(
        thread_id="t",
        run_id="r",
        event_type=events.LLM_TOOL_RESULT,
        content=[1, "x"],
        source_key="k",
    )
    record = replace(record, seq=3)
    envelope = json.loads(json.dumps(record.to_dict()))
    envelope["id"] = 17  # a backend's row id
    assert RunEvent.from_dict(envelope) == record


def test_user_id_is_in_the_envelope_only_when_set():
    record = make_event(thread_id="t", run_id="r", event_type=events.RUN_START)
    assert "user_id" not in record.to_dict()
    owned = replace(record, user_id="u-1")
    assert owned.to_dict()["user_id"] == "u-1"
    assert RunEvent.from_dict(owned.to_dict()) == owned


def test_from_dict_rejects_a_malformed_time():
    with pytest.raises(InvalidEvent, match="created_at"):
        RunEvent.from_dict({"thread_id": "t", "created_at": "yesterday"})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("thread_id", ""),
        ("run_id", None),
        ("event_type", "x" * 33),
        ("category", "y" * 17),
        ("metadata", None),
        ("created_at", datetime(2025, 1, 1)),
        ("seq", 0),
        ("seq", True),
        ("source_key", 12),
    ],
)
def test_validate_names_the_field(field, value):
    record = make_event(thread_id="t", run_id="r", event_type=events.RUN_START)
    with pytest.raises(InvalidEvent, match=f"^{field}"):
        validate_event(replace(record, **{field: value}))


def test_invalid_event_is_a_value_error():
    assert issubclass(InvalidEvent, ValueError)


def test_prepare_leaves_small_json_content_alone():
    record = make_event(
        thread_id="t", run_id="r", event_type=events.RUN_END, content={"a": [1]}
    )
    prepared = prepare_event(record, 1000)
    assert prepared.event is record
    assert prepared.content_json == '{"a":[1]}' and prepared.metadata_json == "{}"


def test_prepare_truncation_respects_escapes():
    text = "\n" * 100  # each newline is two bytes of JSON
    record = make_event(
        thread_id="t", run_id="r", event_type=events.RUN_END, content=text
    )
    prepared = prepare_event(record, 50)
    assert prepared.event.content == "\n" * 24
    assert len(prepared.content_json.encode()) <= 50
    assert prepared.event.metadata == {"truncated": True, "original_size": 202}


def test_prepare_keeps_odd_metadata_values_as_text():
    when = datetime(2025, 1, 1, tzinfo=UTC)
    record = make_event(
        thread_id="t", run_id="r", event_type=events.RUN_END, metadata={"at": when}
    )
    assert json.loads(prepare_event(record, 1000).metadata_json) == {"at": str(when)}
