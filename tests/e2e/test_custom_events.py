"""The summarization event through a real `langgraph dev` of this project.

An assistant created with early-compaction settings compacts on the third
turn; the event must reach SDK clients on the `events` stream mode (as
`on_custom_event` with the server's run metadata) and on the `custom` mode.
Every record the journal keeps of these runs, the failed one included, keeps
deer-flow's run event stream contract.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk import get_client

from tests.harness.contract import journaled_records
from tests.harness.conversation import wait_journal_idle

pytestmark = pytest.mark.e2e

EARLY = {
    "summarization": {
        "trigger": [{"type": "messages", "value": 6}],
        "keep": {"type": "messages", "value": 2},
    }
}
WARM_UP = ["hello", "add 2 and 3"]
COMPACTING_TURN = "what is the weather in Paris?"


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def prepared_thread(client, config: dict[str, Any] | None = EARLY):
    """An assistant and a thread whose next turn compacts (when `config` says so)."""
    assistant = await client.assistants.create("agent", config={"configurable": config or {}})
    thread = await client.threads.create()
    for text in WARM_UP:
        await client.runs.wait(thread["thread_id"], assistant["assistant_id"], input=user(text))
    return assistant, thread


async def journaled(server, thread) -> list[Any]:
    """The thread's records, once every run is journaled, checked against the contract."""
    await wait_journal_idle(server.url)
    return await journaled_records(server.store_url, thread["thread_id"])


async def message_ids(client, thread) -> list[str]:
    state = await client.threads.get_state(thread["thread_id"])
    return [m["id"] for m in state["values"]["messages"]]


async def test_events_mode_delivers_on_custom_event_with_run_metadata(dev_server):
    client = get_client(url=dev_server.url)
    assistant, thread = await prepared_thread(client)
    before = await message_ids(client, thread)

    run_id = None
    custom_events = []
    async for part in client.runs.stream(
        thread["thread_id"],
        assistant["assistant_id"],
        input=user(COMPACTING_TURN),
        stream_mode="events",
    ):
        if part.event == "metadata":
            run_id = part.data["run_id"]
        elif part.event == "events" and part.data["event"] == "on_custom_event":
            custom_events.append(part.data)

    assert [e["name"] for e in custom_events] == ["summarization"]
    event = custom_events[0]
    metadata = event["metadata"]
    assert metadata["thread_id"] == thread["thread_id"]
    assert metadata["run_id"] == run_id
    assert isinstance(metadata["langgraph_step"], int)
    payload = event["data"]
    after = await message_ids(client, thread)
    assert set(payload["replaced_message_ids"]) == set(before) - set(after)
    assert payload["replaced_count"] == len(payload["replaced_message_ids"]) == 5
    assert after[0] == payload["summary_message_id"]
    assert payload["trigger"] == {"type": "messages", "value": 6}
    markers = [r for r in await journaled(dev_server, thread) if r.event_type == "middleware:summarize"]
    assert [m.content["changes"]["summary_message_id"] for m in markers] == [payload["summary_message_id"]]


async def test_custom_mode_delivers_the_payload(dev_server):
    client = get_client(url=dev_server.url)
    assistant, thread = await prepared_thread(client)

    payloads = [
        part.data
        async for part in client.runs.stream(
            thread["thread_id"],
            assistant["assistant_id"],
            input=user(COMPACTING_TURN),
            stream_mode="custom",
        )
        if part.event == "custom"
    ]

    assert len(payloads) == 1
    payload = payloads[0]
    assert payload["event"] == "summarization"
    assert payload["middleware"] == "AssistantSummarizationMiddleware"
    assert payload["summary"].startswith("User requests: hello | add 2 and 3")
    assert (await message_ids(client, thread))[0] == payload["summary_message_id"]
    markers = [r for r in await journaled(dev_server, thread) if r.event_type == "middleware:summarize"]
    assert [m.content["changes"]["summary_message_id"] for m in markers] == [payload["summary_message_id"]]


async def test_default_assistant_does_not_compact_a_short_thread(dev_server):
    client = get_client(url=dev_server.url)
    assistant, thread = await prepared_thread(client, config=None)

    parts = [
        part
        async for part in client.runs.stream(
            thread["thread_id"],
            assistant["assistant_id"],
            input=user(COMPACTING_TURN),
            stream_mode=["events", "custom"],
        )
    ]

    assert not [p for p in parts if p.event == "custom"]
    assert not [
        p for p in parts if p.event == "events" and p.data["event"] == "on_custom_event"
    ]
    assert any(p.event == "events" for p in parts)
    records = await journaled(dev_server, thread)
    assert not [r for r in records if r.event_type == "middleware:summarize"]


async def test_invalid_assistant_settings_fail_the_run_naming_the_field(dev_server):
    client = get_client(url=dev_server.url)
    assistant = await client.assistants.create(
        "agent",
        config={"configurable": {"summarization": {"trigger": [{"type": "foo", "value": 1}]}}},
    )
    thread = await client.threads.create()

    errors = [
        part.data
        async for part in client.runs.stream(
            thread["thread_id"], assistant["assistant_id"], input=user("hi")
        )
        if part.event == "error"
    ]

    assert errors
    assert "summarization.trigger[0].type: expected one of messages, tokens, fraction" in str(
        errors[0]
    )
    records = await journaled(dev_server, thread)
    assert [r.event_type for r in records][-1] == "run.error"
