"""`POST /journal/threads/{id}/repair` backfills a thread inside the plugin server."""

from __future__ import annotations

import httpx
import pytest
from conversation import EARLY_SUMMARIZATION, TURNS, stream_turn, wait_journal_idle
from langgraph_sdk import get_client

from journal_bridge.history import project
from journal_bridge.store import open_store

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
