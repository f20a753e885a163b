"""The follower sidecar journals runs of a server without the plugin, and reports what it cannot."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from langgraph_sdk import get_client

from journal_bridge.capture.follower import Follower
from journal_bridge.model.records import is_hidden
from journal_bridge.store import open_store
from tests.harness.conversation import EARLY_SUMMARIZATION, TURNS, human, message_ids_seen

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


@contextlib.asynccontextmanager
async def _following(server, store, tmp_path):
    """A follower of `server` writing to `store`, running for the block; cancelled after it."""
    follower = Follower(get_client(url=server.url), store, cursor_path=tmp_path / "cursor.json", interval=0.2)
    task = asyncio.create_task(follower.run())
    try:
        yield follower
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_runs_of_another_client_are_journaled_and_unobservable_ones_reported(start_dev_server, tmp_path):
    server = start_dev_server(plugin=False)
    client = get_client(url=server.url)
    async with open_store(f"sqlite:///{tmp_path / 'journal.db'}") as store:
        async with _following(server, store, tmp_path) as follower:
            thread_id = (await client.threads.create())["thread_id"]
            created = time.monotonic()
            run = await client.runs.create(thread_id, "agent", input=human("add 2 and 3"), **OBSERVABLE)
            polls_before = follower.stats["polls"]
            await _wait(lambda: _true(run["run_id"] in follower.discovered_at))
            latency = follower.discovered_at[run["run_id"]] - created
            found_by = follower.discovered_by_poll[run["run_id"]]
            await client.runs.join(thread_id, run["run_id"])
            frames = await _turns(client, thread_id, "agent", ["weather in Oslo"])
            blind = await client.runs.create(thread_id, "agent", input=human("updates only"), stream_mode="updates")
            await client.runs.join(thread_id, blind["run_id"])
            await _wait(lambda: _true(follower.stats["unobservable"] >= 1 and follower.stats["journaled"] >= 2))
            await follower.delivery.drain()
            health = follower.health()
        state = await client.threads.get_state(thread_id)
        messages = [r.content for r in await store.list_messages(thread_id, limit=500)]

    # A poll under way when the run was created may miss it; the next one finds it.
    assert found_by <= polls_before + 2, f"found by poll {found_by}, created after poll {polls_before}"
    expected = [m["id"] for m in state["values"]["messages"]]
    humans = [m["content"] for m in messages if m["type"] == "human"]
    assert humans == ["add 2 and 3", "weather in Oslo"], "the updates-only run cannot be journaled"
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
    messages = [r.content for r in timeline if r.category == "message" and not is_hidden(r.metadata)]
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

    server = start_dev_server(plugin=False)
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]
    await _turns(client, thread_id, "agent", ["add 1 and 1"])
    blind = await client.runs.create(thread_id, "agent", input=human("no events"), stream_mode="updates")
    await client.runs.join(thread_id, blind["run_id"])
    store_url = f"sqlite:///{tmp_path / 'journal.db'}"
    returncode, out, err = await _follow("--url", server.url, "--store", store_url, "--once", "--json")
    assert returncode == 0, err
    summary = json.loads(out)
    assert summary["journaled"] == 1 and summary["unobservable"] == 1
    assert blind["run_id"] in err, "the unobservable run is named in the log"
    assert "HTTP Request" not in err, "request lines only with -v"
    assert (tmp_path / "journal.db.follow.json").exists()

    # Again, verbose: nothing new to journal, every request logged.
    returncode, out, err = await _follow("--url", server.url, "--store", store_url, "--once", "--json", "-v")
    assert returncode == 0 and "HTTP Request" in err, err
    assert json.loads(out)["runs_discovered"] == 0


async def _follow(*args: str) -> tuple[int, str, str]:
    import sys

    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "journal_bridge.cli", "follow", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    return process.returncode, out.decode(), err.decode()


async def test_follow_once_fails_when_the_server_cannot_be_polled(tmp_path):
    import json

    store_url = f"sqlite:///{tmp_path / 'journal.db'}"
    returncode, out, err = await _follow("--url", "http://127.0.0.1:9", "--store", store_url, "--once", "--json")
    assert returncode == 1, (out, err)
    summary = json.loads(out)
    assert summary["poll_errors"] == 1 and summary["status"] == "unavailable"
    assert "cannot be polled" in summary["reason"] and "poll failed" in err


async def test_from_now_leaves_earlier_runs_alone(start_dev_server, tmp_path):
    server = start_dev_server(plugin=False)
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]
    await _turns(client, thread_id, "agent", ["before the follower"])
    async with open_store(f"sqlite:///{tmp_path / 'journal.db'}") as store:
        follower = Follower(get_client(url=server.url), store, interval=0.2, from_now=True)
        await follower.start()
        await _turns(client, thread_id, "agent", ["after it started"])
        await follower.run(once=True)
        await follower.bridge.stop()
        messages = [r.content for r in await store.list_messages(thread_id)]
    assert [m["content"] for m in messages if m["type"] == "human"] == ["after it started"]
    assert follower.summary()["runs_discovered"] == 1 and not follower.reports


async def test_runs_are_joined_with_the_modes_they_have_and_journaled_runs_are_recognised(
    start_dev_server, tmp_path
):
    from journal_bridge.tee import JournalingClient

    server = start_dev_server(plugin=False)
    client = get_client(url=server.url)
    store_url = f"sqlite:///{tmp_path / 'journal.db'}"
    thread_id = (await client.threads.create())["thread_id"]
    # Journaled by a tee: neither resumable nor with `events`.
    async with JournalingClient(get_client(url=server.url), store_url) as tee:
        async for _ in tee.runs.stream(thread_id, "agent", input=human("teed"), stream_mode="values"):
            pass
        assert await tee.drain(timeout=30)
    # Nobody journals these: values only (state mapper), and values with custom.
    for text, modes in (("values run", ["values"]), ("values and custom run", ["values", "custom"])):
        run = await client.runs.create(thread_id, "agent", input=human(text), stream_mode=modes,
                                       stream_resumable=True)
        await client.runs.join(thread_id, run["run_id"])
    async with open_store(store_url) as store:
        follower = Follower(get_client(url=server.url), store, interval=0.2)
        await follower.run(once=True)
        await follower.bridge.stop()
        messages = [r.content for r in await store.list_messages(thread_id, limit=500)]
        ends = await store.list_events(thread_id, run["run_id"], event_types=["run.end"])
    state = await client.threads.get_state(thread_id)
    summary = follower.summary()
    assert summary["already_journaled"] == 1 and summary["journaled"] == 2, summary
    assert summary["unobservable"] == 0 and not summary["reported"], summary
    assert [m["id"] for m in messages] == [m["id"] for m in state["values"]["messages"]]
    assert len(ends) == 1


async def test_a_run_from_an_earlier_checkpoint_forks_the_followed_journal(start_dev_server, tmp_path):
    from journal_bridge.projection.history import history_page
    from tests.harness.thread_truth import regenerate_from, truth

    server = start_dev_server(plugin=False)
    client = get_client(url=server.url)
    async with open_store(f"sqlite:///{tmp_path / 'followed.db'}") as store:
        async with _following(server, store, tmp_path):
            thread_id = (await client.threads.create())["thread_id"]
            for text in ("hello", "add 2 and 3"):
                run = await client.runs.create(thread_id, "agent", input=human(text), **OBSERVABLE)
                await client.runs.join(thread_id, run["run_id"])
            checkpoint_id = await regenerate_from(client, thread_id)
            run = await client.runs.create(thread_id, "agent", input=None, checkpoint_id=checkpoint_id, **OBSERVABLE)
            await client.runs.join(thread_id, run["run_id"])
            expected, _ = await truth(client, thread_id)
            deadline = time.monotonic() + 60
            while True:
                page = await history_page(store, thread_id, limit=500)
                ids = [i["id"] for i in page["data"] if i["type"] in ("human", "ai", "tool")]
                if ids == expected or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
    assert ids == expected
