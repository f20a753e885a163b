"""Capture settings against real servers: the same journal whichever way a run is captured,
and a run journaled to its end when its client leaves early.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from journal_bridge.model.records import is_hidden
from journal_bridge.store import open_store
from tests.harness.conversation import EARLY_SUMMARIZATION, human, wait_journal_idle
from tests.harness.langgraph_server import LanggraphDevServer

pytestmark = pytest.mark.e2e

SETTINGS = ("auto", "events", "lean")
TURNS = ["hello", "add 2 and 3", "what is the weather in Paris", "add 4 and 5", "weather in Oslo"]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LanggraphDevServer]]:
    started: dict[str, LanggraphDevServer] = {}
    try:
        for setting in SETTINGS:
            server = LanggraphDevServer(workdir=tmp_path_factory.mktemp(setting), env={"JOURNAL_BRIDGE_CAPTURE": setting})
            started[setting] = server.start()
        yield started
    finally:
        for server in started.values():
            server.stop()


async def _conversation(server: LanggraphDevServer, how: str) -> str:
    """One thread driven the way `how` says; returns its id once journaled."""
    client = get_client(url=server.url)
    assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
    assistant_id = assistant["assistant_id"]
    thread_id = (await client.threads.create())["thread_id"]
    for text in TURNS:
        if how == "wait":
            await client.runs.wait(thread_id, assistant_id, input=human(text))
        elif how == "create":
            run = await client.runs.create(thread_id, assistant_id, input=human(text))
            await client.runs.join(thread_id, run["run_id"])
        elif how == "create+join_stream":
            # Read from the client's join, where `create` is read by the journal's own; the
            # run starts a second later, so the join holds it from its first frame.
            run = await client.runs.create(thread_id, assistant_id, input=human(text), after_seconds=1)
            async for _ in client.runs.join_stream(thread_id, run["run_id"], stream_mode="values"):
                pass
        else:
            async for _ in client.runs.stream(thread_id, assistant_id, input=human(text), stream_mode=how.split("+")):
                pass
    await wait_journal_idle(server.url)
    return thread_id


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


async def _journal(server: LanggraphDevServer, thread_id: str) -> list[Any]:
    """The thread's records, ids renamed in order of appearance; the model calls outside
    the conversation that only an `events` capture can see (hidden by their caller) are left out."""
    async with open_store(server.store_url) as store:
        page = await store.list_timeline(thread_id, limit=500)
        runs = list(dict.fromkeys(r.run_id for r in page))
        records = [r for run_id in runs for r in await store.list_events(thread_id, run_id, limit=500)]
    kept = [
        [r.event_type, r.category, r.content, r.metadata, r.source_key]
        for r in sorted(records, key=lambda r: r.seq)
        if not is_hidden(r.metadata)
    ]
    text = json.dumps(kept, sort_keys=True)
    # A model streamed (`events`) has an id without the `-0` of an invoked one.
    text = re.sub(r"(lc_run--[0-9a-f-]{36})-0", r"\1", text)
    names: dict[str, str] = {}
    return json.loads(_UUID.sub(lambda m: names.setdefault(m.group(0), f"<id-{len(names)}>"), text))


@pytest.mark.parametrize("how", ["values", "values+messages-tuple+custom", "updates", "wait", "create", "create+join_stream"])
async def test_every_capture_setting_journals_the_same_records(servers, how):
    journals = {setting: await _journal(server, await _conversation(server, how)) for setting, server in servers.items()}
    kinds = [record[0] for record in journals["auto"]]
    assert kinds.count("middleware:summarize") >= 1 and kinds.count("run.end") == len(TURNS)
    assert journals["events"] == journals["auto"]
    assert journals["lean"] == journals["auto"]


@pytest.mark.parametrize("setting", SETTINGS)
async def test_a_created_run_read_from_its_clients_join_is_journaled_as_one_the_journal_joins(servers, setting):
    server = servers[setting]
    before = httpx.get(f"{server.url}/journal/health").json()["runs_read_from_client_joins"]
    from_client = await _journal(server, await _conversation(server, "create+join_stream"))
    assert httpx.get(f"{server.url}/journal/health").json()["runs_read_from_client_joins"] - before == len(TURNS)
    assert from_client == await _journal(server, await _conversation(server, "create"))


async def test_a_client_that_leaves_early_still_gets_its_run_journaled_to_the_end(servers):
    server = servers["auto"]
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]
    body = {"assistant_id": "agent", "input": human("what is the weather in Paris"), "stream_mode": ["values"]}
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        async with http.stream("POST", f"/threads/{thread_id}/runs/stream", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("event: values"):
                    break  # leave after the first state; the run goes on (on_disconnect defaults to continue)
    await client.runs.join(thread_id, (await client.runs.list(thread_id))[0]["run_id"])
    await wait_journal_idle(server.url)
    final = (await client.threads.get_state(thread_id))["values"]["messages"]
    async with open_store(server.store_url) as store:
        page = await store.list_timeline(thread_id, limit=500)
        runs = list(dict.fromkeys(r.run_id for r in page))
        records = [r for run_id in runs for r in await store.list_events(thread_id, run_id, limit=500)]
    messages = [r.content["id"] for r in records if r.category == "message"]
    assert messages == [m["id"] for m in final], (messages, [m["id"] for m in final], [r.event_type for r in records])
    assert [r.event_type for r in records][-1] == "run.end"
