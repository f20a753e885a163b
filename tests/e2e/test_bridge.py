"""Every run of every client is journaled, against a real `langgraph dev` of this project.

Every record the tests read back is checked against deer-flow's run event
stream contract; the scripted conversation runs on a server capturing from
`events` and on one capturing from `values` + `custom`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from journal_bridge.capture.intercept import READER_HEADER
from journal_bridge.host import retained_frames
from journal_bridge.model.records import is_hidden
from journal_bridge.store import open_store
from tests.harness.contract import assert_contract, journaled_records
from tests.harness.conversation import EARLY_SUMMARIZATION, TURNS, human, is_summary, message_ids_seen, normalize, stream_turn, wait_journal_idle
from tests.harness.langgraph_server import LanggraphDevServer

pytestmark = pytest.mark.e2e

UI_MODES = ["values", "messages-tuple", "updates"]


async def _early_assistant(client) -> str:
    assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
    return assistant["assistant_id"]


@pytest.fixture(scope="module", params=["events", "lean"])
def capture_server(request, tmp_path_factory) -> Iterator[LanggraphDevServer]:
    """A server capturing every run one way (`JOURNAL_BRIDGE_CAPTURE`)."""
    workdir = tmp_path_factory.mktemp(f"capture-{request.param}")
    with LanggraphDevServer(env={"JOURNAL_BRIDGE_CAPTURE": request.param}, workdir=workdir) as server:
        yield server


async def _timeline(server, thread_id: str):
    """Every record of the thread, each checked against the contract."""
    return await journaled_records(server.store_url, thread_id)


async def _summary_ids_in_checkpoints(client, thread_id: str) -> set[str]:
    history = await client.threads.get_history(thread_id, limit=1000)
    return {
        message["id"]
        for checkpoint in history
        for message in (checkpoint["values"] or {}).get("messages", [])
        if is_summary(message)
    }


async def test_values_only_client_conversation_is_journaled_with_markers(capture_server):
    dev_server = capture_server
    client = get_client(url=dev_server.url)
    assistant_id = await _early_assistant(client)
    thread_id = (await client.threads.create())["thread_id"]
    frames = []
    for text in TURNS:
        frames += await stream_turn(client, thread_id, assistant_id, text, "values")
    assert {event for event, _ in frames} == {"metadata", "values"}, "the client got a mode it did not ask for"
    await wait_journal_idle(dev_server.url)

    timeline = await _timeline(dev_server, thread_id)
    messages = [r for r in timeline if r.category == "message" and not is_hidden(r.metadata)]
    expected = [m for m in message_ids_seen(frames) if not is_summary(m)]
    # Every message the conversation ever had, in order -- also those compaction removed.
    assert [r.content["id"] for r in messages] == [m["id"] for m in expected]
    assert [r.content["content"] for r in messages if r.content["type"] == "human"] == TURNS
    assert any(r.content["type"] == "tool" for r in messages)
    final = await client.threads.get_state(thread_id)
    assert len(final["values"]["messages"]) < len(messages), "the checkpoint should have been compacted"

    markers = [r for r in timeline if r.event_type == "middleware:summarize"]
    summary_ids = await _summary_ids_in_checkpoints(client, thread_id)
    assert len(markers) == len(summary_ids) >= 2, "one marker per compaction"
    # Some compactions fire before the run's first answer, the earliest a custom event can come.
    def before_first_answer(marker) -> bool:
        answers = [r.seq for r in messages if r.run_id == marker.run_id and r.content["type"] == "ai"]
        return marker.seq < min(answers)

    assert any(before_first_answer(marker) for marker in markers)
    assert {m.content["changes"]["summary_message_id"] for m in markers} == summary_ids
    seq_of = {r.content["id"]: r.seq for r in messages}
    for marker in markers:
        changes = marker.content["changes"]
        assert marker.category == "middleware" and marker.content["action"] == "summarize"
        replaced = [i for i in changes["replaced_message_ids"] if i not in summary_ids]
        assert replaced and all(seq_of[i] < marker.seq for i in replaced), "marker must follow what it replaced"
        following = next(r for r in messages if r.seq > marker.seq)
        assert following.content["type"] == "ai" and following.run_id == marker.run_id


async def _raw_turn(http: httpx.AsyncClient, thread_id: str, assistant_id: str, text: str) -> bytes:
    body = {"assistant_id": assistant_id, "input": human(text), "stream_mode": UI_MODES}
    async with http.stream("POST", f"/threads/{thread_id}/runs/stream", json=body) as response:
        assert response.status_code == 200
        return b"".join([chunk async for chunk in response.aiter_raw()])


def _comparable(raw: bytes) -> list[tuple[list[str], object]]:
    """Each SSE frame as (its field lines but `data:`, its data as JSON), ids normalised.

    Heartbeats (timing, not content) are dropped. Data is compared as JSON values:
    the server itself does not keep the key order of run metadata from one frame
    to the next, with or without the plugin.
    """
    frames = []
    for frame in raw.decode().split("\r\n\r\n"):
        if not frame or frame.startswith(":"):
            continue
        lines = frame.split("\r\n")
        data = [line[len("data: "):] for line in lines if line.startswith("data: ")]
        assert len(data) == 1, frame
        fields = [line for line in lines if not line.startswith("data: ")]
        frames.append((fields, json.loads(data[0])))
    return normalize(frames)


async def test_client_frames_are_identical_with_and_without_the_plugin(dev_server, start_dev_server):
    plain = start_dev_server(plugin=False)
    received, threads = {}, {}
    for name, server in (("plugin", dev_server), ("plain", plain)):
        client = get_client(url=server.url)
        assistant_id = await _early_assistant(client)
        thread_id = threads[name] = (await client.threads.create())["thread_id"]
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
            raw = [await _raw_turn(http, thread_id, assistant_id, text) for text in TURNS[:9]]
        received[name] = [_comparable(turn) for turn in raw]
    # The bytes on the wire, frame for frame: modes, order, payloads, no added id lines.
    assert received["plugin"] == received["plain"]
    fields = [line for turn in received["plugin"] for lines, _ in turn for line in lines]
    assert not any(re.match(r"id:|event: events", line) for line in fields)
    assert any(re.match(r"event: ", line) for line in fields)
    assert any("summarization" in json.dumps(data) for turn in received["plugin"] for _, data in turn), \
        "the script should compact"
    await wait_journal_idle(dev_server.url)
    records = await _timeline(dev_server, threads["plugin"])
    assert [r.content["content"] for r in records if r.event_type == "llm.human.input"] == TURNS[:9]


async def test_background_and_wait_runs_are_journaled(dev_server):
    client = get_client(url=dev_server.url)
    thread_id = (await client.threads.create())["thread_id"]
    run = await client.runs.create(thread_id, "agent", input=human("add 20 and 22"))
    await client.runs.join(thread_id, run["run_id"])
    result = await client.runs.wait(thread_id, "agent", input=human("weather in Rome"))
    assert set(result) == {"messages"}, "the wait response is the final state, nothing more"
    await wait_journal_idle(dev_server.url)

    timeline = await _timeline(dev_server, thread_id)
    messages = [r.content for r in timeline if r.category == "message" and not is_hidden(r.metadata)]
    state = await client.threads.get_state(thread_id)
    assert [m["id"] for m in messages] == [m["id"] for m in state["values"]["messages"]]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"] * 2
    runs = {r.run_id for r in timeline}
    assert len(runs) == 2 and run["run_id"] in runs


async def test_only_the_journals_own_joins_lose_the_reconnect_location(dev_server):
    """The journal's joins go without `Location`, so the SDK asks no run status of its own
    when they end (the reader asks once); a client's join keeps the header."""
    client = get_client(url=dev_server.url)
    thread_id = (await client.threads.create())["thread_id"]
    run = await client.runs.create(thread_id, "agent", input=human("add 1 and 2"))
    await client.runs.join(thread_id, run["run_id"])
    path = f"/threads/{thread_id}/runs/{run['run_id']}/stream"
    async with httpx.AsyncClient(base_url=dev_server.url, timeout=30) as http:
        as_client = await http.get(path)
        as_journal = await http.get(path, headers={READER_HEADER: "1"})
    assert as_client.status_code == as_journal.status_code == 200
    assert as_client.headers["location"] == path
    assert "location" not in as_journal.headers
    assert as_journal.headers["content-location"] == f"/threads/{thread_id}/runs/{run['run_id']}"


async def test_concurrent_threads_keep_their_own_order(dev_server):
    client = get_client(url=dev_server.url)

    async def conversation(index: int):
        thread_id = (await client.threads.create())["thread_id"]
        texts = [f"add {index} and {turn}" for turn in range(3)] + [f"thread {index} says bye"]
        frames = []
        for text in texts:
            frames += await stream_turn(client, thread_id, "agent", text, "values")
        return thread_id, texts, frames

    results = await asyncio.gather(*(conversation(i) for i in range(8)))
    await wait_journal_idle(dev_server.url)
    for thread_id, texts, frames in results:
        timeline = await _timeline(dev_server, thread_id)
        assert {r.thread_id for r in timeline} == {thread_id}
        messages = [r.content for r in timeline if r.category == "message" and not is_hidden(r.metadata)]
        assert [m["id"] for m in messages] == [m["id"] for m in message_ids_seen(frames)]
        assert [m["content"] for m in messages if m["type"] == "human"] == texts
        async with open_store(dev_server.store_url) as store:
            every = [e for run_id in {r.run_id for r in timeline} for e in await store.list_events(thread_id, run_id)]
            assert sorted(e.seq for e in every) == list(range(1, await store.last_seq(thread_id) + 1))


async def test_stateless_and_batch_runs_are_journaled(dev_server):
    client = get_client(url=dev_server.url)
    frames = []
    async for part in client.runs.stream(None, "agent", input=human("stateless hello"), stream_mode="values"):
        frames.append((part.event, part.data))
    assert {event for event, _ in frames} == {"metadata", "values"}
    stateless_run = frames[0][1]["run_id"]
    batch = await client.runs.create_batch(
        [{"assistant_id": "agent", "input": human(f"batch {i}")} for i in range(2)]
    )
    # Stateless threads are deleted when their run ends, so there is nothing to join:
    # the bridge observed the runs when they were created and is waited for instead.
    health = await wait_journal_idle(dev_server.url)
    assert health["dropped"] == 0 and health["runs_failed"] == 0

    async with open_store(dev_server.store_url) as store:
        journaled = {}
        for thread in await store.list_threads(limit=500):
            for run_id in (stateless_run, *(r["run_id"] for r in batch)):
                events = await store.list_events(thread["thread_id"], run_id)
                if events:
                    journaled[run_id] = (thread["thread_id"], events)
    assert set(journaled) == {stateless_run, *(r["run_id"] for r in batch)}
    assert_contract(event for _, events in journaled.values() for event in events)
    stateless_thread, events = journaled[stateless_run]
    # Its temporary thread is named to no client: the journal files it under the run.
    assert stateless_thread == stateless_run
    humans = [e.content["content"] for e in events if e.event_type == "llm.human.input"]
    assert humans == ["stateless hello"]
    assert [m["id"] for m in message_ids_seen(frames)] == [e.content["id"] for e in events if e.category == "message"]
    for index, run in enumerate(batch):
        thread_id, events = journaled[run["run_id"]]
        assert thread_id == run["thread_id"]
        assert [e.content["content"] for e in events if e.event_type == "llm.human.input"] == [f"batch {index}"]


async def test_frames_kept_for_the_replay_are_released_after_journaling(dev_server):
    client = get_client(url=dev_server.url)
    # The server is shared: other tests' clients may keep frames for their own resumption.
    before = await wait_journal_idle(dev_server.url)
    thread_id = (await client.threads.create())["thread_id"]
    for text in ("hello", "add 1 and 2", "weather in Bern"):
        await stream_turn(client, thread_id, "agent", text, ["values", "messages-tuple"])
    health = await wait_journal_idle(dev_server.url)
    assert health["frames_released"] > before["frames_released"]
    assert health["retained_frames"] == before["retained_frames"], "journaling must not leave per-run buffers behind"


async def _streamed_while_counting_retained_frames(start_dev_server, **stream: Any):
    """A useStream-like run on a server whose model streams a token every 20 ms,
    the run still going while the server's retained frames are counted: every
    fifth frame from the 20th, (frames received so far, frames retained)."""
    server = start_dev_server(env={"JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": "0.02"})
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]
    received, samples = [], []
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        async for part in client.runs.stream(thread_id, "agent", input=human("what is the weather in Paris?"),
                                             stream_mode=["values", "messages-tuple"], **stream):
            received.append((part.event, part.data))
            if len(received) >= 20 and len(received) % 5 == 0:
                samples.append((len(received), (await http.get("/journal/health")).json()["retained_frames"]))
    health = await wait_journal_idle(server.url)
    assert len(samples) >= 3, "the run streamed too few frames to tell"
    records = await _timeline(server, thread_id)
    assert [m["id"] for m in message_ids_seen(received)] == [e.content["id"] for e in records if e.category == "message"]
    return client, thread_id, received, samples, health


async def test_frames_only_the_journal_replays_are_released_while_the_run_streams(start_dev_server):
    _, _, _, samples, health = await _streamed_while_counting_retained_frames(start_dev_server)
    # Kept to the run's end, the server would hold every frame so far (the journal's
    # `events` ones too): more than the client received. Released a few at a time,
    # it holds at most those few more than the frames still on their way.
    assert all(retained < count / 2 + retained_frames.RELEASE_EVERY for count, retained in samples), samples
    assert health["retained_frames"] == 0


async def test_for_a_client_that_asked_for_resumable_the_journals_frames_go_while_the_run_streams(start_dev_server):
    client, thread_id, received, samples, _ = await _streamed_while_counting_retained_frames(
        start_dev_server, stream_resumable=True
    )
    # The client's own frames stay; kept to the run's end, the journal's `events`
    # frames would more than double what the server holds.
    assert all(retained < count * 1.5 for count, retained in samples), samples
    run_id = received[0][1]["run_id"]
    replayed = [(part.event, part.data) async for part in client.runs.join_stream(thread_id, run_id, last_event_id="0")]
    assert replayed == received


async def test_a_client_that_asked_for_resumable_can_still_resume(dev_server):
    client = get_client(url=dev_server.url)
    thread_id = (await client.threads.create())["thread_id"]
    live = []
    async for part in client.runs.stream(thread_id, "agent", input=human("add 5 and 6"),
                                         stream_mode="values", stream_resumable=True):
        live.append((part.event, part.data))
    run_id = live[0][1]["run_id"]
    health = await wait_journal_idle(dev_server.url)
    replayed = []
    async for part in client.runs.join_stream(thread_id, run_id, last_event_id="0"):
        replayed.append((part.event, part.data))
    assert replayed == live
    assert all(event != "events" for event, _ in replayed)
    assert health["retained_frames"] > 0, "the client's own frames stay for its resumption"


async def test_streams_joined_later_show_only_what_their_clients_asked_for(dev_server):
    client = get_client(url=dev_server.url)
    thread_id = (await client.threads.create())["thread_id"]

    async def thread_stream():
        frames = []
        stream = await client.threads.join_stream(thread_id)
        async for part in stream:
            frames.append(part.event)
            if part.event == "updates" and frames.count("updates") >= 5:
                break
        return frames

    watcher = asyncio.create_task(thread_stream())
    await asyncio.sleep(0.5)
    # The plugin reads this run from `values` and `custom`, which its client did not ask for.
    run = await client.runs.create(thread_id, "agent", input=human("add 8 and 9"), stream_mode=["updates"])
    joined = [part.event async for part in client.runs.join_stream(thread_id, run["run_id"])]
    thread_frames = await asyncio.wait_for(watcher, timeout=60)
    assert set(joined) == {"metadata", "updates"}, joined
    assert set(thread_frames) == {"metadata", "updates"}, thread_frames
    await wait_journal_idle(dev_server.url)
    timeline = await _timeline(dev_server, thread_id)
    assert [r.content["type"] for r in timeline if r.category == "message" and not is_hidden(r.metadata)] == ["human", "ai", "tool", "ai"]
