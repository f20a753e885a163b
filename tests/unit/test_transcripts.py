"""The on/off suites' normaliser replaces what differs by construction, and nothing else."""

from __future__ import annotations

from tests.harness.transcripts import difference, normalize

A = "0645c949-1f25-4343-9218-faad1febb618"
B = "48b424e0-a184-4d1a-95ce-94213fcc431d"


def test_ids_are_named_in_order_of_first_appearance_with_keys_read_in_order():
    transcript = {"z": [A, f"lc_run--{B}-0"], "a": {"run_id": B, f"/threads/{A}/runs": 1}}
    assert normalize(transcript) == {
        "a": {"/threads/<id-0>/runs": 1, "run_id": "<id-1>"},
        "z": ["<id-0>", "lc_run--<id-1>-0"],
    }


def test_the_same_ids_in_other_places_differ():
    assert difference([A, B, A], [B, A, B]) is None
    assert difference([A, B, A], [A, B, B]) is not None
    assert difference([A, A], [A.upper(), A]) is not None


def test_event_ids_times_ports_and_process_tokens_are_replaced():
    raw = {
        "fields": [["event", "values"], ["id", "1796141618141-0"]],
        "v2": {"id": "1796141618141-3.2", "timestamp": 1796141618141},
        "created_at": "2026-01-02T03:04:05.678+00:00",
        "configurable": {"__request_start_time_ms__": 1796141618000},
        "location": "http://127.0.0.1:51234/threads",
        "metadata": {"lc_internal_call": "x9"},
        "_seconds": 3.2,
    }
    assert normalize(raw) == {
        "fields": [["event", "values"], ["id", "<event-id>"]],
        "v2": {"id": "<event-id>", "timestamp": "<time>"},
        "created_at": "<time>",
        "configurable": {"__request_start_time_ms__": "<time>"},
        "location": "http://127.0.0.1:<port>/threads",
        "metadata": {"lc_internal_call": "<process-token>"},
    }


def test_content_counts_and_numbers_outside_times_are_compared():
    assert difference({"step": 1, "content": "a\ufffdb"}, {"step": 1, "content": "a\ufffdb"}) is None
    assert difference({"content": "a\ufffdb"}, {"content": "a\\u0000b"}) is not None
    assert difference({"step": 1}, {"step": 2}) is not None
    assert difference({"timestamp": 17}, {"timestamp": 18}) is not None
    assert difference({"id": "1796141618141"}, {"id": "1796141618142"}) is not None
    assert difference([{"event": "values"}], [{"event": "values"}, {"event": "values"}]) is not None
    assert difference({"kwargs": {"stream_mode": ["values"]}}, {"kwargs": {"stream_mode": ["values", "custom"]}})


def test_entries_the_client_never_saw_are_left_out():
    seen = {"path": "/stream/events", "frames": [{"event": "values"}]}
    assert difference([seen], [{"path": "/stream/events", "frames": [], "_unseen": True}, seen]) is None


def test_a_difference_names_the_step_it_is_in():
    plain = {"steps": [{"call": "runs.create", "result": {"kwargs": {"resumable": False}}}]}
    plugin = {"steps": [{"call": "runs.create", "result": {"kwargs": {"resumable": True}}}]}
    assert difference(plain, plugin).startswith(
        "first difference at .steps[0].result.kwargs.resumable (step 0: runs.create)"
    )
    assert "(step 0: POST /runs)" in difference([{"request": "POST /runs", "status": 200}], [{"request": "POST /runs"}])


def _stream(frames, **marks):
    return {"method": "POST", "path": "/threads/t/stream/events", "frames": frames, **marks}


def test_a_stream_dropped_for_a_later_one_on_its_path_counts_whatever_arrived_before_the_drop():
    aborted = {"(read error)": "AbortError"}
    replay = [{"seq": 1}, {"seq": 2}, aborted]
    saw_nothing = {"steps": [{"http": [_stream([], _unseen=True)]}, {"http": [_stream(replay)]}]}
    saw_some = {"steps": [{"http": [_stream([{"seq": 1}, aborted])]}, {"http": [_stream(replay)]}]}
    assert difference(saw_nothing, saw_some) is None
    # The later stream is compared in full.
    assert difference(saw_nothing, {"steps": [saw_some["steps"][0], {"http": [_stream([{"seq": 1}, aborted])]}]})


def test_a_dropped_stream_no_later_stream_replays_keeps_its_frames_compared():
    aborted = {"(read error)": "AbortError"}
    assert difference([_stream([{"seq": 1}, aborted])], [_stream([{"seq": 1}, {"seq": 2}, aborted])]) is not None


def _tool_end(message_id):
    output = {"type": "tool", "id": message_id, "content": "It is windy", "tool_call_id": "call_1"}
    return {"event": "events", "data": {"event": "on_tool_end", "data": {"output": output}}}


def test_a_tool_message_id_the_reducer_may_not_have_given_yet_is_timing_and_nothing_else_is():
    later = {"event": "events", "data": {"event": "on_chain_end", "data": {"output": {"messages": [{"id": A}]}}}}
    assert difference([_tool_end(None), later], [_tool_end(A), later]) is None
    # The message's id is still compared where the frame is not the tool's end.
    assert difference([_tool_end(A), later], [_tool_end(A), {**later, "data": {**later["data"], "data": {"output": {"messages": [{"id": None}]}}}}])
    # The tool's content, and a tool message outside an `on_tool_end` event, are compared.
    changed = _tool_end(None)
    changed["data"]["data"]["output"]["content"] = "It is calm"
    assert difference([_tool_end(None)], [changed]) is not None
    outside = {"event": "on_tool_start", "data": {"output": {"type": "tool", "id": None}}}
    assert difference([outside], [{**outside, "data": {"output": {"type": "tool", "id": A}}}]) is not None
