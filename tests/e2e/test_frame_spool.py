"""What a client saw before a `kill -9` is in the history after the restart, against real `langgraph dev`.

The server runs without its runtime's file persistence: after the kill it
knows nothing of the thread or the run, no checkpoint shows what the client
saw, and the reconciler has nothing to journal (the journal of a thread the
server no longer has is kept, `JOURNAL_BRIDGE_KEEP_DELETED`). The client's
stream is read frame by frame and the server killed the moment a frame with
a new message reaches it: what the journal had not written by then is only
in the frame spool.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

import httpx
import pytest
from langgraph_sdk import get_client

from journal_bridge.store import open_store
from tests.harness.conversation import human, wait_journal_idle
from tests.harness.server_process import PROJECT_ROOT

pytestmark = pytest.mark.e2e

QUIET_DEV = [sys.executable, str(PROJECT_ROOT / "tests" / "harness" / "bench" / "quiet_dev.py")]
ENV = {
    "JOURNAL_BRIDGE_FRAME_SPOOL": "on",
    "JOURNAL_BRIDGE_KEEP_DELETED": "true",
    "JOURNAL_BRIDGE_RECONCILE_INTERVAL": "0.5",
    "JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": "0.05",
}


async def _stream_until_killed(server, client, thread_id: str, text: str, stream_mode, messages: int) -> tuple[str, list[str]]:
    """Stream a turn and SIGKILL the server as soon as a `values` frame shows `messages`
    messages; the run's id and the ids of every message the client saw, in order.
    `stream_mode` "create+join": the run is created, then its stream joined at once."""
    run_id, seen = None, []
    if stream_mode == "create+join":
        run_id = (await client.runs.create(thread_id, "agent", input=human(text)))["run_id"]
        parts = client.runs.join_stream(thread_id, run_id, stream_mode="values")
    else:
        parts = client.runs.stream(thread_id, "agent", input=human(text), stream_mode=stream_mode)
    async for part in parts:
        if part.event == "metadata":
            run_id = part.data["run_id"]
        if part.event != "values":
            continue
        ids = [m["id"] for m in part.data.get("messages", [])]
        seen += [i for i in ids if i not in seen]
        if len(ids) >= messages:
            os.killpg(server.process.pid, signal.SIGKILL)
            server.process.wait()
            break
    assert run_id is not None and len(seen) >= messages, seen
    return run_id, seen


async def _history(url: str, thread_id: str) -> list[str]:
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        response = await http.get(f"/journal/threads/{thread_id}/messages", params={"limit": 500})
    assert response.status_code == 200, response.text
    return [i["id"] for i in response.json()["data"] if i["type"] != "summary_marker"]


async def _recovered(url: str, *, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        health = httpx.get(f"{url}/journal/health").json()
        if health["frame_spool"]["recovered_runs"] or time.monotonic() > deadline:
            return health
        await asyncio.sleep(0.2)


@pytest.mark.parametrize(
    ("stream_mode", "messages"),
    [("values", 2), (["values", "messages-tuple", "custom"], 3), ("create+join", 2)],
    ids=["values-stream", "usestream-modes", "create-join"],
)
async def test_every_message_a_client_saw_before_a_kill_is_in_the_history_after_the_restart(
    start_dev_server, stream_mode, messages
):
    first = start_dev_server(env=ENV, program=QUIET_DEV)
    client = get_client(url=first.url)
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, "agent", input=human("hello there"))
    await wait_journal_idle(first.url)
    before = await _history(first.url, thread_id)
    # The second turn's call to a tool and its result: the server dies as the result reaches the client.
    run_id, seen = await _stream_until_killed(first, client, thread_id, "add 2 and 3", stream_mode, len(before) + messages)
    assert seen[: len(before)] == before

    second = start_dev_server(env=ENV, program=QUIET_DEV, workdir=first.workdir)
    health = await _recovered(second.url)
    # The run the killed process was reading left its frames; the next start journaled them.
    assert health["frame_spool"]["recovered_runs"] == 1, health
    assert health["frame_spool"]["recovered_records"] > 0, health
    # The server kept nothing: the thread is gone from it, its journal is not.
    assert httpx.get(f"{second.url}/threads/{thread_id}").status_code == 404
    await wait_journal_idle(second.url)
    history = await _history(second.url, thread_id)
    assert history == seen  # every message the client saw, in the order it saw them, each once
    async with open_store(second.store_url) as store:
        records = await store.list_events(thread_id, run_id, limit=500)
    assert {r.content.get("id") for r in records if r.category == "message"} == set(seen[len(before) :])
    assert len({r.source_key for r in records}) == len(records)
    # Journaled: nothing is left to recover at the next start.
    second.stop()
    third = start_dev_server(env=ENV, program=QUIET_DEV, workdir=first.workdir)
    assert httpx.get(f"{third.url}/journal/health").json()["frame_spool"]["recovered_runs"] == 0
