"""A marker for every compaction of what the model sees, whatever the harness does to the state.

Each test feeds the state mapper the successive states a run of one harness
shape shows (as `values` parts, the shapes the server sends), and checks the
markers: one per summarizer run, each with its summary, none for a state that
only writes an earlier summary again.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from journal_bridge.mapping.state_mapper import StateMapper
from journal_bridge.projection.history import project_record


def _human(i: int) -> dict[str, Any]:
    return {"type": "human", "content": f"question {i}", "id": f"h{i}"}


def _ai(i: int) -> dict[str, Any]:
    return {"type": "ai", "content": f"answer {i}", "id": f"a{i}"}


def _turns(n: int) -> list[dict[str, Any]]:
    return [m for i in range(n) for m in (_human(i), _ai(i))]


def _run(states: list[dict[str, Any]], run_input: dict[str, Any]) -> list[Any]:
    """The run's records, each with the seq a store would give it (the projection reads stored records)."""
    mapper = StateMapper("t", "r")
    out = mapper.start("g", None, run_input)
    for state in states:
        out += mapper.feed("values", state)
    return [dataclasses.replace(record, seq=seq) for seq, record in enumerate(out + mapper.flush(), 1)]


def _markers(records: list[Any]) -> list[dict[str, Any]]:
    return [project_record(r) for r in records if r.event_type == "middleware:summarize"]


def _shown(records: list[Any]) -> list[str]:
    return [
        "<marker>" if r.event_type == "middleware:summarize" else r.content["id"]
        for r in records
        if r.event_type == "middleware:summarize" or (r.category == "message" and not r.metadata.get("caller", "").startswith(("middleware:", "subagent:")))
    ]


def test_a_running_summary_written_again_each_turn_makes_no_marker():
    """langmem's `SummarizationNode` writing to `messages`: every turn after the
    first summary removes all and re-adds the same summary as a new system message."""
    summary = {"type": "system", "content": "Summary: the user asked questions 0 to 3", "id": "s-old"}
    before = [summary, _human(4), _ai(4)]
    context = {"running_summary": {"summary": "the user asked questions 0 to 3",
                                   "summarized_message_ids": ["h0", "a0", "h1", "a1", "h2", "a2", "h3", "a3"]}}
    again = {"type": "system", "content": summary["content"], "id": "s-new"}
    states = [
        {"messages": [*before, _human(5)], "context": context},
        {"messages": [again, _human(4), _ai(4), _human(5)], "context": context},
        {"messages": [again, _human(4), _ai(4), _human(5), _ai(5)], "context": context},
    ]
    records = _run(states, {"messages": [{"role": "user", "content": "question 5"}]})
    assert _markers(records) == []
    assert _shown(records) == ["h5", "a5"]


def test_a_new_running_summary_is_one_marker_with_its_summary():
    first = {"summary": "questions 0 to 1", "summarized_message_ids": ["h0", "a0", "h1", "a1"]}
    summary = {"type": "system", "content": "Summary: questions 0 to 1", "id": "s1"}
    states = [
        {"messages": [*_turns(3), _human(3)], "context": {}},
        {"messages": [summary, _human(2), _ai(2), _human(3)], "context": {"running_summary": first}},
        {"messages": [summary, _human(2), _ai(2), _human(3), _ai(3)], "context": {"running_summary": first}},
    ]
    records = _run(states, {"messages": [{"role": "user", "content": "question 3"}]})
    (marker,) = _markers(records)
    assert marker["condensed_count"] == 4 and marker["summary"] == "Summary: questions 0 to 1"
    assert _shown(records) == ["h3", "<marker>", "a3"]


def test_a_summary_the_model_sees_while_the_state_keeps_every_message_is_a_marker():
    """deepagents: the messages stay; a private key says the model sees a summary
    and the messages from `cutoff_index` on."""
    messages = [*_turns(4), _human(4)]
    event = {"cutoff_index": 6, "summary_message": {
        "type": "human", "id": None, "additional_kwargs": {"lc_source": "summarization"},
        "content": "You are in the middle of a conversation.\n\n<summary>\nquestions 0 to 2\n</summary>"}}
    states = [
        {"messages": messages},
        {"messages": [*messages, _ai(4)], "_summarization_event": event},
        {"messages": [*messages, _ai(4), _human(5)], "_summarization_event": event},
    ]
    records = _run(states, {"messages": [{"role": "user", "content": "question 4"}]})
    (marker,) = _markers(records)
    assert marker["replaced_message_ids"] == ["h0", "a0", "h1", "a1", "h2", "a2"]
    assert marker["condensed_count"] == 6 and marker["summary"] == "questions 0 to 2"
    # The history keeps every message; the marker sits before the answer the model gave seeing the summary.
    assert _shown(records) == ["h4", "<marker>", "a4", "h5"]


def test_a_view_from_before_the_run_is_not_this_runs_compaction_but_a_later_cutoff_is():
    messages = [*_turns(5), _human(5)]
    old = {"cutoff_index": 4, "summary_message": {"type": "human", "content": "first", "id": None}}
    new = {"cutoff_index": 8, "summary_message": {"type": "human", "content": "second", "id": None}}
    states = [
        {"messages": messages, "_summarization_event": old},
        {"messages": [*messages, _ai(5)], "_summarization_event": new},
    ]
    (marker,) = _markers(_run(states, {"messages": [{"role": "user", "content": "question 5"}]}))
    assert marker["replaced_message_ids"] == ["h2", "a2", "h3", "a3"] and marker["summary"] == "second"


def test_a_summary_key_written_again_unchanged_is_still_the_markers_summary():
    """deer-flow keeps the summary in `summary_text`; a summarizer may write the same text twice."""
    states = [
        {"messages": [*_turns(3), _human(3)], "summary_text": "the same summary"},
        {"messages": [_ai(2), _human(3)], "summary_text": "the same summary"},
        {"messages": [_ai(2), _human(3), _ai(3)], "summary_text": "the same summary"},
    ]
    (marker,) = _markers(_run(states, {"messages": [{"role": "user", "content": "question 3"}]}))
    assert marker["summary"] == "the same summary" and marker["condensed_count"] == 5


def test_a_human_message_named_summary_is_the_markers_summary_not_a_question():
    """deer-flow before it kept the summary in a state key: a `HumanMessage(name="summary")`."""
    summary = {"type": "human", "name": "summary", "content": "what came before", "id": "s1"}
    states = [
        {"messages": [*_turns(3), _human(3)]},
        {"messages": [summary, _ai(2), _human(3)]},
        {"messages": [summary, _ai(2), _human(3), _ai(3)]},
    ]
    records = _run(states, {"messages": [{"role": "user", "content": "question 3"}]})
    (marker,) = _markers(records)
    assert marker["summary"] == "what came before" and marker["summary_message_id"] == "s1"
    assert _shown(records) == ["h3", "<marker>", "a3"]


def test_a_summary_an_agent_run_as_a_node_wrote_is_a_marker_though_no_message_left():
    """An agent compacting inside a sub-graph: the parent merges its output by id,
    so it keeps every message and gains the summary (a supervisor's or a swarm's worker)."""
    summary = {"type": "human", "content": "what the worker condensed", "id": "s1",
               "additional_kwargs": {"lc_source": "summarization"}}
    messages = [*_turns(4), _human(4)]
    states = [{"messages": messages}, {"messages": [*messages, summary, _ai(4)]}]
    records = _run(states, {"messages": [{"role": "user", "content": "question 4"}]})
    (marker,) = _markers(records)
    assert marker["summary"] == "what the worker condensed" and marker["condensed_count"] is None
    assert _shown(records) == ["h4", "<marker>", "a4"]


def test_a_graph_is_read_from_its_checkpoints_only_for_a_private_key_that_holds_a_condensed_view():
    from journal_bridge.mapping.private_views import _keeps_private_views

    output = {"properties": {"messages": {}, "files": {}}}
    deep = {"state_schema": {"properties": {"messages": {}, "files": {}, "_summarization_event": {}}},
            "output_schema": output}
    counters = {"state_schema": {"properties": {"messages": {}, "files": {}, "thread_model_call_count": {}}},
                "output_schema": output}
    public = {"state_schema": {"properties": {"messages": {}, "files": {}}}, "output_schema": output}
    typed = {"state_schema": {"properties": {"messages": {}, "_view": {"$ref": "#/$defs/V"}},
                              "$defs": {"V": {"properties": {"cutoff_index": {}}}}}, "output_schema": output}
    assert _keeps_private_views(deep) and _keeps_private_views(typed)
    assert not _keeps_private_views(counters) and not _keeps_private_views(public)
    assert not _keeps_private_views({"state_schema": None, "output_schema": None})
