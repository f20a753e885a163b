"""A compaction announced with deer-flow's minimal payload, journaled by a real `langgraph dev`.

The graph (`tests/harness/graphs/minimal_summary.py`) sends only
`adispatch_custom_event("summarization", {"summary", "replaced_count"})`,
which only the `events` stream mode carries: the server captures every run
from it (`JOURNAL_BRIDGE_CAPTURE=events`). The marker must still be a whole
one: the replaced ids the node's update shows, counts, summary, its place in
the conversation, the contract.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from langgraph_sdk import get_client

from journal_bridge.mapping.compactions import summary_text
from journal_bridge.model.records import is_hidden
from tests.harness.contract import journaled_records
from tests.harness.conversation import human, is_summary, wait_journal_idle
from tests.harness.langgraph_server import HARNESS, LanggraphDevServer, project_config

pytestmark = pytest.mark.e2e

WARM_UP = ["hello", "add 2 and 3"]
COMPACTING_TURN = "what did I ask?"


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[LanggraphDevServer]:
    config = project_config(graphs={"minimal": str(HARNESS / "graphs" / "minimal_summary.py") + ":graph"})
    workdir = tmp_path_factory.mktemp("minimal-summary")
    with LanggraphDevServer(config=config, env={"JOURNAL_BRIDGE_CAPTURE": "events"}, workdir=workdir) as dev:
        yield dev


async def test_the_minimal_payload_becomes_a_whole_marker(server):
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]
    for text in WARM_UP:
        await client.runs.wait(thread_id, "minimal", input=human(text))
    before = (await client.threads.get_state(thread_id))["values"]["messages"]
    await client.runs.wait(thread_id, "minimal", input=human(COMPACTING_TURN))
    after = (await client.threads.get_state(thread_id))["values"]["messages"]
    await wait_journal_idle(server.url)

    records = await journaled_records(server.store_url, thread_id)
    markers = [r for r in records if r.event_type == "middleware:summarize"]
    assert len(markers) == 1
    summary = next(m for m in after if is_summary(m))
    kept = [m for m in after if not is_summary(m)][:-1]  # less the answer after the compaction
    replaced = len(before) + 1 - len(kept)  # the compacting turn's question was in the state too
    changes = markers[0].content["changes"]
    text = summary_text(summary)
    assert text and text != summary["content"]  # upstream's template around it is not the summary
    gone = [m["id"] for m in before if m["id"] not in {a["id"] for a in after}]
    assert (changes["summary"], changes["replaced_count"], changes["condensed_count"]) == (text, replaced, replaced)
    # The announcement had no ids: the node's update gave them.
    assert changes["replaced_message_ids"][: len(gone)] == gone
    assert len(changes["replaced_message_ids"]) == replaced
    assert changes["summary_message_id"] == summary["id"]
    assert markers[0].content["name"] and markers[0].content["hook"] == "before_model"

    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        items = (await http.get(f"/journal/threads/{thread_id}/messages", params={"limit": 100})).json()["data"]
    marker = next(item for item in items if item["type"] == "summary_marker")
    assert (marker["replaced_count"], marker["condensed_count"], marker["summary"]) == (replaced, replaced, text)
    # With its ids the viewer folds the condensed messages under it.
    assert marker["condensed_message_ids"] == changes["replaced_message_ids"]
    # After every message it replaced (the compacting question included), before the answer.
    types = [item["type"] for item in items]
    at = types.index("summary_marker")
    assert items[at - 1]["content"] == COMPACTING_TURN and types[at + 1] == "ai"
    assert [item["content"] for item in items if item["type"] == "human"] == [*WARM_UP, COMPACTING_TURN]
    conversation = [r for r in records if r.category == "message" and not is_hidden(r.metadata)]
    assert len([item for item in items if item["type"] != "summary_marker"]) == len(conversation)
