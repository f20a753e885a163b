"""The store goes away during runs: clients notice nothing, the journal loses nothing."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import contextmanager

import httpx
import pytest
from langgraph_sdk import get_client

from journal_bridge.store import open_store
from tests.harness.conversation import message_ids_seen, stream_turn, wait_journal_idle

pytestmark = pytest.mark.e2e

OUTAGE_TURNS = ("add 3 and 4", "weather in Kyiv", "still there?")


async def _first_turn_journaled(server):
    """A client of `server` and a thread of one turn, journaled; and that turn's frames."""
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]
    frames = await stream_turn(client, thread_id, "agent", "hello before the outage", "values")
    await wait_journal_idle(server.url)
    return client, thread_id, frames


@contextmanager
def _locked(db):
    """Hold an exclusive lock on the SQLite journal `db`: the store is away until the block ends."""
    blocker = sqlite3.connect(db, timeout=0, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


async def test_runs_go_on_while_the_store_is_locked_and_the_journal_catches_up(start_dev_server, tmp_path):
    db = tmp_path / "journal.db"
    # A short busy timeout turns the held lock into write failures rather than waits.
    server = start_dev_server(env={"JOURNAL_BRIDGE_STORE_URL": f"sqlite:///{db}?busy_timeout=0.2"})
    client, thread_id, frames = await _first_turn_journaled(server)

    with _locked(db):
        for text in OUTAGE_TURNS:
            turn = await stream_turn(client, thread_id, "agent", text, "values")
            assert [e for e, _ in turn][0] == "metadata" and turn[-1][0] == "values"
            assert all(event != "error" for event, _ in turn)
            frames += turn
        response = httpx.get(f"{server.url}/journal/health")
        during = response.json()
    assert during["retried"] > 0 and during["backlog"] > 0, during
    assert "locked" in (during["last_error"] or "")
    assert response.status_code == 503
    assert during["status"] == "unavailable" and "locked" in during["reason"]

    after = await wait_journal_idle(server.url)
    assert after["dropped"] == 0
    assert httpx.get(f"{server.url}/journal/health").status_code == 200
    await _assert_journaled_once_in_order(db, thread_id, frames, runs=4)


async def _assert_journaled_once_in_order(db, thread_id, frames, *, runs):
    async with open_store(f"sqlite:///{db}") as store:
        timeline = await store.list_timeline(thread_id, limit=500)
        run_ids = {r.run_id for r in timeline}
        every = [e for run_id in run_ids for e in await store.list_events(thread_id, run_id, limit=1000)]
        last = await store.last_seq(thread_id)
    messages = [r.content for r in timeline if r.category == "message"]
    assert [m["id"] for m in messages] == [m["id"] for m in message_ids_seen(frames)]
    assert len(run_ids) == runs
    assert sorted(e.seq for e in every) == list(range(1, last + 1))
    keys = [e.source_key for e in every]
    assert len(keys) == len(set(keys))


async def _wait_runs_read(url, *, timeout=60.0):
    """Health once every observed run is read to its end (its records accepted, maybe not yet written)."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        while True:
            health = (await http.get("/journal/health")).json()
            if health["active_runs"] == 0 and health["runs_completed"] >= health["runs_observed"]:
                return health
            assert time.monotonic() < deadline, f"runs not read: {health}"
            await asyncio.sleep(0.1)


async def test_records_of_a_server_killed_during_a_store_outage_are_journaled_by_the_next_server(
    start_dev_server, tmp_path
):
    db = tmp_path / "journal.db"
    env = {
        "JOURNAL_BRIDGE_STORE_URL": f"sqlite:///{db}?busy_timeout=0.2",
        "JOURNAL_BRIDGE_SPOOL_DIR": str(tmp_path / "spool"),
    }
    server = start_dev_server(env=env)
    client, thread_id, frames = await _first_turn_journaled(server)

    with _locked(db):
        for text in OUTAGE_TURNS:
            frames += await stream_turn(client, thread_id, "agent", text, "values")
        during = await _wait_runs_read(server.url)
        metrics = httpx.get(f"{server.url}/journal/metrics")
        server.kill()
    assert during["backlog"] > 0 and during["status"] == "unavailable", during
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    assert f"journal_bridge_backlog_records {during['backlog']}" in metrics.text.splitlines()
    assert 'journal_bridge_health_status{status="unavailable"} 1' in metrics.text.splitlines()

    # A new server (fresh runtime state, same journal and spool) delivers what the killed one accepted.
    second = start_dev_server(env={**env, "JOURNAL_BRIDGE_STORE_URL": f"sqlite:///{db}"})
    after = await wait_journal_idle(second.url)
    assert after["spool_recovered"] == during["backlog"] and after["dropped"] == 0, after
    assert after["status"] == "ok", after
    await _assert_journaled_once_in_order(db, thread_id, frames, runs=4)


async def test_a_store_unreachable_at_startup_is_opened_later_and_nothing_is_lost(start_dev_server, tmp_path):
    later = tmp_path / "not-yet"
    server = start_dev_server(env={"JOURNAL_BRIDGE_STORE_URL": f"sqlite:///{later / 'journal.db'}"})
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]
    frames = await stream_turn(client, thread_id, "agent", "add 1 and 1", "values")
    assert frames[-1][0] == "values"

    response = httpx.get(f"{server.url}/journal/health")
    health = response.json()
    assert health["store_open"] is False and health["backlog"] > 0
    assert response.status_code == 503 and health["status"] == "unavailable" and "not open" in health["reason"]
    response = httpx.get(f"{server.url}/journal/threads/{thread_id}/messages")
    assert response.status_code == 503 and response.json()["detail"]

    later.mkdir()
    await wait_journal_idle(server.url, timeout=60)
    page = httpx.get(f"{server.url}/journal/threads/{thread_id}/messages").json()
    assert [m["id"] for m in page["data"]] == [m["id"] for m in message_ids_seen(frames)]
