"""The SDK tee journals a server without the plugin exactly as the plugin would."""

from __future__ import annotations

import pytest
from conversation import (
    EARLY_SUMMARIZATION,
    TURNS,
    human,
    normalize,
    stream_turn,
    wait_journal_idle,
)
from langgraph_sdk import get_client

from journal_bridge.store import open_store
from journal_bridge.tee import JournalingClient

pytestmark = pytest.mark.e2e

UI_MODES = ["values", "messages-tuple"]


def _shape(records):
    """What the journal says, without ids, seqs and times."""
    shape = []
    for r in records:
        item = (r.event_type, r.category)
        if r.category == "message":
            item += (r.content["type"], r.content["content"])
        elif r.event_type == "middleware:summarize":
            changes = r.content["changes"]
            item += (changes["replaced_count"], changes["preserved_count"], changes["summary"])
        shape.append(item)
    return shape


async def _all_records(store, thread_id):
    run_ids = list(dict.fromkeys(r.run_id for r in await store.list_timeline(thread_id, limit=500)))
    records = [e for run_id in run_ids for e in await store.list_events(thread_id, run_id, limit=10_000)]
    return sorted(records, key=lambda e: e.seq)


async def _conversation(client, turns, modes):
    assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
    thread_id = (await client.threads.create())["thread_id"]
    frames = []
    for text in turns:
        frames += await stream_turn(client, thread_id, assistant["assistant_id"], text, modes)
    return thread_id, frames


async def test_tee_journals_what_the_plugin_journals_and_yields_what_plain_stream_yields(
    dev_server, start_dev_server, tmp_path
):
    plain = start_dev_server(plugin=False)
    store_url = f"sqlite:///{tmp_path / 'tee.db'}"
    turns = TURNS[:10]

    async with JournalingClient(get_client(url=plain.url), store_url) as client:
        tee_thread, tee_frames = await _conversation(client, turns, UI_MODES)
        assert await client.drain(timeout=30)
        assert client.health()["dropped"] == 0
    _plain_thread, plain_frames = await _conversation(get_client(url=plain.url), turns, UI_MODES)
    plugin_thread, _ = await _conversation(get_client(url=dev_server.url), turns, UI_MODES)
    await wait_journal_idle(dev_server.url)

    assert normalize(tee_frames) == normalize(plain_frames), "the tee must not change the caller's stream"
    async with open_store(store_url) as store:
        teed = await _all_records(store, tee_thread)
    async with open_store(dev_server.store_url) as store:
        plugged = await _all_records(store, plugin_thread)
    assert _shape(teed) == _shape(plugged)
    assert sum(r.event_type == "middleware:summarize" for r in teed) >= 2


async def test_tee_passes_events_through_when_asked_and_journals_stateless_runs(start_dev_server, tmp_path):
    plain = start_dev_server(plugin=False)
    store_url = f"sqlite:///{tmp_path / 'tee.db'}"
    async with JournalingClient(get_client(url=plain.url), store_url) as client:
        events = [p.event async for p in client.runs.stream(
            None, "agent", input=human("add 1 and 2"), stream_mode=["values", "events"])]
        v2 = [p async for p in client.runs.stream(
            None, "agent", input=human("stateless hello"), stream_mode="updates", version="v2")]
        await client.drain(timeout=30)
    assert "events" in events
    assert {p["type"] for p in v2} == {"metadata", "updates"}
    async with open_store(store_url) as store:
        threads = await store.list_threads()
        assert len(threads) == 2, "each stateless run is journaled under the thread the server gave it"
        humans = []
        for thread in threads:
            humans += [
                r.content["content"]
                for r in await store.list_messages(thread["thread_id"])
                if r.content["type"] == "human"
            ]
    humans.sort()
    assert humans == ["add 1 and 2", "stateless hello"]


async def test_an_unreachable_store_never_breaks_the_stream_and_the_next_client_delivers_what_was_spooled(
    start_dev_server, tmp_path
):
    plain = start_dev_server(plugin=False)
    missing = tmp_path / "no-such-dir" / "journal.db"
    spool = tmp_path / "tee.spool"
    client = JournalingClient(get_client(url=plain.url), f"sqlite:///{missing}", drain_timeout=0.5, spool=spool)
    async with client:
        frames = await stream_turn(client, None, "agent", "add 3 and 4", "values")
        assert next(e for e, _ in frames) == "metadata"
        health = client.health()
        assert health["backlog"] > 0 and health["store_open"] is False
        assert health["status"] == "unavailable" and "not open" in health["reason"]
    assert frames[-1][1]["messages"][-1]["content"]

    missing.parent.mkdir()
    async with JournalingClient(get_client(url=plain.url), f"sqlite:///{missing}", spool=spool) as later:
        assert await later.drain(timeout=30)
        health = later.health()
    assert health["spool_recovered"] > 0 and health["status"] == "ok", health
    async with open_store(f"sqlite:///{missing}") as store:
        (thread,) = await store.list_threads()
        messages = [r.content for r in await store.list_messages(thread["thread_id"])]
    assert [m["content"] for m in messages if m["type"] == "human"] == ["add 3 and 4"]
