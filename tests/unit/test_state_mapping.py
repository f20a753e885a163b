"""The state mapper: `values` and `custom` parts become the same records as `events` parts.

The bundled agent (compiled in-process) runs one conversation twice from the
same inputs: once streamed with `values` + `custom`, once through
`astream_events`. Both record lists must agree on everything but generated ids.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest

from journal_bridge.mapping.events_mapper import RunMapper
from journal_bridge.mapping.state_mapper import StateMapper
from journal_bridge.model.records import is_hidden
from tests.unit.test_mapping import _dump, _graph, server_parts

TURNS = ["hello", "add 2 and 3", "weather in Paris", "one more", "add 4 and 5", "weather in Oslo"]


async def _values_runs(graph, thread_id: str) -> list[tuple[str, dict, list[tuple[str, Any]]]]:
    runs = []
    for text in TURNS:
        run_id = str(uuid.uuid4())
        run_input = {"messages": [{"role": "user", "content": text}]}
        config = {"configurable": {"thread_id": thread_id}, "run_id": run_id}
        parts = []
        async for mode, chunk in graph.astream(run_input, config, stream_mode=["values", "custom"]):
            parts.append((mode, json.loads(json.dumps(chunk, default=_dump))))
        runs.append((run_id, run_input, parts))
    return runs


async def _events_runs(graph, thread_id: str) -> list[tuple[str, list[tuple[str, Any]]]]:
    runs = []
    for text in TURNS:
        run_id = str(uuid.uuid4())
        config = {"configurable": {"thread_id": thread_id, "graph_id": "agent"}, "run_id": run_id}
        runs.append((run_id, await server_parts(graph, {"messages": [{"role": "user", "content": text}]}, config)))
    return runs


def _state_records(thread_id: str, runs) -> list:
    out = []
    for run_id, run_input, parts in runs:
        mapper = StateMapper(thread_id, run_id)
        out += mapper.start("agent", None, run_input)
        for mode, data in parts:
            out += mapper.feed(mode, data)
        out += mapper.flush()
    return out


def _events_records(thread_id: str, runs) -> list:
    out = []
    for run_id, parts in runs:
        mapper = RunMapper(thread_id, run_id)
        for event, data in parts:
            out += mapper.feed(event, data)
        out += mapper.flush()
    return out


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _comparable(records) -> list[Any]:
    """Records as JSON with every generated id renamed in order of appearance."""
    names: dict[str, str] = {}
    text = json.dumps(
        [
            [r.event_type, r.category, r.content, r.metadata, r.source_key]
            for r in records
            # The summarizer's own call is seen only by `events` (hidden from history by its caller).
            if not is_hidden(r.metadata)
        ],
        sort_keys=True,
    )
    # A model streamed (events) ends its id without the `-0` an invoked one has.
    text = re.sub(r"(lc_run--[0-9a-f-]{36})-0", r"\1", text)
    return json.loads(_UUID.sub(lambda m: names.setdefault(m.group(0), f"<id-{len(names)}>"), text))


@pytest.fixture
async def both():
    thread_a, thread_b = str(uuid.uuid4()), str(uuid.uuid4())
    state = _state_records(thread_a, await _values_runs(_graph(), thread_a))
    events = _events_records(thread_b, await _events_runs(_graph(), thread_b))
    return state, events


async def test_both_paths_yield_the_same_records(both):
    state, events = both
    assert [r.event_type for r in state].count("middleware:summarize") >= 2, "the script should compact"
    assert _comparable(state) == _comparable(events)


async def test_a_message_is_journaled_once_though_every_state_repeats_it(both):
    state, _ = both
    ids = [r.content["id"] for r in state if r.category == "message"]
    assert len(ids) == len(set(ids))
    assert [r.content["content"] for r in state if r.event_type == "llm.human.input"] == TURNS


def test_a_state_joined_late_finds_the_input_by_content():
    mapper = StateMapper("t", "r")
    mapper.start("agent", None, {"messages": [{"role": "user", "content": "again"}]})
    earlier = [{"type": "human", "content": "again", "id": "h0"}, {"type": "ai", "content": "ok", "id": "a0"}]
    new = [{"type": "human", "content": "again", "id": "h1"}, {"type": "ai", "content": "done", "id": "a1"}]
    records = mapper.feed("values", {"messages": earlier + new})
    assert [r.content["id"] for r in records] == ["h1", "a1"]


def test_parts_that_are_not_states_are_counted_not_raised():
    mapper = StateMapper("t", "r")
    mapper.start("agent", None, None)
    assert mapper.feed("values", ["not", "a", "state"]) == []
    assert mapper.feed("custom", {"event": "progress"}) == []
    assert mapper.malformed == 1


def _message(kind: str, index: int, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "content": f"{kind} {index}", "id": f"{kind}-{index}", **extra}


def test_a_step_of_a_long_thread_converts_its_new_messages_only(monkeypatch):
    from journal_bridge.model import records

    converted: list[Any] = []
    real = records.message_dicts
    monkeypatch.setattr(records, "message_dicts", lambda ms: real(converted.extend(ms := list(ms)) or ms))
    history = [_message("human" if i % 2 == 0 else "ai", i) for i in range(400)]
    mapper = StateMapper("t", "r")
    mapper.start("agent", None, {"messages": [{"role": "user", "content": "human 400"}]})
    # The run's input is converted once, when the run starts; the states come next.
    assert converted == [{"role": "user", "content": "human 400"}]
    converted.clear()
    state = [*history, _message("human", 400)]
    first = mapper.feed("values", {"messages": list(state)})
    assert [r.content["id"] for r in first] == ["human-400"]
    # The history before the run's input is read in place; the run's message is a copy.
    assert converted == []
    assert first[0].content == state[-1] and first[0].content is not state[-1]
    steps = [[_message("ai", 401, tool_calls=[{"name": "add", "args": {}, "id": "c1"}])],
             [_message("tool", 402, tool_call_id="c1")], [_message("ai", 403)]]
    journaled = []
    for step in steps:
        state = [*state, *step]
        journaled += mapper.feed("values", {"messages": list(state)})
    # Each state repeats the thread's 401 earlier messages; only the three new ones were converted.
    assert [m["id"] for m in converted] == ["ai-401", "tool-402", "ai-403"]
    assert [r.content["id"] for r in journaled] == ["ai-401", "tool-402", "ai-403"]
    end = mapper.flush()
    assert [r.event_type for r in end] == ["run.end"]
    assert end[0].content["message_count"] == 404


def test_messages_that_leave_a_long_thread_are_a_marker_where_they_left():
    history = [_message("human" if i % 2 == 0 else "ai", i) for i in range(300)]
    mapper = StateMapper("t", "r")
    mapper.start("agent", None, {"messages": [{"role": "user", "content": "human 300"}]})
    state = [*history, _message("human", 300)]
    mapper.feed("values", {"messages": list(state)})
    state = [*state, _message("ai", 301)]
    assert [r.content["id"] for r in mapper.feed("values", {"messages": list(state)})] == ["ai-301"]
    # A compaction: the oldest 290 give way to a summary; a new answer follows it.
    summary = {"type": "human", "content": "summary of 290", "id": "summary-1",
               "additional_kwargs": {"lc_source": "summarization"}}
    state = [summary, *state[290:], _message("ai", 302)]
    records = mapper.feed("values", {"messages": list(state)})
    assert [r.event_type for r in records] == ["middleware:summarize", "llm.ai.response"]
    marker = records[0].content["changes"]
    assert marker["replaced_count"] == 290
    assert marker["replaced_message_ids"] == [m["id"] for m in history[:290]]
    assert marker["summary"] == "summary of 290"
    assert records[1].content["id"] == "ai-302"
    # A message rewritten in place (same id, as the messages reducer does) is not journaled again.
    state = [*state[:-1], {**state[-1], "content": "rewritten"}, _message("ai", 303)]
    assert [r.content["id"] for r in mapper.feed("values", {"messages": list(state)})] == ["ai-303"]


def test_a_first_state_with_message_objects_is_read_as_message_dicts():
    from langchain_core.messages import AIMessage, HumanMessage

    mapper = StateMapper("t", "r")
    mapper.start("agent", None, {"messages": [{"role": "user", "content": "again"}]})
    state = [HumanMessage("earlier", id="h0"), AIMessage("ok", id="a0"), {"type": "human", "content": "again", "id": "h1"}]
    assert [r.content["id"] for r in mapper.feed("values", {"messages": state})] == ["h1"]
    state = [*state, AIMessage("done", id="a1")]
    records = mapper.feed("values", {"messages": state})
    assert [(r.content["type"], r.content["id"]) for r in records] == [("ai", "a1")]


def test_the_mapper_keeps_no_part_of_a_parsed_state():
    import sys

    history = [_message("human" if i % 2 == 0 else "ai", i) for i in range(50)]
    mapper = StateMapper("t", "r")
    mapper.start("agent", None, {"messages": [{"role": "user", "content": "human 50"}]})
    for step in ([_message("human", 50)], [_message("ai", 51)]):
        history = [*history, *step]
        state = {"messages": history, "jump_to": None}
        held = [state, history, *history]
        counts = [sys.getrefcount(x) for x in held]
        records = mapper.feed("values", state)
        assert [r.content["id"] for r in records] == [step[0]["id"]]
        # Neither the state, nor its list, nor any of its messages is referenced from the mapper
        # or the records: a state held while the run goes on would reach the oldest generation.
        assert [sys.getrefcount(x) for x in held] == counts
    end = mapper.flush()
    assert end[-1].content == {"output_keys": ["jump_to", "messages"], "message_count": 52, "last_message_id": "ai-51"}


def test_a_summary_the_run_found_in_its_first_state_is_a_previous_summary_when_compacted_again():
    old_summary = {"type": "human", "content": "summary of before", "id": "summary-0",
                   "additional_kwargs": {"lc_source": "summarization"}}
    history = [old_summary, *(_message("human" if i % 2 == 0 else "ai", i, additional_kwargs={"refusal": None})
                              for i in range(40))]
    mapper = StateMapper("t", "r")
    mapper.start("agent", None, {"messages": [{"role": "user", "content": "human 40"}]})
    state = [*history, _message("human", 40)]
    mapper.feed("values", {"messages": list(state)})
    state = [*state, _message("ai", 41)]
    mapper.feed("values", {"messages": list(state)})
    new_summary = {**old_summary, "content": "summary of all", "id": "summary-1"}
    records = mapper.feed("values", {"messages": [new_summary, *state[-2:], _message("ai", 42)]})
    marker = records[0].content["changes"]
    assert marker["replaced_count"] == 41 and marker["condensed_count"] == 40
    assert marker["previous_summary_ids"] == ["summary-0"]
    assert marker["summary_message_id"] == "summary-1"
    assert [r.content["id"] for r in records[1:]] == ["ai-42"]
