"""A marker for every compaction, whatever the middleware, capture setting and client.

Four agents compact at 6 messages, keeping the last 2: the bundled agent with
`TrackingSummarizationMiddleware` (the full `summarization` event), langchain's
own `SummarizationMiddleware` (announces nothing), one that sends only deer-flow's
`{summary, replaced_count}`, and one that, like current deer-flow's, keeps the
summary in a state key of its own (`summary_text`) and announces nothing. Each
holds the same conversation under the default capture, `events` and `lean`,
streamed as `values`, streamed as useStream does (tokens and values), and
waited for with `runs.wait`. The truth is the thread's checkpoints: a compaction
is a checkpoint that lost messages its parent held.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from tests.harness.conversation import human
from tests.harness.langgraph_server import PROJECT_ROOT, LanggraphDevServer, project_config
from tests.harness.thread_truth import chain, messages

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

GRAPHS = {
    "tracking": None,
    "upstream": "tests/harness/graphs/summarizers.py:upstream",
    "state_key": "tests/harness/graphs/summarizers.py:state_key",
    "minimal": "tests/harness/graphs/minimal_summary.py:graph",
    "state_key_repeating": "tests/harness/graphs/summarizers.py:state_key_repeating",
    "named_summary": "tests/harness/graphs/summarizers.py:named_summary",
}
TRACKING = {"summarization": {"enabled": True, "trigger": [{"type": "messages", "value": 6}],
                              "keep": {"type": "messages", "value": 2}}}
CLIENTS = {
    "values": {"stream_mode": "values"},
    "use_stream": {"stream_mode": ["values", "messages-tuple", "updates", "custom"]},
    "wait": None,
}
TURNS = ["hello", "add 2 and 3", "what did I ask?", "add 4 and 5", "and the weather?", "add 6 and 7", "thanks"]


# The full matrix runs once, on the newest versions; the oldest-version pass samples it.
@pytest.fixture(scope="module", params=["auto", pytest.param("events", marks=pytest.mark.full_matrix),
                                        pytest.param("lean", marks=pytest.mark.full_matrix)])
def server(request, tmp_path_factory):
    graphs = {name: str(PROJECT_ROOT / spec) for name, spec in GRAPHS.items() if spec}
    config = project_config(graphs=graphs)
    env = {"JOURNAL_BRIDGE_CAPTURE": request.param}
    with LanggraphDevServer(config=config, env=env, workdir=tmp_path_factory.mktemp(f"markers-{request.param}")) as dev:
        yield dev


async def _converse(client, graph: str, how: str) -> str:
    if graph == "tracking":
        assistant_id = (await client.assistants.create("agent", config={"configurable": TRACKING}))["assistant_id"]
    else:
        assistant_id = graph
    thread_id = (await client.threads.create())["thread_id"]
    for text in TURNS:
        if CLIENTS[how] is None:
            await client.runs.wait(thread_id, assistant_id, input=human(text))
        else:
            async for _ in client.runs.stream(thread_id, assistant_id, input=human(text), **CLIENTS[how]):
                pass
    return thread_id


async def _compactions(client, thread_id: str) -> list[dict[str, Any]]:
    """Each compaction on the thread's branch: what it replaced, where, and the summary it left."""
    found, seen, previous = [], set(), None
    for state in await chain(client, thread_id):
        now = messages(state)
        ids = {m["id"] for m in now}
        if previous is not None:
            replaced = [m["id"] for m in messages(previous) if m["id"] not in ids]
            if replaced:
                summary = next((m for m in now if ((m.get("additional_kwargs") or {}).get("lc_source")
                                == "summarization" or m.get("name") == "summary") and m["id"] not in seen), None)
                found.append({"replaced": replaced, "before": [m["id"] for m in now if m["id"] not in seen
                              and m is not summary and m["type"] in ("human", "ai", "tool")],
                              "summary": summary, "summary_text": state["values"].get("summary_text")})
        seen |= ids
        previous = state
    return found


async def _markers(server, thread_id: str, expected: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 60
    while True:
        items = httpx.get(f"{server.url}/journal/threads/{thread_id}/messages",
                          params={"limit": 500}, timeout=30).json()["data"]
        markers = [i for i in items if i["type"] == "summary_marker"]
        done = items and items[-1]["type"] == "ai" and sum(i["type"] == "human" for i in items) == len(TURNS)
        if (done and len(markers) >= expected) or time.monotonic() > deadline:
            return items
        await asyncio.sleep(0.3)


@pytest.mark.parametrize("graph", list(GRAPHS))
async def test_every_compaction_is_one_whole_marker_at_its_place_for_every_client(server, graph):
    client = get_client(url=server.url, api_key=None)
    shapes = {}
    for how in CLIENTS:
        thread_id = await _converse(client, graph, how)
        truth = await _compactions(client, thread_id)
        assert len(truth) >= 3, f"{graph}/{how}: the conversation compacted {len(truth)} times"
        items = await _markers(server, thread_id, len(truth))
        markers = [i for i in items if i["type"] == "summary_marker"]
        assert len(markers) == len(truth), f"{graph}/{how}: {len(markers)} markers for {len(truth)} compactions"
        for marker, compaction in zip(markers, truth, strict=True):
            assert marker["replaced_message_ids"] == compaction["replaced"], f"{graph}/{how}"
            assert marker["replaced_count"] == len(compaction["replaced"])
            assert marker["summary"], f"{graph}/{how}: a marker without its summary"
            if compaction["summary_text"] is not None:
                assert marker["summary"] == compaction["summary_text"]
            # At its place: right before the first message the compacted state added.
            at = items.index(marker)
            following = [i["id"] for i in items[at + 1:] if i["type"] in ("human", "ai", "tool")]
            if compaction["before"]:
                assert following[0] == compaction["before"][0], f"{graph}/{how}"
        shapes[how] = [
            (i["type"], i["content"]) if i["type"] != "summary_marker"
            else (i["type"], i["replaced_count"], i["condensed_count"], i["summary"])
            for i in items
        ]
    # The same conversation, the same history, whichever client held it.
    assert shapes["values"] == shapes["use_stream"] == shapes["wait"]
