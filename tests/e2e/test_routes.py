"""The journal routes on a real `langgraph dev` with the plugin: runs in, history out."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from langgraph_sdk import get_client

from journal_bridge.cli import main as cli
from tests.harness.conversation import EARLY_SUMMARIZATION, TURNS, human

pytestmark = pytest.mark.e2e


def _history(server, thread_id: str, **params) -> httpx.Response:
    return httpx.get(
        f"{server.url}/journal/threads/{thread_id}/messages", params=params, timeout=30
    )


@pytest.fixture(scope="module")
def compacted_thread(dev_server) -> str:
    """A thread whose conversation was compacted at least once, fully journaled."""

    async def converse() -> str:
        client = get_client(url=dev_server.url, api_key=None)
        assistant = await client.assistants.create(
            "agent", config={"configurable": EARLY_SUMMARIZATION}
        )
        thread = await client.threads.create()
        for text in TURNS[:6]:
            await client.runs.wait(
                thread["thread_id"], assistant["assistant_id"], input=human(text)
            )
        return thread["thread_id"]

    thread_id = asyncio.run(converse())
    # The bridge journals in the background; wait until the last turn's answer is in.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        response = _history(dev_server, thread_id, limit=500)
        if response.status_code == 200:
            items = response.json()["data"]
            humans = [i for i in items if i["type"] == "human"]
            if (
                len(humans) == 6
                and items[-1]["type"] == "ai"
                and not items[-1].get("tool_calls")
            ):
                return thread_id
        time.sleep(0.3)
    raise AssertionError(
        f"journal incomplete: {_history(dev_server, thread_id, limit=500).text}"
    )


def test_history_keeps_every_turn_and_marks_the_compaction(
    dev_server, compacted_thread
):
    items = _history(dev_server, compacted_thread, limit=500).json()["data"]
    assert [i["content"] for i in items if i["type"] == "human"] == TURNS[:6]
    markers = [i for i in items if i["type"] == "summary_marker"]
    assert markers, items
    for marker in markers:
        at = items.index(marker)
        assert marker["replaced_count"] >= 1 and marker["summary"]
        # Compaction runs before a model call: after the input or a tool result,
        # before the answer that followed.
        assert items[at - 1]["type"] in ("human", "tool")
        assert items[at + 1]["type"] == "ai"
    # The summary message itself is state, not conversation: never a row.
    assert all(i.get("id") != markers[0]["summary_message_id"] for i in items)


def test_paging_the_live_journal_matches_one_page(dev_server, compacted_thread):
    whole = _history(dev_server, compacted_thread, limit=500).json()["data"]
    pages, params = [], {"limit": 3}
    while True:
        body = _history(dev_server, compacted_thread, **params).json()
        pages.append(body["data"])
        if not body["has_more"]:
            break
        params = {"limit": 3, "before_seq": body["next_before_seq"]}
    assert [i for page in reversed(pages) for i in page] == whole


def test_markers_and_run_events_of_the_live_journal(dev_server, compacted_thread):
    base = f"{dev_server.url}/journal/threads/{compacted_thread}"
    markers = httpx.get(f"{base}/markers", timeout=30).json()["data"]
    assert markers and all(m["type"] == "summary_marker" for m in markers)
    run_id = markers[0]["run_id"]
    events = httpx.get(
        f"{base}/runs/{run_id}/events",
        params={"event_types": "middleware:summarize"},
        timeout=30,
    ).json()["data"]
    assert [e["seq"] for e in events] == [
        m["seq"] for m in markers if m["run_id"] == run_id
    ]


def test_cli_reads_the_live_journal_over_http(dev_server, compacted_thread, capsys):
    assert (
        cli(["history", compacted_thread, "--url", dev_server.url, "--page-size", "4"])
        == 0
    )
    out = capsys.readouterr().out
    assert "messages condensed ──" in out
    assert out.index(TURNS[0]) < out.index("messages condensed")


def test_unknown_thread_on_the_server_is_404(dev_server):
    response = _history(dev_server, "00000000-0000-0000-0000-000000000000")
    assert response.status_code == 404


UNKNOWN = "00000000-0000-0000-0000-000000000000"


@pytest.mark.parametrize("name", ["before_seq", "after_seq"])
def test_a_cursor_beyond_any_seq_on_the_server_is_422_json_naming_it(dev_server, name):
    response = _history(dev_server, UNKNOWN, **{name: 2**63})
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/json"
    assert response.json()["detail"].startswith(f"{name}: must be at most")


def test_a_nul_in_the_thread_id_on_the_server_is_422_json(dev_server):
    response = httpx.get(f"{dev_server.url}/journal/threads/a%00b/messages", timeout=30)
    assert response.status_code == 422
    assert response.json() == {"detail": "thread_id: must not contain a NUL character"}
