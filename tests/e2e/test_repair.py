"""`POST /journal/threads/{id}/repair` backfills a thread inside the plugin server."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from langgraph_sdk import get_client

from journal_bridge.projection.history import project
from journal_bridge.store import open_store
from tests.harness.conversation import EARLY_SUMMARIZATION, TURNS, stream_turn, wait_journal_idle
from tests.harness.langgraph_server import HARNESS

pytestmark = pytest.mark.e2e

_COMPARED = (
    "type", "id", "content", "run_id", "replaced_count", "condensed_count", "preserved_count", "summary",
    "summary_message_id",
)


def _view(items):
    return [{k: item.get(k) for k in _COMPARED if k != "id" or item["type"] != "summary_marker"} for item in items]


async def test_repair_restores_a_lost_journal_as_the_bridge_wrote_it(dev_server):
    client = get_client(url=dev_server.url)
    assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
    thread_id = (await client.threads.create())["thread_id"]
    for text in TURNS:
        await stream_turn(client, thread_id, assistant["assistant_id"], text, "values")
    await wait_journal_idle(dev_server.url)
    async with open_store(dev_server.store_url) as store:
        journaled = project(await store.list_timeline(thread_id, limit=500))
        await store.delete_by_thread(thread_id)

    async with httpx.AsyncClient(base_url=dev_server.url, timeout=60) as http:
        repaired = await http.post(f"/journal/threads/{thread_id}/repair")
        again = await http.post(f"/journal/threads/{thread_id}/repair")
        unknown = await http.post("/journal/threads/00000000-0000-0000-0000-000000000000/repair")
        page = (await http.get(f"/journal/threads/{thread_id}/messages", params={"limit": 500})).json()

    assert repaired.status_code == 200, repaired.text
    body = repaired.json()
    assert body["status"] == "complete" and body["written"] == len(journaled)
    assert again.json()["written"] == 0 and again.json()["already_present"] == len(journaled)
    assert unknown.status_code == 404 and "detail" in unknown.json()
    assert _view(page["data"]) == _view(journaled)
    assert sum(item["type"] == "summary_marker" for item in page["data"]) >= 2


async def test_repair_is_allowed_exactly_to_those_who_may_read_the_thread(start_dev_server):
    from tests.harness.langgraph_server import project_config

    auth = HARNESS / "auth" / "auth.py"
    server = start_dev_server(
        config=project_config(auth={"path": f"{auth}:auth"}, http={"enable_custom_route_auth": True})
    )
    owner = {"Authorization": "Bearer token-a"}
    client = get_client(url=server.url, api_key=None, headers=owner)
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, "agent", input={"messages": [{"role": "user", "content": "add 2 and 3"}]})
    path = f"/journal/threads/{thread_id}/repair"
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        anonymous = await http.post(path)
        other = await http.post(path, headers={"Authorization": "Bearer token-b"})
        async with open_store(server.store_url) as store:
            await _journal_idle(http, owner)
            await store.delete_by_thread(thread_id)
            mine = await http.post(path, headers=owner)
            assert await store.last_seq(thread_id) > 0

    assert anonymous.status_code in (401, 403)
    assert other.status_code == 404
    assert mine.status_code == 200 and mine.json()["written"] > 0


async def _journal_idle(http, headers):
    for _ in range(600):
        health = (await http.get("/journal/health", headers=headers)).json()
        if health["active_runs"] == 0 and health["backlog"] == 0:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"journal still busy: {health}")
