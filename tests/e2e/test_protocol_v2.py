"""Protocol v2 runs (`POST /threads/{id}/commands`, the thread's SSE or WebSocket
event stream) are journaled live: every message the client saw, once, in order,
with the compaction markers -- from the JS SDK over SSE and over WebSocket, and
from a plain Python WebSocket client."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time

import httpx
import pytest
import websockets
from langgraph_sdk import get_client

from tests.harness.conversation import EARLY_SUMMARIZATION, TURNS, wait_journal_idle
from tests.harness.js_onoff import JS_DIR, ensure_node_modules, node_problem
from tests.harness.suites import require_or_skip

pytestmark = pytest.mark.e2e

CHANNELS = ["values", "updates", "messages", "tools", "lifecycle", "custom", "tasks", "checkpoints"]
_TERMINAL = {"completed", "failed", "interrupted", "cancelled"}


def _root_end(event: dict) -> bool:
    params = event.get("params") or {}
    data = params.get("data") or {}
    return (
        event.get("method") == "lifecycle"
        and not params.get("namespace")
        and (data.get("event") in _TERMINAL or data.get("status") in _TERMINAL)
    )


def is_summary(message: dict) -> bool:
    """A summary message: protocol v2 events carry messages without `additional_kwargs`,
    so the upstream template tells it."""
    if (message.get("additional_kwargs") or {}).get("lc_source") == "summarization":
        return True
    content = message.get("content")
    return isinstance(content, str) and content.startswith(summary_prefix())


def summary_prefix() -> str:
    from journal_bridge.mapping.compactions import PREFIX as _PREFIX

    assert _PREFIX
    return _PREFIX


def client_seen_messages(events: list[dict]) -> list[dict]:
    """Every message of the root graph's `values` events, in order of first appearance."""
    seen: dict[str, dict] = {}
    for event in events:
        params = event.get("params") or {}
        if event.get("method") != "values" or params.get("namespace"):
            continue
        for message in (params.get("data") or {}).get("messages", []):
            if message.get("id") and message["id"] not in seen:
                seen[message["id"]] = message
    return list(seen.values())


async def assert_journal_matches(url: str, thread_id: str, events: list[dict]) -> None:
    await wait_journal_idle(url)
    seen = client_seen_messages(events)
    page = httpx.get(f"{url}/journal/threads/{thread_id}/messages", params={"limit": 500}).json()
    items = page["data"]
    messages = [i for i in items if i["type"] != "summary_marker"]
    markers = [i for i in items if i["type"] == "summary_marker"]
    assert [m["id"] for m in messages] == [m["id"] for m in seen if not is_summary(m)]
    summaries = [m["id"] for m in seen if is_summary(m)]
    assert summaries, "the conversation was meant to compact"
    assert [m["summary_message_id"] for m in markers] == summaries
    # Each marker sits before the first message the client saw after its summary.
    order = [m["id"] for m in seen]
    for marker in markers:
        after = order[order.index(marker["summary_message_id"]) + 1:]
        later = [i for i, item in enumerate(items) if item.get("id") in after]
        assert not later or items.index(marker) < later[0]


@pytest.fixture(scope="module")
def node():
    problem = node_problem()
    if problem is not None:
        require_or_skip(problem)
    ensure_node_modules()
    return shutil.which("node")


@pytest.mark.parametrize("transport", ["sse", "websocket"])
async def test_js_sdk_threads_stream_is_journaled_live(dev_server, node, transport):
    done = await asyncio.to_thread(
        subprocess.run,
        [node, "--experimental-websocket", str(JS_DIR / "v2_turns.mjs"), dev_server.url, transport, *TURNS[:6]],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    transcript = json.loads(done.stdout)
    assert transcript["errors"] == []
    assert sum(_root_end(e) for e in transcript["events"]) == 6
    await assert_journal_matches(dev_server.url, transcript["thread_id"], transcript["events"])


async def test_a_python_websocket_client_is_journaled_live(dev_server):
    client = get_client(url=dev_server.url)
    assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
    thread_id = (await client.threads.create())["thread_id"]
    events: list[dict] = []
    socket_url = dev_server.url.replace("http://", "ws://") + f"/threads/{thread_id}/stream/events"
    async with websockets.connect(socket_url) as socket:
        await socket.send(json.dumps({"id": 1, "method": "subscription.subscribe", "params": {"channels": CHANNELS}}))
        for n, text in enumerate(TURNS[:6], start=2):
            await socket.send(json.dumps({"id": n, "method": "run.start", "params": {
                "assistant_id": assistant["assistant_id"],
                "input": {"messages": [{"role": "user", "content": text}]},
            }}))
            while True:
                message = json.loads(await asyncio.wait_for(socket.recv(), timeout=120))
                events.append(message)
                if _root_end(message):
                    break
    await assert_journal_matches(dev_server.url, thread_id, events)


async def test_a_regenerate_sent_as_a_command_forks_the_history(dev_server):
    from tests.harness.thread_truth import regenerate_from, truth

    client = get_client(url=dev_server.url)
    thread_id = (await client.threads.create())["thread_id"]
    for text in TURNS[:2]:
        await client.runs.wait(thread_id, "agent", input={"messages": [{"role": "user", "content": text}]})
    checkpoint_id = await regenerate_from(client, thread_id)
    async with httpx.AsyncClient(base_url=dev_server.url, timeout=60) as http:
        answer = await http.post(f"/threads/{thread_id}/commands", json={"id": 1, "method": "run.start", "params": {
            "assistant_id": "agent", "input": None, "config": {"configurable": {"checkpoint_id": checkpoint_id}},
        }})
        assert answer.status_code == 200, answer.text
    run_id = (await client.runs.list(thread_id, limit=1))[0]["run_id"]
    await client.runs.join(thread_id, run_id)
    expected, _ = await truth(client, thread_id)
    deadline = time.monotonic() + 60
    while True:
        items = httpx.get(f"{dev_server.url}/journal/threads/{thread_id}/messages", params={"limit": 500}).json()["data"]
        ids = [i["id"] for i in items if i["type"] in ("human", "ai", "tool")]
        if ids == expected or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert ids == expected
    assert items[-1]["run_id"] == run_id
