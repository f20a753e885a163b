"""Backfill rebuilds a journal from checkpoints, against a real `langgraph dev` without the plugin."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
from langgraph_sdk import get_client

from journal_bridge.capture.backfill import backfill, backfill_thread
from journal_bridge.projection.history import project
from journal_bridge.store import open_store
from tests.harness.conversation import EARLY_SUMMARIZATION, TURNS, is_summary, message_ids_seen, stream_turn

pytestmark = pytest.mark.e2e


async def _compacted_thread(server):
    client = get_client(url=server.url)
    assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
    thread_id = (await client.threads.create())["thread_id"]
    frames = []
    for text in TURNS:
        frames += await stream_turn(client, thread_id, assistant["assistant_id"], text, "values")
    return client, thread_id, frames


async def _items(store, thread_id):
    return project(await store.list_timeline(thread_id, limit=500))


@pytest.fixture
async def plain_thread(start_dev_server):
    server = start_dev_server(plugin=False)
    client, thread_id, frames = await _compacted_thread(server)
    return server, client, thread_id, frames


async def test_backfill_recovers_every_message_and_each_compaction_in_order(plain_thread, tmp_path):
    _server, client, thread_id, frames = plain_thread
    async with open_store(f"sqlite:///{tmp_path / 'journal.db'}") as store:
        result = await backfill_thread(client, store, thread_id)
        items = await _items(store, thread_id)
        records = await store.list_timeline(thread_id, limit=500)

    assert result.status == "complete" and result.notes == []
    seen = message_ids_seen(frames)
    summaries = [m["id"] for m in seen if is_summary(m)]
    assert len(summaries) >= 2
    messages = [i for i in items if i["type"] != "summary_marker"]
    assert [m["id"] for m in messages] == [m["id"] for m in seen if not is_summary(m)]
    assert [m["content"] for m in messages if m["type"] == "human"] == TURNS
    markers = [i for i in items if i["type"] == "summary_marker"]
    assert [m["summary_message_id"] for m in markers] == summaries
    assert result.written == len(items) and result.markers == len(markers)
    position = {item["id"]: index for index, item in enumerate(items)}
    for marker, record in zip(markers, [r for r in records if r.category == "middleware"]):
        changes = record.content["changes"]
        assert marker["replaced_count"] == len(changes["replaced_message_ids"]) > 0
        assert not marker["summary"].startswith("Here is a summary"), "the upstream prefix is removed"
        replaced = [i for i in changes["replaced_message_ids"] if i in position]
        assert all(position[i] < position[marker["id"]] for i in replaced)
        assert items[position[marker["id"]] + 1]["type"] == "ai", "the marker precedes the answer that followed"
        assert record.metadata["source"] == "backfill" and record.run_id != "backfill"
        earlier = changes["previous_summary_ids"]
        assert set(earlier) <= set(summaries) and set(earlier) <= set(changes["replaced_message_ids"])
        assert marker["condensed_count"] == marker["replaced_count"] - len(earlier)
    # A later compaction also replaced the summary before it: not counted as condensed.
    assert markers[0]["condensed_count"] == markers[0]["replaced_count"]
    assert markers[1]["condensed_count"] == markers[1]["replaced_count"] - 1


async def test_a_second_backfill_writes_nothing(plain_thread, tmp_path):
    server, _client, thread_id, _ = plain_thread
    store_url = f"sqlite:///{tmp_path / 'journal.db'}"
    runs = []
    for _ in range(2):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "journal_bridge.cli", "backfill", "--url", server.url,
            "--store", store_url, "--json", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        assert f"thread {thread_id}: complete" in err.decode(), "progress names each thread"
        runs.append(json.loads(out))
    first, second = runs
    assert first["written"] > 0 and first["incomplete"] == []
    assert second["written"] == 0 and second["already_present"] == first["written"]


async def test_history_missing_its_early_checkpoints_is_reported_as_partial(plain_thread, tmp_path):
    _server, client, thread_id, _frames = plain_thread
    history = await client.threads.get_history(thread_id, limit=1000)
    # The newest checkpoint that already holds a summary, but before the second one.
    oldest_first = list(reversed(history))
    first_summary = next(i for i, s in enumerate(oldest_first) if any(map(is_summary, s["values"]["messages"])))
    since = oldest_first[first_summary + 1]["checkpoint"]["checkpoint_id"]
    async with open_store(f"sqlite:///{tmp_path / 'journal.db'}") as store:
        summary = await backfill(client, store, [thread_id], since_checkpoint=since)
        items = await _items(store, thread_id)
    (result,) = summary.threads
    assert result.status == "partial"
    assert "after a compaction" in result.notes[0] and since in result.notes[0]
    assert summary.to_dict()["incomplete"][0]["thread_id"] == thread_id
    # What the checkpoints still show is recovered; the earliest turns are not.
    humans = [i["content"] for i in items if i["type"] == "human"]
    assert humans == TURNS[-len(humans):] and len(humans) < len(TURNS)
    assert items[0]["type"] == "summary_marker" and items[0]["replaced_count"] is None
    assert items[0]["condensed_count"] is None


async def test_a_copied_thread_reports_its_lost_beginning(plain_thread, tmp_path):
    _server, client, thread_id, _ = plain_thread
    state = await client.threads.get_state(thread_id)
    copy = (await client.threads.create(graph_id="agent"))["thread_id"]
    await client.threads.update_state(copy, state["values"])
    async with open_store(f"sqlite:///{tmp_path / 'journal.db'}") as store:
        result = await backfill_thread(client, store, copy)
    assert result.status == "partial", result
    assert result.written > 0


async def test_backfill_of_a_thread_the_plugin_journaled_adds_nothing(dev_server):
    client, thread_id, _ = await _compacted_thread(dev_server)
    from tests.harness.conversation import wait_journal_idle

    await wait_journal_idle(dev_server.url)
    async with open_store(dev_server.store_url) as store:
        before = await store.last_seq(thread_id)
        result = await backfill_thread(client, store, thread_id)
        assert await store.last_seq(thread_id) == before
    assert result.status == "complete"
    assert result.written == 0 and result.already_present == result.messages + result.markers > 0


async def test_a_forked_thread_is_backfilled_as_the_branch_it_is_on(plain_thread, tmp_path):
    from journal_bridge.projection.history import history_page
    from tests.harness.thread_truth import regenerate_from, truth

    _server, client, thread_id, _ = plain_thread
    # An edit of an early question, then a regenerate of its answer: three branches.
    states = (await client.threads.get_history(thread_id, limit=1000))[::-1]
    second = next(s for s in states if len([m for m in s["values"].get("messages", []) if m["type"] == "human"]) == 2)
    await client.runs.wait(thread_id, "agent", input={"messages": [{"role": "user", "content": "edited"}]},
                           checkpoint_id=second["parent_checkpoint"]["checkpoint_id"])
    await client.runs.wait(thread_id, "agent", input=None, checkpoint_id=await regenerate_from(client, thread_id))
    expected, compactions = await truth(client, thread_id)
    async with open_store(f"sqlite:///{tmp_path / 'journal.db'}") as store:
        result = await backfill_thread(client, store, thread_id)
        page = await history_page(store, thread_id, limit=500)
    assert result.status == "complete", result
    assert [i["id"] for i in page["data"] if i["type"] != "summary_marker"] == expected
    assert sum(i["type"] == "summary_marker" for i in page["data"]) == compactions
