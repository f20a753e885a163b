"""The store goes away during runs: clients notice nothing, the journal loses nothing."""

from __future__ import annotations

import sqlite3

import httpx
import pytest
from langgraph_sdk import get_client

from conversation import message_ids_seen, stream_turn, wait_journal_idle
from journal_bridge.store import open_store

pytestmark = pytest.mark.e2e


async def test_runs_go_on_while_the_store_is_locked_and_the_journal_catches_up(start_dev_server, tmp_path):
    db = tmp_path / "journal.db"
    # A short busy timeout turns the held lock into write failures rather than waits.
    server = start_dev_server(env={"JOURNAL_BRIDGE_STORE_URL": f"sqlite:///{db}?busy_timeout=0.2"})
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]
    frames = await stream_turn(client, thread_id, "agent", "hello before the outage", "values")
    await wait_journal_idle(server.url)

    blocker = sqlite3.connect(db, timeout=0, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        for text in ("add 3 and 4", "weather in Kyiv", "still there?"):
            turn = await stream_turn(client, thread_id, "agent", text, "values")
            assert [e for e, _ in turn][0] == "metadata" and turn[-1][0] == "values"
            assert all(event != "error" for event, _ in turn)
            frames += turn
        during = httpx.get(f"{server.url}/journal/health").json()
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert during["retried"] > 0 and during["backlog"] > 0, during
    assert "locked" in (during["last_error"] or "")

    after = await wait_journal_idle(server.url)
    assert after["dropped"] == 0
    async with open_store(f"sqlite:///{db}") as store:
        timeline = await store.list_timeline(thread_id, limit=500)
        runs = {r.run_id for r in timeline}
        every = [e for run_id in runs for e in await store.list_events(thread_id, run_id, limit=1000)]
        last = await store.last_seq(thread_id)
    messages = [r.content for r in timeline if r.category == "message"]
    assert [m["id"] for m in messages] == [m["id"] for m in message_ids_seen(frames)]
    assert len(runs) == 4
    assert sorted(e.seq for e in every) == list(range(1, last + 1))
    keys = [e.source_key for e in every]
    assert len(keys) == len(set(keys))


async def test_a_store_unreachable_at_startup_is_opened_later_and_nothing_is_lost(start_dev_server, tmp_path):
    later = tmp_path / "not-yet"
    server = start_dev_server(env={"JOURNAL_BRIDGE_STORE_URL": f"sqlite:///{later / 'journal.db'}"})
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]
    frames = await stream_turn(client, thread_id, "agent", "add 1 and 1", "values")
    assert frames[-1][0] == "values"

    health = httpx.get(f"{server.url}/journal/health").json()
    assert health["store_open"] is False and health["backlog"] > 0
    response = httpx.get(f"{server.url}/journal/threads/{thread_id}/messages")
    assert response.status_code == 503 and response.json()["detail"]

    later.mkdir()
    await wait_journal_idle(server.url, timeout=60)
    page = httpx.get(f"{server.url}/journal/threads/{thread_id}/messages").json()
    assert [m["id"] for m in page["data"]] == [m["id"] for m in message_ids_seen(frames)]
