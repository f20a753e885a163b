"""How a run ended becomes its last records: failed, cancelled, paused at an interrupt, returned.

The parts have the shapes a `langgraph dev` server sends (see
`tests/e2e/test_run_outcomes.py` for the same against real servers); the outcome is
what `read_outcome` learns from the server once the stream is over.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import httpx
import pytest

from journal_bridge.host.runtime_reads import RuntimeUnreadable
from journal_bridge.host.outcome import (
    CANCELLED,
    COMPLETED,
    ERRORED,
    INTERRUPTED,
    RunOutcome,
    read_outcome,
    rollback_removed_checkpoints,
)
from journal_bridge.mapping.events_mapper import RunMapper, map_parts
from journal_bridge.mapping.state_mapper import StateMapper
from journal_bridge.model.envelope import make_event
from journal_bridge.projection import history
from tests.harness.contract import contract_violations

THREAD, RUN = "thread-1", "run-1"
HUMAN = {"type": "human", "content": "ask the human about Rome", "id": "h1"}
CALL = {"name": "ask_human", "args": {"question": "Rome"}, "id": "call-1", "type": "tool_call"}
AI = {"type": "ai", "content": "", "id": "a1", "tool_calls": [CALL]}
INTERRUPT = {"value": {"question": "Rome"}, "id": "i1", "response_schema": None}


def _event(kind: str, run_id: str, parents: list[str], data: dict, **extra) -> tuple[str, dict]:
    return "events", {"event": kind, "run_id": run_id, "parent_ids": parents, "data": data, **extra}


def _events_until_the_answer() -> list[tuple[str, dict]]:
    """A run's `events` parts up to its first model answer."""
    node = {"metadata": {"langgraph_checkpoint_ns": "model:1", "langgraph_node": "model"}}
    return [
        _event("on_chain_start", RUN, [], {"input": {"messages": [{"role": "user", "content": HUMAN["content"]}]}},
               name="outcomes", metadata={"graph_id": "outcomes", "assistant_id": "asst"}),
        ("values", {"messages": [HUMAN]}),
        _event("on_chain_start", "node-1", [RUN], {"input": {"messages": [HUMAN]}}, name="model", **node),
        _event("on_chat_model_end", "llm-1", [RUN, "node-1"], {"output": AI}, name="OfflineChatModel", **node),
        ("values", {"messages": [HUMAN, AI]}),
    ]


def _root_end() -> tuple[str, dict]:
    return _event("on_chain_end", RUN, [], {"output": {"messages": [HUMAN, AI]}}, name="outcomes")


def _kinds(records) -> list[str]:
    return [r.event_type for r in records]


def _assert_contract(records) -> None:
    # As a store would return them: numbered in order.
    for seq, record in enumerate(records, start=1):
        assert contract_violations(replace(record, seq=seq)) == [], record


# -- the events mapper ------------------------------------------------------------


def test_events_stream_that_stops_on_a_cancel_ends_in_a_cancelled_run_error():
    mapper = RunMapper(THREAD, RUN)
    records = [r for part in _events_until_the_answer() for r in mapper.feed(*part)]
    assert mapper.outcome_wanted == {"interrupts": True}, "a stream that just stopped needs the server's word"
    cancel = {"error": "UserInterrupt", "message": "interrupt requested via POST /threads/{thread_id}/runs/{run_id}/cancel"}
    records += mapper.flush(RunOutcome("interrupted", cancel))
    assert _kinds(records) == ["run.start", "llm.human.input", "llm.ai.response", "run.error"]
    error = records[-1]
    assert (error.category, error.content) == ("error", cancel["message"])
    assert error.metadata == {"error_type": "CancelledError", "action": "interrupt"}
    assert mapper.ending == CANCELLED
    _assert_contract(records)


def test_a_rolled_back_run_says_so():
    records = map_parts(THREAD, RUN, _events_until_the_answer(), RunOutcome("rollback"))
    assert records[-1].metadata == {"error_type": "CancelledError", "action": "rollback"}
    assert records[-1].content == "the run was cancelled"


# langgraph-api 0.11 ends a cancelled run's stream with this error part and
# leaves the same error, reason withheld, on the run's thread.
UNDISCLOSED_CANCEL = {"error": "UserInterrupt", "message": "An internal error occurred"}


def test_a_cancel_whose_reason_the_server_did_not_keep_says_only_that_the_run_was_cancelled():
    mapper = RunMapper(THREAD, RUN)
    records = [r for part in [*_events_until_the_answer(), ("error", UNDISCLOSED_CANCEL)] for r in mapper.feed(*part)]
    assert mapper.outcome_wanted == {"interrupts": True}, "an error part of a cancel is no failure"
    records += mapper.flush(RunOutcome("interrupted", UNDISCLOSED_CANCEL))
    assert _kinds(records) == ["run.start", "llm.human.input", "llm.ai.response", "run.error"]
    assert (records[-1].content, records[-1].metadata) == (
        "the run was cancelled", {"error_type": "CancelledError", "action": "interrupt"}
    )
    assert mapper.ending == CANCELLED


def test_a_paused_run_journals_its_interrupts_before_run_end():
    mapper = RunMapper(THREAD, RUN)
    records = [r for part in [*_events_until_the_answer(), _root_end()] for r in mapper.feed(*part)]
    assert "run.end" not in _kinds(records), "run.end waits for the outcome"
    assert mapper.outcome_wanted == {"status": "success", "interrupts": True}
    records += mapper.flush(RunOutcome("success", interrupts=({"id": "i1", "value": {"question": "Rome"}},)))
    assert _kinds(records)[-2:] == ["run.interrupt", "run.end"]
    assert records[-2].category == "outputs"
    assert records[-2].content == {"interrupts": [{"id": "i1", "value": {"question": "Rome"}}]}
    assert records[-1].metadata == {"status": "success"}
    assert mapper.ending == INTERRUPTED
    _assert_contract(records)


def test_a_run_that_returned_ends_in_run_end_alone():
    mapper = RunMapper(THREAD, RUN)
    for part in [*_events_until_the_answer(), _root_end()]:
        mapper.feed(*part)
    assert _kinds(mapper.flush(RunOutcome("success"))) == ["run.end"]
    assert mapper.ending == COMPLETED
    # Without an outcome (nobody asked the server how the run ended) it still ends.
    assert _kinds(map_parts(THREAD, RUN, [*_events_until_the_answer(), _root_end()]))[-1] == "run.end"


def test_an_error_part_ends_the_run_once_and_needs_no_outcome():
    mapper = RunMapper(THREAD, RUN)
    records = [r for part in _events_until_the_answer() for r in mapper.feed(*part)]
    records += mapper.feed("error", {"error": "ToolFailure", "message": "the tool failed: disk"})
    assert mapper.outcome_wanted is None
    records += mapper.flush(None)
    assert _kinds(records)[-1] == "run.error" and _kinds(records).count("run.error") == 1
    assert (records[-1].content, records[-1].metadata) == ("the tool failed: disk", {"error_type": "ToolFailure"})
    assert mapper.ending == ERRORED
    _assert_contract(records)


def test_a_missed_error_part_comes_from_the_outcome():
    failed = RunOutcome("error", {"error": "SettingsError", "message": "summarization.keep: missing"})
    records = map_parts(THREAD, RUN, _events_until_the_answer(), failed)
    assert (records[-1].content, records[-1].metadata) == ("summarization.keep: missing", {"error_type": "SettingsError"})
    unknown = map_parts(THREAD, RUN, _events_until_the_answer(), RunOutcome("timeout"))
    assert (unknown[-1].content, unknown[-1].metadata) == ("the run ended with status timeout", {"error_type": "TimeoutError"})
    _assert_contract([*records, *unknown])


# -- the state mapper ----------------------------------------------------------------


def _state_mapper() -> tuple[StateMapper, list]:
    mapper = StateMapper(THREAD, RUN)
    records = mapper.start("outcomes", "asst", {"messages": [{"role": "user", "content": HUMAN["content"]}]})
    return mapper, records


def test_values_of_a_run_whose_stream_ends_in_a_cancel_part_end_in_a_cancelled_run_error():
    mapper, records = _state_mapper()
    for state in ({"messages": [HUMAN]}, {"messages": [HUMAN, AI]}):
        records += mapper.feed("values", state)
    records += mapper.feed("error", UNDISCLOSED_CANCEL)
    assert mapper.outcome_wanted == {}, "the cancel needs the server's word"
    records += mapper.flush(None, RunOutcome("interrupted", UNDISCLOSED_CANCEL))
    assert _kinds(records) == ["run.start", "llm.human.input", "llm.ai.response", "run.error"]
    assert (records[-1].content, records[-1].metadata) == (
        "the run was cancelled", {"error_type": "CancelledError", "action": "interrupt"}
    )
    assert mapper.ending == CANCELLED


def test_values_with_interrupts_journal_them_before_run_end():
    mapper, records = _state_mapper()
    for state in ({"messages": [HUMAN]}, {"messages": [HUMAN, AI]}, {"messages": [HUMAN, AI], "__interrupt__": [INTERRUPT]}):
        records += mapper.feed("values", state)
    assert mapper.outcome_wanted == {}, "the values show interrupts: only the status is asked"
    records += mapper.flush(None, RunOutcome("success"))
    assert _kinds(records) == ["run.start", "llm.human.input", "llm.ai.response", "run.interrupt", "run.end"]
    assert records[3].content == {"interrupts": [{"id": "i1", "value": {"question": "Rome"}}]}
    assert records[4].content["output_keys"] == ["messages"]
    assert mapper.ending == INTERRUPTED
    _assert_contract(records)


def test_a_resumed_run_continues_the_conversation_without_repeating_it():
    mapper = StateMapper(THREAD, "run-2")
    records = mapper.start("outcomes", "asst", None)
    tool = {"type": "tool", "content": "The human answered: sunny", "id": "t1", "tool_call_id": "call-1", "name": "ask_human"}
    answer = {"type": "ai", "content": "It is sunny.", "id": "a2", "tool_calls": []}
    for state in ({"messages": [HUMAN, AI]}, {"messages": [HUMAN, AI, tool]}, {"messages": [HUMAN, AI, tool, answer]}):
        records += mapper.feed("values", state)
    records += mapper.flush(None, RunOutcome("success"))
    assert _kinds(records) == ["run.start", "llm.tool.result", "llm.ai.response", "run.end"]
    assert mapper.ending == COMPLETED


@pytest.mark.parametrize(("status", "action"), [("interrupted", "interrupt"), ("rollback", "rollback")])
def test_a_cancelled_state_run_has_no_run_end(status, action):
    mapper, records = _state_mapper()
    records += mapper.feed("values", {"messages": [HUMAN]})
    records += mapper.flush(None, RunOutcome(status))
    assert _kinds(records) == ["run.start", "llm.human.input", "run.error"]
    assert records[-1].metadata == {"error_type": "CancelledError", "action": action}
    assert mapper.ending == CANCELLED
    _assert_contract(records)


def test_a_failed_state_run_whose_error_part_was_missed():
    mapper, records = _state_mapper()
    records += mapper.feed("values", {"messages": [HUMAN]})
    records += mapper.flush(None, RunOutcome("error", {"error": "ToolFailure", "message": "the tool failed: disk"}))
    assert _kinds(records)[-1] == "run.error" and "run.end" not in _kinds(records)
    assert mapper.ending == ERRORED


def test_an_unknown_outcome_counts_as_returned():
    mapper, records = _state_mapper()
    records += mapper.feed("values", {"messages": [HUMAN, AI]})
    assert _kinds(mapper.flush(None, RunOutcome(None))) == ["run.end"]


# -- asking the server ------------------------------------------------------------------


class _Server:
    """The few SDK calls `read_outcome` makes, answered from fixed data."""

    def __init__(self, run=None, thread=None, history=()):
        self._run, self._thread, self._history = run, thread, list(history)
        self.runs = SimpleNamespace(get=self._get_run, join=self._get_run)
        self.threads = SimpleNamespace(get=self._get_thread, get_history=self._get_history)
        self.history_filters = []

    @staticmethod
    def _missing():
        request = httpx.Request("GET", "http://server/x")
        return httpx.HTTPStatusError("404", request=request, response=httpx.Response(404, request=request))

    async def _get_run(self, thread_id, run_id):
        if self._run is None:
            raise self._missing()
        return self._run

    async def _get_thread(self, thread_id):
        if self._thread is None:
            raise self._missing()
        return self._thread

    async def _get_history(self, thread_id, limit, metadata):
        self.history_filters.append(metadata)
        return self._history[:limit]


async def test_a_cancelled_run_reads_its_reason_from_the_thread():
    reason = "client disconnected from the run stream (on_disconnect=cancel)"
    server = _Server({"status": "interrupted"}, {"status": "idle", "error": {"error": "UserInterrupt", "message": reason}})
    outcome = await read_outcome(server, THREAD, RUN)
    assert outcome.cancelled and (outcome.reason, outcome.cancel_action) == (reason, "interrupt")


async def test_a_thread_error_of_another_kind_is_not_taken_for_the_run():
    server = _Server({"status": "error"}, {"status": "idle", "error": {"error": "UserInterrupt", "message": "x"}})
    outcome = await read_outcome(server, THREAD, RUN)
    assert outcome.failed and outcome.error is None


async def test_a_run_gone_from_a_thread_that_remains_was_rolled_back():
    outcome = await read_outcome(_Server(None, {"status": "idle", "error": None}), THREAD, RUN)
    assert outcome.cancelled and outcome.cancel_action == "rollback"
    # A stateless run's thread is deleted with it: nothing can be said.
    assert (await read_outcome(_Server(None, None), THREAD, RUN)).status is None


async def test_interrupts_come_from_the_runs_own_last_checkpoint():
    server = _Server(None, None, history=[{"interrupts": [INTERRUPT], "next": ["tools"]}])
    outcome = await read_outcome(server, THREAD, RUN, status="success", interrupts=True)
    assert outcome.interrupts == ({"id": "i1", "value": {"question": "Rome"}},)
    assert server.history_filters == [{"run_id": RUN}]


# -- history ------------------------------------------------------------------------


def _stored(seq: int, event_type: str, content, metadata=None):
    return make_event(thread_id=THREAD, run_id=RUN, event_type=event_type, content=content, metadata=metadata)


def test_run_outcomes_project_to_run_status_items():
    events = [
        _stored(1, "llm.human.input", HUMAN, {"caller": "lead_agent"}),
        _stored(2, "run.error", "the tool failed: <b>disk</b>", {"error_type": "ToolFailure"}),
        _stored(3, "run.error", "interrupt requested", {"error_type": "CancelledError", "action": "interrupt"}),
        _stored(4, "run.interrupt", {"interrupts": [{"id": "i1", "value": {"question": "Rome"}}]}),
        _stored(5, "run.end", {"output_keys": ["messages"]}, {"status": "success"}),
    ]
    events = [replace(event, seq=index + 1) for index, event in enumerate(events)]
    items = history.project(events)
    assert [item["type"] for item in items] == ["human", "run_status", "run_status", "run_status"]
    failed, cancelled, paused = items[1:]
    assert (failed["status"], failed["error_type"], failed["message"]) == ("failed", "ToolFailure", "the tool failed: <b>disk</b>")
    assert (cancelled["status"], cancelled["error_type"], cancelled["id"]) == ("cancelled", "CancelledError", "run-status-3")
    assert (paused["status"], paused["interrupts"]) == ("interrupted", [{"id": "i1", "value": {"question": "Rome"}}])
    assert all(item["seq"] == index for item, index in zip(items, [1, 2, 3, 4], strict=True))
    langchain_types = {"human", "ai", "tool", "system", "function", "chat", "remove", "AIMessageChunk"}
    assert history.RUN_STATUS_TYPE not in langchain_types


def test_the_cli_prints_run_statuses_inline():
    from journal_bridge.cli import format_item

    failed = {"type": "run_status", "seq": 4, "status": "failed", "error_type": "ToolFailure", "message": "disk"}
    paused = {"type": "run_status", "seq": 9, "status": "interrupted", "interrupts": [{"id": "i1", "value": {"q": "Rome"}}]}
    assert format_item(failed).splitlines() == ["[4] ── run failed: ToolFailure ──", "    disk"]
    assert format_item(paused).splitlines()[0] == "[9] ── run interrupted ──"
    assert '"q": "Rome"' in format_item(paused)


class _InProcess(_Server):
    """A client that reads a run's status from the server's runtime, as `in_process.InProcessClient` does."""

    def __init__(self, status, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._status = status
        self.runs = SimpleNamespace(get=self._no_request, join=self._get_run)

    async def _no_request(self, thread_id, run_id):
        raise AssertionError("the run's status was asked of the server by request")

    async def run_status(self, thread_id, run_id):
        if isinstance(self._status, Exception):
            raise self._status
        return self._status


async def test_an_in_process_client_reads_the_status_from_the_runtime_without_a_request():
    assert (await read_outcome(_InProcess((True, "success")), THREAD, RUN)).status == "success"
    reason = "cancelled by the client"
    thread = {"status": "idle", "error": {"error": "UserInterrupt", "message": reason}}
    outcome = await read_outcome(_InProcess((True, "interrupted"), None, thread), THREAD, RUN)
    assert outcome.cancelled and outcome.reason == reason
    # Not in the runtime while the thread is: rolled back, as a 404 says.
    outcome = await read_outcome(_InProcess((False, None), None, {"status": "idle", "error": None}), THREAD, RUN)
    assert outcome.cancel_action == "rollback"


async def test_a_runtime_that_cannot_be_read_leaves_the_status_to_runs_get():
    server = _InProcess(RuntimeUnreadable("not inside a server"), {"status": "error"}, {"status": "idle", "error": None})
    server.runs = SimpleNamespace(get=server._get_run, join=server._get_run)
    assert (await read_outcome(server, THREAD, RUN)).failed
    # Any other failure of the runtime read: the server's route is asked.
    broken = _InProcess(TypeError("another runtime's signature"), {"status": "error"}, {"status": "idle", "error": None})
    broken.runs = SimpleNamespace(get=broken._get_run, join=broken._get_run)
    assert (await read_outcome(broken, THREAD, RUN)).failed


async def test_a_rollback_that_kept_the_runs_checkpoints_is_told_apart():
    """langgraph-runtime-inmem removes a rolled back run's checkpoints, then the run;
    langgraph-runtime-pg 0.11 removes the run only."""
    removed = _Server(None, {"status": "idle"}, history=[])
    assert await rollback_removed_checkpoints(removed, THREAD, RUN)
    assert removed.history_filters == [{"run_id": RUN}]
    kept = _Server(None, {"status": "idle"}, history=[{"metadata": {"run_id": RUN}}])
    assert not await rollback_removed_checkpoints(kept, THREAD, RUN)


async def test_a_rollback_is_asked_about_once_its_run_is_gone():
    server = _Server({"status": "running"}, {"status": "idle"}, history=[{"metadata": {"run_id": RUN}}])
    reads = 0
    get_run = server.runs.get

    async def run_then_gone(thread_id, run_id):
        nonlocal reads
        reads += 1
        if reads == 3:
            # Deleted with its checkpoints meanwhile.
            server._run, server._history = None, []
        return await get_run(thread_id, run_id)

    server.runs.get = run_then_gone
    assert await rollback_removed_checkpoints(server, THREAD, RUN, poll=0.01)
    assert reads == 3
