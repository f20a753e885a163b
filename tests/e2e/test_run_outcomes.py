"""Runs that fail, are cancelled or pause at an interrupt, journaled by a real `langgraph dev`.

Each test runs against a server capturing from `events` and one capturing
from `values` + `custom` (`JOURNAL_BRIDGE_CAPTURE=events` / `=lean`), and
checks the thread's records (order, outcome, deer-flow's contract), the
history API and the health counters.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from tests.harness.contract import journaled_records
from tests.harness.conversation import human, wait_journal_idle
from tests.harness.langgraph_server import HARNESS, PROJECT_ROOT, LanggraphDevServer, journaled_cancel_reason, project_config

pytestmark = pytest.mark.e2e

INVALID_SUMMARIZATION = {"summarization": {"trigger": [{"type": "foo", "value": 3}]}}


@pytest.fixture(scope="module", params=["events", "lean"])
def server(request, tmp_path_factory) -> Iterator[LanggraphDevServer]:
    config = project_config(
        graphs={
            "agent": str(PROJECT_ROOT / "graphs" / "agent.py") + ":graph",
            "outcomes": str(HARNESS / "graphs" / "outcomes.py") + ":graph",
        }
    )
    workdir = tmp_path_factory.mktemp(f"outcomes-{request.param}")
    with LanggraphDevServer(config=config, env={"JOURNAL_BRIDGE_CAPTURE": request.param}, workdir=workdir) as dev:
        yield dev


async def _records(server, thread_id: str) -> list[Any]:
    return await journaled_records(server.store_url, thread_id)


def _shape(records) -> list[tuple[str, str]]:
    """(event_type, message type) of each record, for the order of a run's journal."""
    return [(r.event_type, r.content.get("type") if r.category == "message" else "") for r in records]


def _assert_failed_in_the_tool(records) -> None:
    """The journal of a run whose tool raised ("fail because disk"): its model's call, then the error."""
    assert _shape(records) == [
        ("run.start", ""), ("llm.human.input", "human"), ("llm.ai.response", "ai"), ("run.error", ""),
    ]
    assert (records[-1].content, records[-1].metadata) == ("the tool failed: disk", {"error_type": "ToolFailure"})


async def _history(server, thread_id: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        response = await http.get(f"/journal/threads/{thread_id}/messages", params={"limit": 100})
    assert response.status_code == 200
    return response.json()["data"]


async def _health(server) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        return (await http.get("/journal/health")).json()


def _counted(before: dict, after: dict) -> dict[str, int]:
    keys = ("runs_errored", "runs_cancelled", "runs_interrupted", "runs_failed")
    return {key: after[key] - before[key] for key in keys}


async def _until_tool_call(client, thread_id: str) -> None:
    """Wait until the run's model has asked for a tool (the run is then in or before the tool)."""
    while True:
        state = await client.threads.get_state(thread_id)
        if any(m.get("tool_calls") for m in (state["values"] or {}).get("messages", [])):
            return
        await asyncio.sleep(0.05)


async def test_a_run_that_fails_in_the_graph_ends_in_run_error(server):
    client = get_client(url=server.url)
    before = await _health(server)

    # A tool that raises, for a client streaming values.
    raised = (await client.threads.create())["thread_id"]
    frames = [p async for p in client.runs.stream(raised, "outcomes", input=human("fail because disk"), stream_mode="values")]
    assert frames[-1].event == "error"
    # Invalid summarization settings, for a background run nobody streams.
    assistant = await client.assistants.create("agent", config={"configurable": INVALID_SUMMARIZATION})
    invalid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(invalid, assistant["assistant_id"], input=human("hello"))
    await client.runs.join(invalid, run["run_id"])
    assert (await client.runs.get(invalid, run["run_id"]))["status"] == "error"
    after = await wait_journal_idle(server.url)

    _assert_failed_in_the_tool(await _records(server, raised))
    records = await _records(server, invalid)
    assert _shape(records) == [("run.start", ""), ("llm.human.input", "human"), ("run.error", "")]
    assert records[-1].metadata == {"error_type": "SettingsError"}
    assert records[-1].content.startswith("summarization.trigger[0].type: expected one of")

    items = await _history(server, invalid)
    assert [item["type"] for item in items] == ["human", "run_status"]
    assert items[-1]["status"] == "failed" and items[-1]["error_type"] == "SettingsError"
    assert items[-1]["message"] == records[-1].content and items[-1]["run_id"] == run["run_id"]
    assert _counted(before, after) == {"runs_errored": 2, "runs_cancelled": 0, "runs_interrupted": 0, "runs_failed": 0}
    assert after["status"] == "ok", "a run failing in the graph is no journaling problem"


async def test_a_cancelled_run_journals_what_happened_before_the_cancel(server):
    client = get_client(url=server.url)
    before = await _health(server)

    # runs.cancel of a background run.
    cancelled = (await client.threads.create())["thread_id"]
    run = await client.runs.create(cancelled, "outcomes", input=human("block until Tuesday"))
    await _until_tool_call(client, cancelled)
    await client.runs.cancel(cancelled, run["run_id"], wait=True)
    # A streaming client that leaves, having asked for on_disconnect="cancel".
    left = (await client.threads.create())["thread_id"]
    async for part in client.runs.stream(
        left, "outcomes", input=human("block until Friday"), stream_mode="values", on_disconnect="cancel"
    ):
        if part.event == "values" and any(m.get("tool_calls") for m in part.data["messages"]):
            break
    while (await client.runs.list(left))[0]["status"] in ("pending", "running"):
        await asyncio.sleep(0.05)
    after = await wait_journal_idle(server.url)

    reasons = {
        cancelled: journaled_cancel_reason("interrupt requested via POST /threads/{thread_id}/runs/{run_id}/cancel"),
        left: journaled_cancel_reason("client disconnected from the run stream (on_disconnect=cancel)"),
    }
    for thread_id, reason in reasons.items():
        records = await _records(server, thread_id)
        assert _shape(records) == [
            ("run.start", ""), ("llm.human.input", "human"), ("llm.ai.response", "ai"), ("run.error", ""),
        ]
        assert records[2].content["tool_calls"][0]["name"] == "block"
        assert records[-1].category == "error" and records[-1].content == reason
        assert records[-1].metadata == {"error_type": "CancelledError", "action": "interrupt"}
        items = await _history(server, thread_id)
        assert [item["type"] for item in items] == ["human", "ai", "run_status"]
        assert (items[-1]["status"], items[-1]["message"]) == ("cancelled", reason)
    assert _counted(before, after) == {"runs_errored": 0, "runs_cancelled": 2, "runs_interrupted": 0, "runs_failed": 0}


# The journal learns of the interrupt from the `values` or `updates` frames the client
# streams, or, when it streams neither, from the run's last checkpoint.
@pytest.mark.parametrize("modes", [["values"], ["updates", "messages-tuple"], ["messages-tuple"]])
async def test_an_interrupted_run_and_its_resume_make_one_conversation(server, modes):
    client = get_client(url=server.url)
    before = await _health(server)
    thread_id = (await client.threads.create())["thread_id"]
    first = [p async for p in client.runs.stream(thread_id, "outcomes", input=human("ask the human about Rome"), stream_mode=modes)]
    if modes == ["values"]:
        assert first[-1].data["__interrupt__"][0]["value"] == {"question": "Rome"}
    await wait_journal_idle(server.url)
    async for _ in client.runs.stream(thread_id, "outcomes", command={"resume": "sunny"}, stream_mode=modes):
        pass
    after = await wait_journal_idle(server.url)

    records = await _records(server, thread_id)
    paused_run, resumed_run = list(dict.fromkeys(r.run_id for r in records))
    assert _shape(records) == [
        ("run.start", ""), ("llm.human.input", "human"), ("llm.ai.response", "ai"),
        ("run.interrupt", ""), ("run.end", ""),
        ("run.start", ""), ("llm.tool.result", "tool"), ("llm.ai.response", "ai"), ("run.end", ""),
    ]
    assert [r.run_id for r in records] == [paused_run] * 5 + [resumed_run] * 4
    interrupt = records[3]
    assert interrupt.category == "outputs"
    assert [i["value"] for i in interrupt.content["interrupts"]] == [{"question": "Rome"}]
    assert "resume" in records[5].content["input_keys"], "the resumed run starts from the command"
    assert records[6].content["content"] == "The human answered: sunny"
    # The journal holds the thread's conversation exactly once, in order.
    state = await client.threads.get_state(thread_id)
    journaled = [r.content["id"] for r in records if r.category == "message"]
    assert journaled == [m["id"] for m in state["values"]["messages"]]
    assert len({r.source_key for r in records}) == len(records)

    items = await _history(server, thread_id)
    assert [item["type"] for item in items] == ["human", "ai", "run_status", "tool", "ai"]
    assert items[2]["status"] == "interrupted" and items[2]["run_id"] == paused_run
    assert [i["value"] for i in items[2]["interrupts"]] == [{"question": "Rome"}]
    assert _counted(before, after) == {"runs_errored": 0, "runs_cancelled": 0, "runs_interrupted": 1, "runs_failed": 0}


async def test_created_runs_read_from_their_clients_joins_end_as_they_did(server):
    """A failure, an interrupt and a client that leaves a join with cancel_on_disconnect,
    each on a run created and joined at once by its client (read from that join)."""
    client = get_client(url=server.url)
    before = await _health(server)

    async def created(text: str, *, joined: str, **join: Any) -> tuple[str, list[Any]]:
        thread_id = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread_id, "outcomes", input=human(text), after_seconds=1)
        parts = []
        async for part in client.runs.join_stream(thread_id, run["run_id"], stream_mode=joined, **join):
            parts.append(part)
            if join and part.event == "values" and any(m.get("tool_calls") for m in part.data["messages"]):
                break  # leaves while the tool blocks: the join cancels the run
        return thread_id, parts

    failed, parts = await created("fail because disk", joined="values")
    assert [p.event for p in parts] == ["values", "values"], "a join of values gets no error frame"
    paused, _ = await created("ask the human about Rome", joined="messages-tuple")
    left, _ = await created("block until Monday", joined="values", cancel_on_disconnect=True)
    while (await client.runs.list(left))[0]["status"] in ("pending", "running"):
        await asyncio.sleep(0.05)
    after = await wait_journal_idle(server.url)

    _assert_failed_in_the_tool(await _records(server, failed))
    records = await _records(server, paused)
    assert _shape(records)[-2:] == [("run.interrupt", ""), ("run.end", "")]
    assert [i["value"] for i in records[-2].content["interrupts"]] == [{"question": "Rome"}]
    records = await _records(server, left)
    assert _shape(records)[-1] == ("run.error", "") and records[-1].metadata["error_type"] == "CancelledError"
    assert records[-1].content == journaled_cancel_reason("client disconnected from the run stream (on_disconnect=cancel)")
    assert after["runs_read_from_client_joins"] - before["runs_read_from_client_joins"] == 3
    assert _counted(before, after) == {"runs_errored": 1, "runs_cancelled": 1, "runs_interrupted": 1, "runs_failed": 0}
