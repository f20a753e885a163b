"""A bridge that stops mid-run and starts again journals the run once, in order.

Runs on a real `langgraph dev` without the plugin: the test creates the runs
resumable with the events mode itself, and bridges in the test process read
them through the SDK into a real SQLite file.
"""

from __future__ import annotations

import pytest
from langgraph_sdk import get_client

from journal_bridge.delivery.bridge import Bridge
from journal_bridge.mapping.events_mapper import RunMapper
from journal_bridge.store import open_store
from tests.harness.conversation import EARLY_SUMMARIZATION, TURNS, human

pytestmark = pytest.mark.e2e


async def _runs(server, turns):
    client = get_client(url=server.url)
    assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
    thread_id = (await client.threads.create())["thread_id"]
    run_ids = []
    for text in turns:
        run = await client.runs.create(
            thread_id, assistant["assistant_id"], input=human(text),
            stream_mode=["values", "events"], stream_resumable=True,
        )
        await client.runs.join(thread_id, run["run_id"])
        run_ids.append(run["run_id"])
    return client, thread_id, run_ids


async def _journal(store, client, thread_id, run_ids):
    bridge = Bridge(store, lambda: client)
    await bridge.start()
    for run_id in run_ids:
        bridge.observe(thread_id, run_id)
    await bridge.wait_for_runs()
    await bridge.drain()
    await bridge.stop()
    return bridge


async def _everything(store, thread_id, run_ids):
    return [e for run_id in run_ids for e in await store.list_events(thread_id, run_id, limit=10_000)]


async def test_restarted_bridge_completes_a_half_journaled_run_without_duplicates(start_dev_server, tmp_path):
    server = start_dev_server(plugin=False)
    client, thread_id, run_ids = await _runs(server, TURNS[:8])

    async with open_store(f"sqlite:///{tmp_path / 'once.db'}") as store:
        await _journal(store, client, thread_id, run_ids)
        reference = await _everything(store, thread_id, run_ids)
    assert any(e.event_type == "middleware:summarize" for e in reference)

    async with open_store(f"sqlite:///{tmp_path / 'restarted.db'}") as store:
        # The first bridge got through the earlier runs and half of the last one.
        await _journal(store, client, thread_id, run_ids[:-1])
        parts = [p async for p in client.runs.join_stream(thread_id, run_ids[-1], stream_mode="events", last_event_id="0")]
        mapper = RunMapper(thread_id, run_ids[-1])
        half = [r for p in parts[: len(parts) // 2] for r in mapper.feed(p.event, p.data)]
        assert half, "the first bridge should have journaled part of the run"
        await store.put_batch(half)
        # The restarted bridge replays every run from its first frame.
        bridge = await _journal(store, client, thread_id, run_ids)
        restarted = await _everything(store, thread_id, run_ids)
        assert bridge.stats.dropped == 0

    def shape(events):
        return [(e.seq, e.run_id, e.event_type, e.source_key, e.content) for e in events]

    assert shape(restarted) == shape(reference)
    keys = [e.source_key for e in restarted]
    assert len(keys) == len(set(keys))
