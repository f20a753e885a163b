"""Runs the middleware never saw are journaled by the reconciler, against real `langgraph dev`:
a run created past the middleware, a cron's runs, and a run in flight when the
server is killed with SIGKILL (restarted on the same working directory, with a
healthy journal and with the journal locked meanwhile)."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import httpx
import pytest
from langgraph_sdk import get_client

from journal_bridge.capture.intercept import READER_HEADER
from journal_bridge.store import open_store
from tests.harness.conversation import human, kill_mid_stream, message_ids_seen, stream_turn
from tests.harness.langgraph_server import retries_runs_left_running

pytestmark = pytest.mark.e2e

FAST = {"JOURNAL_BRIDGE_RECONCILE_INTERVAL": "0.5"}


async def _state_messages(client, thread_id: str) -> list[dict]:
    state = await client.threads.get_state(thread_id)
    return [m for m in (state.get("values") or {}).get("messages", [])]


async def _journal_ids(url: str, thread_id: str) -> list[str]:
    response = httpx.get(f"{url}/journal/threads/{thread_id}/messages", params={"limit": 500})
    if response.status_code != 200:
        return []
    return [i["id"] for i in response.json()["data"] if i["type"] != "summary_marker"]


async def _wait_for_journal(url: str, thread_id: str, expected: list[str], *, timeout: float = 120.0) -> list[str]:
    """The journal's message ids once they equal `expected` (or at the deadline, for the assertion to show)."""
    deadline = time.monotonic() + timeout
    while True:
        ids = await _journal_ids(url, thread_id)
        if ids == expected or time.monotonic() > deadline:
            return ids
        await asyncio.sleep(0.2)


async def _wait_runs_ended(client, thread_id: str, *, timeout: float = 120.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        runs = await client.runs.list(thread_id)
        if runs and all(r["status"] not in ("pending", "running") for r in runs):
            return runs
        assert time.monotonic() < deadline, f"runs did not end: {runs}"
        await asyncio.sleep(0.2)


async def _sources(db, thread_id: str) -> dict[str, str | None]:
    """Message id -> `metadata.source` of its record."""
    async with open_store(f"sqlite:///{db}") as store:
        timeline = await store.list_timeline(thread_id, limit=500)
    return {r.content["id"]: r.metadata.get("source") for r in timeline if r.category == "message"}


async def test_a_run_created_past_the_middleware_is_journaled_in_conversation_order(start_dev_server):
    server = start_dev_server(env=FAST)
    client = get_client(url=server.url)
    # The journal's own header makes the middleware let a request through untouched: this
    # run is created exactly as an in-process caller that bypasses the middleware creates it.
    unseen = get_client(url=server.url, headers={READER_HEADER: "1"})
    thread_id = (await client.threads.create())["thread_id"]
    frames = await stream_turn(client, thread_id, "agent", "hello there", "values")
    await unseen.runs.wait(thread_id, "agent", input=human("add 2 and 3"))
    frames += await stream_turn(client, thread_id, "agent", "weather in Paris", "values")

    expected = [m["id"] for m in await _state_messages(client, thread_id)]
    assert [m["id"] for m in message_ids_seen(frames)] == expected
    assert await _wait_for_journal(server.url, thread_id, expected) == expected
    sources = await _sources(server.workdir / "journal.db", thread_id)
    middle = [m["id"] for m in await _state_messages(client, thread_id)][2:6]
    assert {sources[i] for i in middle} == {"backfill"}
    assert {sources[i] for i in expected if i not in middle} == {None}
    # Its passes listed threads and runs from the server's runtime, not through requests.
    listings = httpx.get(f"{server.url}/journal/health").json()["reconciler"]["listings"]
    assert listings["runtime"] >= 2, listings


async def test_the_runs_of_a_cron_are_journaled(start_dev_server):
    # The scheduler looks for due crons every CRON_SCHEDULER_SLEEP_TIME seconds; a
    # six-field schedule fires on seconds.
    server = start_dev_server(env={**FAST, "CRON_SCHEDULER_SLEEP_TIME": "1"})
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]
    cron = await client.crons.create_for_thread(
        thread_id, "agent", schedule="* * * * * */2", input=human("add 40 and 2")
    )
    deadline = time.monotonic() + 60
    while not await client.runs.list(thread_id):
        assert time.monotonic() < deadline, "the cron did not fire"
        await asyncio.sleep(0.2)
    await client.crons.delete(cron["cron_id"])
    runs = await _wait_runs_ended(client, thread_id)
    assert runs[0]["kwargs"].get("resumable") is not True

    expected = [m["id"] for m in await _state_messages(client, thread_id)]
    assert expected
    assert await _wait_for_journal(server.url, thread_id, expected) == expected


async def _killed_mid_run(start_dev_server, env) -> tuple:
    """A server killed with SIGKILL while a streamed run is mid-way (its state flushed
    once while the run was under way). Returns the server, thread and frames the client saw."""
    server = start_dev_server(env=env)
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]
    # Once the first answer (a tool call) is out, while the reply is still being
    # generated; `langgraph dev` flushes its state about every 10 s.
    frames = await kill_mid_stream(server, client, thread_id, "add 2 and 3", messages=2, then=11)
    return server, thread_id, frames


@pytest.mark.parametrize("journal", ["healthy", "locked"])
async def test_a_run_in_flight_at_a_kill_is_journaled_by_the_next_start(start_dev_server, journal):
    env = {**FAST, "JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": "1.0"}
    first, thread_id, frames = await _killed_mid_run(start_dev_server, env)
    seen = [m["id"] for m in message_ids_seen(frames)]
    db = first.workdir / "journal.db"
    blocker = None
    if journal == "locked":
        env = {**env, "JOURNAL_BRIDGE_STORE_URL": f"sqlite:///{db}?busy_timeout=0.2"}
        blocker = sqlite3.connect(db, timeout=0, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")
    try:
        second = start_dev_server(env=env, workdir=first.workdir)
        client = get_client(url=second.url)
        # Whether the runtime executes the killed run again (see the helper):
        # only then does the run end and add records after the restart.
        retried = retries_runs_left_running(second.read_log())
        if retried:
            await _wait_runs_ended(client, thread_id)
        if blocker is not None and retried:
            # Nobody asked: the reconciler found the run; its records wait for the journal.
            health = await _wait_health(second.url, lambda h: h["backlog"] > 0 or h["reconciler"]["pass_errors"] > 0)
            assert health["status"] == "unavailable", health
    finally:
        if blocker is not None:
            blocker.execute("ROLLBACK")
            blocker.close()

    expected = [m["id"] for m in await _state_messages(client, thread_id)]
    assert expected[: len(seen)] == seen  # what the client saw is the start of the conversation
    if retried:
        assert len(expected) > len(seen)  # the reply finished after the restart
    else:
        # The run stays running with nothing executing it: the journal holds
        # what the killed server got to, which is what the client saw.
        assert [r["status"] for r in await client.runs.list(thread_id)] == ["running"]
        assert expected == seen
    assert await _wait_for_journal(second.url, thread_id, expected) == expected
    health = httpx.get(f"{second.url}/journal/health").json()
    assert health["dropped"] == 0


async def _wait_health(url: str, ready, *, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        health = httpx.get(f"{url}/journal/health").json()
        if ready(health):
            return health
        assert time.monotonic() < deadline, health
        await asyncio.sleep(0.2)


async def test_a_run_executed_anew_that_ended_unseen_is_backfilled_as_one_attempt(start_dev_server):
    """The server is killed mid-answer; after the restart the runtime executes anew
    what was running when it last saved its state, and that ends before anything
    journals it live (the reconciler is off). A repair backfills the thread: the
    history is the thread's branch, one attempt of each run; the killed attempt
    stays in the journal."""
    from tests.harness.thread_truth import conversation, shown

    first = start_dev_server(env={"JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": "1.0"})
    client = get_client(url=first.url)
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, "agent", input=human("hello there"))
    frames = await kill_mid_stream(first, client, thread_id, "add 2 and 3", messages=4, then=1)
    killed = [m["id"] for m in message_ids_seen(frames)]
    db = first.workdir / "journal.db"

    second = start_dev_server(env={"JOURNAL_BRIDGE_RECONCILE_INTERVAL": "0"}, workdir=first.workdir)
    client = get_client(url=second.url)
    if not retries_runs_left_running(second.read_log()):
        # An older runtime executes nothing anew: the run stays `running`.
        assert [r["status"] for r in await client.runs.list(thread_id)][0] == "running"
        return
    await _wait_runs_ended(client, thread_id)
    expected = await conversation(client, thread_id)
    stray = [i for i in killed if i not in expected]
    repaired = httpx.post(f"{second.url}/journal/threads/{thread_id}/repair", timeout=60)
    assert repaired.status_code == 200, repaired.text
    # Which attempt the runtime executed anew depends on when it last saved its state: the
    # killed run (from its checkpoints, or from its input if none were saved), or the run
    # before it, which had ended since (the killed run is then lost to the server).
    assert (repaired.json()["superseded"] > 0) == bool(stray), (repaired.json(), killed, expected)
    items = httpx.get(f"{second.url}/journal/threads/{thread_id}/messages", params={"limit": 500}).json()["data"]
    assert shown(items) == expected
    assert len({i["id"] for i in items}) == len(items)
    again = httpx.post(f"{second.url}/journal/threads/{thread_id}/repair", timeout=60).json()
    assert again["written"] == 0 and again["superseded"] == 0, again
    # The killed attempt's records stay in the journal, readable by run.
    async with open_store(f"sqlite:///{db}") as store:
        timeline = await store.list_timeline(thread_id, limit=500)
    assert set(killed) <= {r.content.get("id") for r in timeline if r.category == "message"}
    print(f"\nkilled attempt: {len(killed)} messages seen by its client, {len(stray)} of them in no checkpoint")
