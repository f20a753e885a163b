"""The follower sidecar journals runs of a server without the plugin, and reports what it cannot."""

from __future__ import annotations

import asyncio
import time

import pytest
from conversation import EARLY_SUMMARIZATION, TURNS, human, message_ids_seen
from langgraph_sdk import get_client

from journal_bridge.follower import Follower
from journal_bridge.store import open_store

pytestmark = pytest.mark.e2e

OBSERVABLE = {"stream_mode": ["values", "events"], "stream_resumable": True}


async def _wait(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def _turns(client, thread_id, assistant_id, texts, **kwargs):
    frames = []
    for text in texts:
        async for part in client.runs.stream(thread_id, assistant_id, input=human(text), **{**OBSERVABLE, **kwargs}):
            frames.append((part.event, part.data))
    return frames


async def test_runs_of_another_client_are_journaled_and_unobservable_ones_reported(start_dev_server, tmp_path):
    server = start_dev_server(plugin=False)
    client = get_client(url=server.url)
    async with open_store(f"sqlite:///{tmp_path / 'journal.db'}") as store:
        follower = Follower(get_client(url=server.url), store, cursor_path=tmp_path / "cursor.json", interval=0.2)
        task = asyncio.create_task(follower.run())
        try:
            thread_id = (await client.threads.create())["thread_id"]
            created = time.monotonic()
            run = await client.runs.create(thread_id, "agent", input=human("add 2 and 3"), **OBSERVABLE)
            polls_before = follower.stats["polls"]
            await _wait(lambda: _true(run["run_id"] in follower.discovered_at))
            latency = follower.discovered_at[run["run_id"]] - created
            found_by = follower.discovered_by_poll[run["run_id"]]
            await client.runs.join(thread_id, run["run_id"])
            frames = await _turns(client, thread_id, "agent", ["weather in Oslo"])
            blind = await client.runs.create(thread_id, "agent", input=human("values only"))
            await client.runs.join(thread_id, blind["run_id"])
            await _wait(lambda: _true(follower.stats["unobservable"] >= 1 and follower.stats["journaled"] >= 2))
            await follower.delivery.drain()
            health = follower.health()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        state = await client.threads.get_state(thread_id)
        messages = [r.content for r in await store.list_messages(thread_id, limit=500)]

    # A poll under way when the run was created may miss it; the next one finds it.
    assert found_by <= polls_before + 2, f"found by poll {found_by}, created after poll {polls_before}"
    expected = [m["id"] for m in state["values"]["messages"]]
    humans = [m["content"] for m in messages if m["type"] == "human"]
    assert humans == ["add 2 and 3", "weather in Oslo"], "the values-only run cannot be journaled"
    assert [m["id"] for m in messages] == expected[: len(messages)]
    assert message_ids_seen(frames)
    (report,) = follower.reports
    assert report["run_id"] == blind["run_id"] and "events" in report["reason"]
    assert follower.summary()["unobservable"] == 1
    assert health["status"] == "ok" and health["unobservable"] == 1, health
    print(f"follower discovery latency: {latency:.3f}s at interval 0.2s (poll {found_by}, created after poll {polls_before})")


async def _true(value):
    return value


async def test_a_killed_follower_restarts_without_gaps_or_duplicates(start_dev_server, tmp_path):
    server = start_dev_server(plugin=False)
    client = get_client(url=server.url)
    assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
    thread_id = (await client.threads.create())["thread_id"]
    cursor = tmp_path / "cursor.json"
    async with open_store(f"sqlite:///{tmp_path / 'journal.db'}") as store:
        first = Follower(get_client(url=server.url), store, cursor_path=cursor, interval=0.2)
        task = asyncio.create_task(first.run())
        talking = asyncio.create_task(_turns(client, thread_id, assistant["assistant_id"], TURNS[:6]))
        await _wait(lambda: _true(first.bridge.stats.records_written > 0))
        task.cancel()  # killed mid-conversation: no drain, no final cursor
        await asyncio.gather(task, return_exceptions=True)
        written_before = await store.last_seq(thread_id)
        frames = await talking
        # More runs happen while no follower is running.
        frames += await _turns(client, thread_id, assistant["assistant_id"], TURNS[6:])

        second = Follower(get_client(url=server.url), store, cursor_path=cursor, interval=0.2)
        await second.run(once=True)
        await second.bridge.stop()
        timeline = await store.list_timeline(thread_id, limit=1000)
        run_ids = list(dict.fromkeys(r.run_id for r in timeline))
        everything = [e for run_id in run_ids for e in await store.list_events(thread_id, run_id, limit=10_000)]

    assert 0 < written_before < len(everything), "the first follower stopped part-way"
    messages = [r.content for r in timeline if r.category == "message"]
    seen = [m for m in message_ids_seen(frames) if not (m.get("additional_kwargs") or {}).get("lc_source")]
    assert [m["id"] for m in messages] == [m["id"] for m in seen], "nothing lost, nothing doubled, in order"
    assert [m["content"] for m in messages if m["type"] == "human"] == TURNS
    assert sum(r.event_type == "middleware:summarize" for r in timeline) >= 2
    keys = [e.source_key for e in everything]
    assert len(keys) == len(set(keys))
    assert sorted(e.seq for e in everything) == list(range(1, len(everything) + 1))
    assert second.summary()["unobservable"] == 0


async def test_follow_once_from_the_command_line_reports_a_summary(start_dev_server, tmp_path):
    import json
    import sys

    server = start_dev_server(plugin=False)
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]
    await _turns(client, thread_id, "agent", ["add 1 and 1"])
    blind = await client.runs.create(thread_id, "agent", input=human("no events"))
    await client.runs.join(thread_id, blind["run_id"])
    store_url = f"sqlite:///{tmp_path / 'journal.db'}"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "journal_bridge.cli", "follow", "--url", server.url, "--store", store_url,
        "--once", "--json", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    summary = json.loads(out)
    assert summary["journaled"] == 1 and summary["unobservable"] == 1
    assert blind["run_id"] in err.decode(), "the unobservable run is named in the log"
    assert (tmp_path / "journal.db.follow.json").exists()
