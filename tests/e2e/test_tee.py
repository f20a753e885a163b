"""The SDK tee: a caller gets exactly what plain `runs.stream` gives, and the
journal holds exactly what the plugin would have journaled.

Every comparison runs the same script against a real `langgraph dev` without
the plugin, once through `JournalingClient` and once through the plain SDK
client; the journal is compared with the one a server with the plugin writes
for the same conversation.
"""

from __future__ import annotations

import asyncio
import difflib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from journal_bridge.store import open_store
from journal_bridge.tee import JournalingClient
from tests.harness.conversation import (
    EARLY_SUMMARIZATION,
    human,
    stream_turn,
    wait_journal_idle,
)
from tests.harness.langgraph_server import LanggraphDevServer
from tests.harness.onoff import SAMPLED_STREAM_MODES, STREAM_MODES, TURNS, mode_name
from tests.harness.suites import sampled
from tests.harness.transcripts import normalize

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LanggraphDevServer]:
    with LanggraphDevServer(plugin=False, workdir=tmp_path_factory.mktemp("plain")) as server:
        yield server


def _part(part: Any) -> Any:
    """A yielded part as the caller can observe it: a v1 `StreamPart`'s fields, or the v2 dict."""
    if isinstance(part, dict):
        return {"v2": part}
    return {"type": type(part).__name__, "event": part.event, "data": part.data, "id": part.id}


async def _script(client, mode, version: str = "v1", *, turns=TURNS) -> tuple[str, list[Any]]:
    """A conversation that compacts, streamed with `mode`; the parts the caller got and the thread's history."""
    assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
    thread_id = (await client.threads.create())["thread_id"]
    parts: list[Any] = []
    for text in turns:
        async for part in client.runs.stream(
            thread_id, assistant["assistant_id"], input=human(text), stream_mode=mode, version=version
        ):
            parts.append(_part(part))
    history = await client.threads.get_history(thread_id, limit=1000)
    parts.append({"history": [[[m["type"], m["id"]] for m in c["values"].get("messages", [])] for c in reversed(history)]})
    return thread_id, parts


def _text(items: list[Any]) -> list[str]:
    # Keys sorted: the server does not keep the key order of run metadata from one frame to the next.
    return [json.dumps(item, sort_keys=True) for item in normalize(items)]


def _assert_same(expected: list[Any], actual: list[Any], what: str) -> None:
    left, right = _text(expected), _text(actual)
    if left != right:
        diff = difflib.unified_diff(left, right, "plain", "tee", lineterm="", n=2)
        pytest.fail(f"{what} differ:\n" + "\n".join(list(diff)[:80]))


async def _journal(store_url: str, thread_id: str) -> list[dict[str, Any]]:
    """A thread's records in seq order, as the store gives them, without seqs and times."""
    async with open_store(store_url) as store:
        run_ids = list(dict.fromkeys(r.run_id for r in await store.list_timeline(thread_id, limit=1000)))
        records = [e for run_id in run_ids for e in await store.list_events(thread_id, run_id, limit=10_000)]
    return [
        {k: v for k, v in dict(r).items() if k not in ("seq", "id", "created_at")}
        for r in sorted(records, key=lambda r: r.seq)
    ]


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("mode", sampled(STREAM_MODES, SAMPLED_STREAM_MODES), ids=mode_name)
async def test_the_caller_gets_exactly_what_plain_runs_stream_gives(plain, tmp_path, mode, version):
    async with JournalingClient(get_client(url=plain.url), f"sqlite:///{tmp_path / 'tee.db'}") as client:
        thread_id, teed = await _script(client, mode, version)
        assert await client.drain(timeout=60)
        health = client.health()
    _, expected = await _script(get_client(url=plain.url), mode, version)
    _assert_same(expected, teed, f"parts of stream_mode={mode!r} version={version}")
    assert health["status"] == "ok", health
    messages = [r["content"] for r in await _journal(f"sqlite:///{tmp_path / 'tee.db'}", thread_id)
                if r["category"] == "message"]
    assert [m["content"] for m in messages if m["type"] == "human"] == TURNS


@pytest.mark.parametrize("mode", sampled(STREAM_MODES, SAMPLED_STREAM_MODES), ids=mode_name)
async def test_the_journal_is_the_plugins(plain, dev_server, tmp_path, mode):
    plugin = dev_server
    store_url = f"sqlite:///{tmp_path / 'tee.db'}"
    async with JournalingClient(get_client(url=plain.url), store_url) as client:
        tee_thread, _ = await _script(client, mode)
        assert await client.drain(timeout=60)
    plugin_thread, _ = await _script(get_client(url=plugin.url), mode)
    await wait_journal_idle(plugin.url)
    teed, plugged = await _journal(store_url, tee_thread), await _journal(plugin.store_url, plugin_thread)
    _assert_same(plugged, teed, f"journals of stream_mode={mode!r}")
    assert sum(r["event_type"] == "middleware:summarize" for r in teed) >= 1


async def test_a_stateless_run_is_journaled_under_its_run_id(plain, tmp_path):
    store_url = f"sqlite:///{tmp_path / 'tee.db'}"
    async with JournalingClient(get_client(url=plain.url), store_url) as client:
        events = [p async for p in client.runs.stream(
            None, "agent", input=human("add 1 and 2"), stream_mode=["values", "events"])]
        v2 = [p async for p in client.runs.stream(
            None, "agent", input=human("stateless hello"), stream_mode="updates", version="v2")]
        assert await client.drain(timeout=30)
        health = client.health()
    assert "events" in {p.event for p in events}
    assert {p["type"] for p in v2} == {"metadata", "updates"}
    run_ids = [events[0].data["run_id"], v2[0]["data"]["run_id"]]
    async with open_store(store_url) as store:
        humans = []
        for run_id in run_ids:
            # Its temporary thread is named to no client: the journal files the run under its own id.
            records = await store.list_messages(run_id)
            humans.append([r.content["content"] for r in records if r.content["type"] == "human"])
    assert humans == [["add 1 and 2"], ["stateless hello"]]
    assert health["runs_failed"] == 0 and health["status"] == "ok", health


async def test_an_invalid_stream_mode_is_refused_in_the_callers_own_words(plain, tmp_path):
    async def refusal(client) -> str:
        with pytest.raises(httpx.HTTPStatusError) as caught:
            async for _ in client.runs.stream(None, "agent", input=human("x"), stream_mode=["values", "bogus"]):
                pass
        return caught.value.response.text

    async with JournalingClient(get_client(url=plain.url), f"sqlite:///{tmp_path / 'tee.db'}") as client:
        teed = await refusal(client)
    assert teed == await refusal(get_client(url=plain.url))
    assert "bogus" in teed and "custom" not in teed and "events" not in teed


async def _whole_run_journaled(store_url: str, thread_id: str) -> list[dict[str, Any]]:
    records = await _journal(store_url, thread_id)
    kinds = [r["event_type"] for r in records]
    assert kinds[0] == "run.start" and kinds[-1] == "run.end", kinds
    return records


@pytest.mark.parametrize("mode", ["values", "messages-tuple"])
async def test_a_caller_that_stops_reading_early_still_gets_the_whole_run_journaled(plain, tmp_path, mode):
    store_url = f"sqlite:///{tmp_path / 'tee.db'}"
    plain_client = get_client(url=plain.url)
    async with JournalingClient(plain_client, store_url) as client:
        thread_id = (await client.threads.create())["thread_id"]
        async for _part in client.runs.stream(thread_id, "agent", input=human("add 2 and 3"), stream_mode=mode):
            break
        assert await client.drain(timeout=60)
        health = client.health()
    state = await plain_client.threads.get_state(thread_id)
    records = await _whole_run_journaled(store_url, thread_id)
    journaled = [r["content"]["id"] for r in records if r["category"] == "message"]
    assert journaled == [m["id"] for m in state["values"]["messages"]]
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai", "tool", "ai"]
    assert health["status"] == "ok" and health["runs_partial"] == 0, health


async def test_a_caller_cancelled_mid_read_leaves_a_run_read_in_part_and_says_so(plain, tmp_path, caplog):
    store_url = f"sqlite:///{tmp_path / 'tee.db'}"
    plain_client = get_client(url=plain.url)
    async with JournalingClient(plain_client, store_url) as client:
        thread_id = (await client.threads.create())["thread_id"]
        first = asyncio.Event()

        async def read() -> None:
            async for _part in client.runs.stream(thread_id, "agent", input=human("add 2 and 3")):
                first.set()

        reader = asyncio.create_task(read())
        await first.wait()
        reader.cancel()  # inside the next read: that response cannot be read further
        await asyncio.gather(reader, return_exceptions=True)
        assert await client.drain(timeout=60)
        health = client.health()
    state = await plain_client.threads.get_state(thread_id)
    records = await _whole_run_journaled(store_url, thread_id)
    # The state capture takes the messages the live join missed from the final state.
    assert [r["content"]["id"] for r in records if r["category"] == "message"] == [
        m["id"] for m in state["values"]["messages"]
    ]
    assert health["runs_partial"] == 1 and health["status"] == "degraded", health
    assert "read in part" in health["reason"]
    assert any("ended early" in r.getMessage() for r in caplog.records)


async def test_an_unreachable_server_fails_the_caller_as_plain_stream_does_and_journals_nothing(tmp_path):
    url = "http://127.0.0.1:9"  # discard port: nothing listens there

    async def failure(client) -> type[BaseException]:
        with pytest.raises(httpx.HTTPError) as caught:
            async for _ in client.runs.stream(None, "agent", input=human("x")):
                pass
        return type(caught.value)

    async with JournalingClient(get_client(url=url), f"sqlite:///{tmp_path / 'tee.db'}") as client:
        teed = await failure(client)
        health = client.health()
    assert teed is await failure(get_client(url=url))
    assert health["status"] == "ok" and health["records_enqueued"] == 0, health


async def test_an_unreachable_store_never_breaks_the_stream_and_the_next_client_delivers_what_was_spooled(
    plain, tmp_path
):
    missing = tmp_path / "no-such-dir" / "journal.db"
    spool = tmp_path / "tee.spool"
    client = JournalingClient(get_client(url=plain.url), f"sqlite:///{missing}", drain_timeout=0.5, spool=spool)
    async with client:
        thread_id = (await client.threads.create())["thread_id"]
        frames = await stream_turn(client, thread_id, "agent", "add 3 and 4", "values")
        assert next(e for e, _ in frames) == "metadata"
        await client.writer.bridge.wait_for_runs()
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


async def test_a_regenerate_through_the_tee_shows_the_branch_the_thread_is_on(plain, tmp_path):
    from journal_bridge.projection.history import history_page
    from tests.harness.thread_truth import regenerate_from, truth

    store_url = f"sqlite:///{tmp_path / 'tee.db'}"
    async with JournalingClient(get_client(url=plain.url), store_url) as client:
        thread_id = (await client.threads.create())["thread_id"]
        for text in TURNS[:2]:
            async for _ in client.runs.stream(thread_id, "agent", input=human(text), stream_mode="values"):
                pass
        checkpoint_id = await regenerate_from(client, thread_id)
        async for _ in client.runs.stream(thread_id, "agent", input=None, stream_mode="values", checkpoint_id=checkpoint_id):
            pass
        assert await client.drain(timeout=30)
    expected, _ = await truth(get_client(url=plain.url), thread_id)
    async with open_store(store_url) as store:
        page = await history_page(store, thread_id, limit=500)
        everything = await store.list_timeline(thread_id, categories=("message",), limit=500)
    assert [i["id"] for i in page["data"] if i["type"] in ("human", "ai", "tool")] == expected
    assert len(everything) > len(expected)  # the regenerated answer stays in the journal
