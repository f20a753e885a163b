"""A PostgreSQL journal goes away and the server restarts before it is back.

Against a real `langgraph dev` and a PostgreSQL cluster of the test's own: a
conversation that compacts, then the database stops; more turns while it is
down (clients notice nothing, health says `unavailable`); the server is
stopped (SIGTERM, or killed with SIGKILL) while the database is still down;
the database comes back and a new server starts on the same working
directory, hence the same spool. Every message the client saw is journaled
exactly once, in conversation order, with a marker at each compaction -- the
same conversation the thread's checkpoint history shows -- and health is `ok`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter

import httpx
import pytest
from langgraph_sdk import get_client

from journal_bridge.store import open_store
from tests.harness.conversation import EARLY_SUMMARIZATION, TURNS, is_summary, message_ids_seen, stream_turn, wait_journal_idle
from tests.harness.services import postgres_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(900)]

# Seconds the database stays down, from its stop to its start.
OUTAGE = 20.0
# `langgraph dev` writes its state to disk about every 10 s: a server killed
# sooner after a run may come back without it.
RUNTIME_FLUSH = 11.0
# Turns before the outage; the rest are sent while the database is down.
BEFORE = 7


async def _health(url: str) -> tuple[int, dict]:
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        response = await http.get("/journal/health")
    return response.status_code, response.json()


async def _wait_health(url: str, ready, *, timeout: float = 120.0) -> tuple[int, dict]:
    deadline = time.monotonic() + timeout
    while True:
        code, health = await _health(url)
        if ready(code, health):
            return code, health
        assert time.monotonic() < deadline, (code, health)
        await asyncio.sleep(0.2)


async def _journal(url: str, thread_id: str) -> list[dict]:
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        response = await http.get(f"/journal/threads/{thread_id}/messages", params={"limit": 500})
    if response.status_code != 200:
        return []
    return response.json()["data"]


async def _checkpoint_conversation(client, thread_id: str) -> tuple[list[str], list[str]]:
    """The ids of every message the thread's checkpoints ever held, in order of first
    appearance: conversation messages, and the summaries its compactions wrote."""
    history = await client.threads.get_history(thread_id, limit=1000)
    messages: dict[str, None] = {}
    summaries: dict[str, None] = {}
    for checkpoint in reversed(history):  # oldest first
        for message in (checkpoint["values"] or {}).get("messages", []):
            (summaries if is_summary(message) else messages).setdefault(message["id"], None)
    return list(messages), list(summaries)


async def _stop_server(server, how: signal.Signals) -> int:
    """Signal the server's process group (its own session: only what it started) and reap it."""
    process = server.process
    os.killpg(process.pid, how)
    try:
        return await asyncio.to_thread(process.wait, 60)
    except Exception:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        raise


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
async def test_a_postgres_outage_across_a_server_restart_loses_and_duplicates_nothing(start_dev_server, how):
    with postgres_cluster() as postgres:
        env = {"JOURNAL_BRIDGE_STORE_URL": postgres.url}
        first = start_dev_server(env=env)
        client = get_client(url=first.url)
        assistant_id = (await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION}))[
            "assistant_id"
        ]
        thread_id = (await client.threads.create())["thread_id"]
        frames: list = []
        for text in TURNS[:BEFORE]:
            frames += await stream_turn(client, thread_id, assistant_id, text, "values")
        before = await wait_journal_idle(first.url)
        assert before["status"] == "ok" and before["records_written"] > 0, before
        summaries_before = {m["id"] for m in message_ids_seen(frames) if is_summary(m)}
        assert summaries_before, "the conversation compacts before the outage"

        postgres.stop("fast")
        down_at = time.monotonic()
        for text in TURNS[BEFORE:]:
            turn = await stream_turn(client, thread_id, assistant_id, text, "values")
            assert [e for e, _ in turn][0] == "metadata" and turn[-1][0] == "values", turn
            assert all(event != "error" for event, _ in turn), turn
            frames += turn
        last_turn_at = time.monotonic()
        # Every run is read to its end: its records are spooled, none can be written.
        code, during = await _wait_health(
            first.url,
            lambda code, h: h["active_runs"] == 0
            and h["runs_completed"] >= h["runs_observed"]
            and h["status"] == "unavailable",
        )
        assert code == 503 and during["store_failing"] and during["backlog"] > 0, during
        assert during["dropped"] == 0 and during["runs_failed"] == 0, during
        summaries_during = {m["id"] for m in message_ids_seen(frames) if is_summary(m)} - summaries_before
        assert summaries_during, "the conversation compacts while the database is down"

        # The runtime's state of the last runs reaches its disk; then the server goes, the database still down.
        await asyncio.sleep(max(0.0, RUNTIME_FLUSH - (time.monotonic() - last_turn_at)))
        stopping = time.monotonic()
        status = await _stop_server(first, how)
        stopped_in = time.monotonic() - stopping
        if how == signal.SIGTERM:
            assert "stay spooled" in first.read_log(), first.read_log()[-3000:]
        else:
            assert status == -signal.SIGKILL
        await asyncio.sleep(max(0.0, OUTAGE - (time.monotonic() - down_at)))
        postgres.start()

        launched = time.monotonic()
        second = start_dev_server(env=env, workdir=first.workdir)
        ready_in = time.monotonic() - launched
        client = get_client(url=second.url)
        expected, summaries = await _checkpoint_conversation(client, thread_id)
        seen = message_ids_seen(frames)
        assert [m["id"] for m in seen if not is_summary(m)] == expected
        assert [m["id"] for m in seen if is_summary(m)] == summaries

        def caught_up(code: int, health: dict) -> bool:
            return code == 200 and health["status"] == "ok" and health["backlog"] == 0 and health["active_runs"] == 0

        _, after = await _wait_health(second.url, caught_up)
        deadline = time.monotonic() + 120
        while [i["id"] for i in await _journal(second.url, thread_id) if i["type"] != "summary_marker"] != expected:
            assert time.monotonic() < deadline, await _journal(second.url, thread_id)
            await asyncio.sleep(0.2)
        caught_up_in = time.monotonic() - launched
        assert after["spool_recovered"] == during["backlog"] and after["dropped"] == 0, (during, after)
        print(
            f"\n{how.name}: server stopped in {stopped_in:.1f} s with {during['backlog']} records spooled;"
            f" {after['spool_recovered']} delivered by the next server ({after['records_written']} written),"
            f" journal complete {caught_up_in:.1f} s after its launch (ready after {ready_in:.1f} s)"
        )

        # Conversation order, every marker where its compaction happened.
        journal = await _journal(second.url, thread_id)
        items = [i for i in journal if i["type"] in ("human", "ai", "tool", "summary_marker")]
        assert [i["id"] for i in items if i["type"] != "summary_marker"] == expected
        assert [i["content"] for i in items if i["type"] == "human"] == TURNS
        markers = [i for i in items if i["type"] == "summary_marker"]
        assert [m["summary_message_id"] for m in markers] == summaries
        position = {item["id"]: index for index, item in enumerate(items)}
        for marker in markers:
            replaced = [i for i in marker["replaced_message_ids"] if i not in summaries]
            assert replaced and all(position[i] < position[marker["id"]] for i in replaced), marker
            assert items[position[marker["id"]] + 1]["type"] == "ai", "the marker precedes the answer that followed"
        assert not [i for i in journal if i["type"] == "run_status"], journal

        # Exactly once: every record once, seqs without holes, each run started and ended once,
        # everything delivered as the first server spooled it (nothing rebuilt from checkpoints).
        async with open_store(postgres.url) as store:
            timeline = await store.list_timeline(thread_id, limit=1000)
            run_ids = {r.run_id for r in timeline}
            records = [e for run_id in run_ids for e in await store.list_events(thread_id, run_id, limit=1000)]
            last = await store.last_seq(thread_id)
        assert len(run_ids) == len(TURNS)
        assert sorted(r.seq for r in records) == list(range(1, last + 1))
        keys = Counter(r.source_key for r in records)
        assert keys.most_common(1)[0][1] == 1, keys.most_common(3)
        for run_id in run_ids:
            kinds = Counter(r.event_type for r in records if r.run_id == run_id)
            assert kinds["run.start"] == 1 and kinds["run.end"] == 1, (run_id, kinds)
        assert not [r for r in records if r.metadata.get("source") == "backfill"]
        assert len([r for r in records if r.event_type == "middleware:summarize"]) == len(summaries)
