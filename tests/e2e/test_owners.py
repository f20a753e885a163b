"""Every record carries its owner, so deer-flow's Gateway shows each user the journal of their threads.

A real `langgraph dev` with the plugin and an auth handler that behaves like
deer-flow's (session cookie with CSRF, or bearer; `metadata.user_id` stamped on
create, reads filtered by it) journals into deer-flow's `run_events` layout;
the store is then read the way the Gateway reads it: with the requesting
user's id.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from langgraph_sdk import get_client

from journal_bridge.store import open_store
from tests.harness.conversation import EARLY_SUMMARIZATION, TURNS, human
from tests.harness.langgraph_server import HARNESS, project_config
from tests.harness.seed import seed_conversation

pytestmark = pytest.mark.e2e

AUTH_PATH = HARNESS / "auth" / "deerflow_auth.py"
ENGINE_AUTH_PATH = HARNESS / "auth" / "deerflow_engine_auth.py"
ALICE = {"Cookie": "access_token=session-alice; csrf_token=c1", "X-CSRF-Token": "c1"}
BOB = {"Authorization": "Bearer session-bob"}


def _start(start_dev_server, tmp_path, *, auth: bool, env: dict | None = None):
    from tests.harness.langgraph_server import project_config

    config = project_config(auth={"path": f"{AUTH_PATH}:auth"}) if auth else project_config()
    store_url = f"sqlite:///{tmp_path / 'run_events.db'}?layout=deerflow"
    return start_dev_server(config=config, env={"JOURNAL_BRIDGE_STORE_URL": store_url, **(env or {})})


async def _converse(server, headers: dict) -> str:
    """Three turns, one per way a client reads a run: a values stream, a token stream,
    runs.wait; the assistant compacts early, so the journal holds markers too."""
    client = get_client(url=server.url, api_key=None, headers=headers)
    assistant = (await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION}))["assistant_id"]
    thread_id = (await client.threads.create())["thread_id"]
    async for _ in client.runs.stream(thread_id, assistant, input=human(TURNS[0]), stream_mode="values"):
        pass
    async for _ in client.runs.stream(thread_id, assistant, input=human(TURNS[1]), stream_mode=["values", "messages-tuple"]):
        pass
    await client.runs.wait(thread_id, assistant, input=human(TURNS[2]))
    return thread_id


async def _history(server, thread_id: str, headers: dict) -> list[dict]:
    """The journal's history through its own route, as the user; once every turn's answer is in."""
    deadline = time.monotonic() + 60
    while True:
        response = httpx.get(f"{server.url}/journal/threads/{thread_id}/messages", params={"limit": 500},
                             headers=headers, timeout=30)
        items = response.json().get("data", []) if response.status_code == 200 else []
        if sum(i["type"] == "human" for i in items) == 3 and items[-1]["type"] == "ai":
            return items
        assert time.monotonic() < deadline, response.text
        await asyncio.sleep(0.3)


async def _as_gateway(server, thread_id: str, user_id: str) -> list[str]:
    """The message ids deer-flow's Gateway reads for `user_id`: its store's per-user read."""
    async with open_store(server.store_url) as store:
        records = await store.list_messages(thread_id, limit=500, user_id=user_id)
    return [r.content["id"] for r in records]


async def test_the_gateway_shows_each_user_the_journal_of_their_own_threads(start_dev_server, tmp_path):
    server = _start(start_dev_server, tmp_path, auth=True)
    alices = await _converse(server, ALICE)
    bobs = await _converse(server, BOB)
    for thread_id, owner, other, headers in ((alices, "alice", "bob", ALICE), (bobs, "bob", "alice", BOB)):
        history = [i["id"] for i in await _history(server, thread_id, headers) if i["type"] != "summary_marker"]
        assert await _as_gateway(server, thread_id, owner) == history
        assert await _as_gateway(server, thread_id, other) == []
    async with open_store(server.store_url) as store:
        for thread_id in (alices, bobs):
            records = await store.list_timeline(thread_id, categories=("message", "trace", "outputs"), limit=500)
            assert records and {r.user_id for r in records} == {"alice" if thread_id == alices else "bob"}
        # The markers are `middleware` rows: in a run's events for its owner, not on the messages page.
        markers = await store.list_timeline(alices, categories=("middleware",), limit=500)
        assert markers and {r.user_id for r in markers} == {"alice"}
        run_events = await store.list_events(alices, markers[0].run_id, user_id="alice")
        assert "middleware:summarize" in [r.event_type for r in run_events]
        assert await store.list_events(alices, markers[0].run_id, user_id="bob") == []
    # A deer-flow frontend reads them from the journal's routes with the session cookie.
    items = (await _history(server, alices, ALICE))
    assert len([i for i in items if i["type"] == "summary_marker"]) == len(markers)
    assert httpx.get(f"{server.url}/journal/threads/{alices}/messages", headers=BOB, timeout=30).status_code == 404


async def test_with_auth_disabled_the_records_are_the_default_users(start_dev_server, tmp_path):
    server = _start(start_dev_server, tmp_path, auth=False, env={"JOURNAL_BRIDGE_DEFAULT_OWNER": "default"})
    thread_id = await _converse(server, {})
    history = [i["id"] for i in await _history(server, thread_id, {}) if i["type"] != "summary_marker"]
    assert await _as_gateway(server, thread_id, "default") == history
    assert await _as_gateway(server, thread_id, "alice") == []


async def test_a_journal_without_owners_is_repaired_and_then_visible_to_its_owner(start_dev_server, tmp_path):
    server = _start(start_dev_server, tmp_path, auth=True)
    client = get_client(url=server.url, api_key=None, headers=ALICE)
    thread_id = (await client.threads.create())["thread_id"]
    async with open_store(server.store_url) as store:
        written = await seed_conversation(store, thread_id)  # as journals were written before owners
    assert await _as_gateway(server, thread_id, "alice") == []
    async with httpx.AsyncClient(base_url=server.url, headers=ALICE, timeout=60) as http:
        repaired = await http.post(f"/journal/threads/{thread_id}/repair")
    assert repaired.status_code == 200, repaired.text
    assert repaired.json()["owners_filled"] == len(written)
    async with open_store(server.store_url) as store:
        everything = await store.list_messages(thread_id, limit=500)
    assert await _as_gateway(server, thread_id, "alice") == [r.content["id"] for r in everything]
    assert await _as_gateway(server, thread_id, "bob") == []


async def test_logged_in_the_handler_finds_its_users_once_an_app_lifespan_starts_deerflows_engine(
    start_dev_server, tmp_path
):
    """deer-flow's handler needs its database engine, which `langgraph dev` never
    starts: every logged-in request fails, until the app's lifespan starts it."""
    store_url = f"sqlite:///{tmp_path / 'run_events.db'}?layout=deerflow"
    auth = {"path": f"{ENGINE_AUTH_PATH}:auth"}
    without = start_dev_server(config=project_config(auth=auth), env={"JOURNAL_BRIDGE_STORE_URL": store_url})
    refused = httpx.post(f"{without.url}/threads", json={}, headers=ALICE, timeout=30)
    assert refused.status_code == 500
    assert "get_local_provider() called before init_engine_from_config()" in without.read_log()
    without.stop()

    config = project_config(auth=auth, http={"app": f"{HARNESS / 'apps' / 'deerflow_engine.py'}:app"})
    server = start_dev_server(config=config, env={"JOURNAL_BRIDGE_STORE_URL": store_url})
    thread_id = await _converse(server, ALICE)
    history = [i["id"] for i in await _history(server, thread_id, ALICE) if i["type"] != "summary_marker"]
    assert await _as_gateway(server, thread_id, "alice") == history
    assert await _as_gateway(server, thread_id, "bob") == []
