"""history.js in a browser app: a page on another origin imports the module from a
real `langgraph dev` with the plugin, loads a compacted thread's full history and
merges it with a live conversation streamed from the same server."""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest
from langgraph_sdk import get_sync_client
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from tests.harness.browser import ARTIFACTS
from tests.harness.seed import ServedApp

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

EARLY = {"trigger": [{"type": "messages", "value": 4}], "keep": {"type": "messages", "value": 2}}
EARLIER_TURNS = ["hello", "add 2 and 3", "what is the weather in Paris?", "add 4 and 5"]
LIVE_TURN = "what is the weather in Rome?"

# The app: what a useStream page does with the journal. It streams a run the
# way useStream does (runs/stream, stream_mode values) and shows
# mergeHistory(journal items, live messages) after every update.
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>chat</title></head>
<body><ol id="chat"></ol>
<script type="module">
import { JournalClient, accumulateMessages, mergeHistory } from "__SERVER__/journal/static/history.js";
const server = "__SERVER__", threadId = "__THREAD__", assistantId = "__ASSISTANT__";
const journal = new JournalClient({ apiUrl: server });
const chat = document.getElementById("chat");
const { items, markers, lastSeq } = await journal.loadHistory(threadId);
document.body.dataset.markers = String(markers.length);
let live = [];
function show() {
  chat.replaceChildren(...mergeHistory(items, live).map((m) => {
    const li = document.createElement("li");
    li.dataset.type = m.type;
    li.dataset.id = m.id || "";
    li.dataset.source = m.seq === undefined ? "live" : "journal";
    li.textContent = m.type === "summary_marker"
      ? m.condensed_count + " messages condensed"
      : typeof m.content === "string" ? m.content : JSON.stringify(m.content);
    return li;
  }));
}
show();
const response = await fetch(server + "/threads/" + threadId + "/runs/stream", {
  method: "POST",
  headers: { "Content-Type": "application/json" },
  body: JSON.stringify({ assistant_id: assistantId, stream_mode: ["values"],
    input: { messages: [{ type: "human", content: "__LIVE__" }] } }),
});
const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
let buffer = "";
for (;;) {
  const { value, done } = await reader.read();
  if (done) break;
  buffer += value.replace(/\\r\\n?/g, "\\n");
  let cut;
  while ((cut = buffer.indexOf("\\n\\n")) >= 0) {
    const frame = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
    const event = /^event: ?(.*)$/m.exec(frame), data = /^data: ?(.*)$/m.exec(frame);
    if (event && event[1] === "values" && data) { live = accumulateMessages(live, JSON.parse(data[1]).messages || []); show(); }
  }
}
// The run is over: what the journal recorded of it (its markers too) replaces
// the live copies. The journal trails the stream by a moment: poll until it
// holds the run's last message.
const last = live[live.length - 1];
for (let i = 0; i < 100; i++) {
  const more = await journal.poll(threadId, items.length ? items[items.length - 1].seq : lastSeq);
  items.push(...more.items);
  if (items.some((item) => item.id === last.id)) break;
  await new Promise((resolve) => setTimeout(resolve, 100));
}
show();
document.body.dataset.done = "true";
</script></body></html>"""


def _wait_for_markers(url: str, thread_id: str, timeout: float = 60) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = httpx.get(f"{url}/journal/threads/{thread_id}/markers", timeout=10)
        if response.status_code == 200 and response.json()["data"]:
            return response.json()["data"]
        time.sleep(0.2)
    raise AssertionError("the journal never showed the compaction")


@pytest.fixture
def compacted_thread(dev_server):
    with get_sync_client(url=dev_server.url, api_key=None) as client:
        assistant = client.assistants.create("agent", config={"configurable": {"summarization": EARLY}})
        thread = client.threads.create()
        for text in EARLIER_TURNS:
            client.runs.wait(
                thread["thread_id"], assistant["assistant_id"],
                input={"messages": [{"role": "user", "content": text, "id": str(uuid.uuid4())}]},
            )
        state = client.threads.get_state(thread["thread_id"])["values"]["messages"]
    return assistant["assistant_id"], thread["thread_id"], state


def test_a_page_shows_the_full_history_with_markers_then_the_live_conversation(
    page, dev_server, compacted_thread
):
    assistant_id, thread_id, state = compacted_thread
    # The checkpoint alone has lost the earlier turns: the reason for the journal.
    shown_by_state = [m["content"] for m in state if m["type"] == "human"]
    assert "hello" not in shown_by_state
    markers = _wait_for_markers(dev_server.url, thread_id)
    html = (PAGE.replace("__SERVER__", dev_server.url).replace("__THREAD__", thread_id)
            .replace("__ASSISTANT__", assistant_id).replace("__LIVE__", LIVE_TURN))
    app = Starlette(routes=[Route("/", lambda request: HTMLResponse(html))])
    ARTIFACTS.mkdir(exist_ok=True)
    with ServedApp(app) as other_origin:
        page.on("pageerror", lambda exc: page.console_errors.append(str(exc)))
        page.goto(other_origin.url + "/")
        page.wait_for_selector("body[data-done]", state="attached", timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "history-module-app.png"), full_page=True)
        rows = page.locator("#chat > li").evaluate_all(
            "nodes => nodes.map(n => [n.dataset.type, n.dataset.id, n.dataset.source, n.textContent])"
        )
    humans = [text for kind, _, _, text in rows if kind == "human"]
    assert humans == [*EARLIER_TURNS, LIVE_TURN]
    # The markers journaled before the page opened, and those of the live run.
    assert [kind for kind, *_ in rows].count("summary_marker") > len(markers) >= 1
    first_marker = next(i for i, row in enumerate(rows) if row[0] == "summary_marker")
    assert rows[first_marker][3] == f"{markers[0]['condensed_count']} messages condensed"
    ids = [row[1] for row in rows if row[1]]
    assert len(ids) == len(set(ids)), "a message shown twice"
    # The summary left in the state is not shown as a message: its marker stands for it.
    assert all(m["id"] not in ids for m in state if (m.get("additional_kwargs") or {}).get("lc_source"))
    # The newest rows are the live turn: its question and the streamed answer.
    assert rows[-1][0] == "ai" and rows[-1][2] == "journal"
    assert [row[3] for row in rows].index(LIVE_TURN) > first_marker
    assert page.console_errors == []


# A regenerate as useStream sends it, then the journal brought up to date and
# the branch switched back: what a page shows after each.
BRANCH_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>branches</title></head>
<body>
<script type="module">
import { JournalClient } from "__SERVER__/journal/static/history.js";
const server = "__SERVER__", threadId = "__THREAD__";
const journal = new JournalClient({ apiUrl: server });
let history = await journal.loadHistory(threadId);
const before = history.items.map((item) => item.id);
const response = await fetch(server + "/threads/" + threadId + "/runs/stream", {
  method: "POST",
  headers: { "Content-Type": "application/json" },
  body: JSON.stringify({ assistant_id: "__ASSISTANT__", input: null, stream_mode: ["values", "messages-tuple"],
    checkpoint: { checkpoint_id: "__CHECKPOINT__", checkpoint_ns: "" } }),
});
await response.text();
let refreshed = history;
for (let i = 0; i < 100; i++) {
  refreshed = await journal.refresh(threadId, history);
  const last = refreshed.items[refreshed.items.length - 1];
  if (last && last.type === "ai" && !before.includes(last.id) && last.content) break;
  await new Promise((resolve) => setTimeout(resolve, 100));
}
const switched = await journal.loadHistory(threadId, { checkpointId: "__OLD_HEAD__" });
document.body.dataset.result = JSON.stringify({
  before, after: refreshed.items.map((item) => [item.id, item.branch ? item.branch.index + "/" + item.branch.count : ""]),
  switched: switched.items.map((item) => item.id),
});
</script></body></html>"""


def test_a_page_keeps_the_branch_right_across_a_regenerate_and_a_branch_switch(
    page, dev_server, compacted_thread
):
    assistant_id, thread_id, state = compacted_thread
    with get_sync_client(url=dev_server.url, api_key=None) as client:
        history = client.threads.get_history(thread_id, limit=200)
        head = client.threads.get_state(thread_id)["checkpoint"]["checkpoint_id"]
    answer = state[-1]
    # The checkpoint before the last answer: the parent of the first one that holds it.
    by_id = {h["checkpoint"]["checkpoint_id"]: h for h in history}
    node, holds = by_id[head], None
    while node is not None and any(m["id"] == answer["id"] for m in node["values"]["messages"]):
        holds = node
        node = by_id.get((node.get("parent_checkpoint") or {}).get("checkpoint_id"))
    checkpoint = holds["parent_checkpoint"]["checkpoint_id"]
    html = (BRANCH_PAGE.replace("__SERVER__", dev_server.url).replace("__THREAD__", thread_id)
            .replace("__ASSISTANT__", assistant_id).replace("__CHECKPOINT__", checkpoint)
            .replace("__OLD_HEAD__", head))
    app = Starlette(routes=[Route("/", lambda request: HTMLResponse(html))])
    with ServedApp(app) as other_origin:
        page.on("pageerror", lambda exc: page.console_errors.append(str(exc)))
        page.goto(other_origin.url + "/")
        page.wait_for_selector("body[data-result]", state="attached", timeout=60_000)
        result = json.loads(page.locator("body").get_attribute("data-result"))
    assert result["before"][-1] == answer["id"]
    after_ids = [item_id for item_id, _ in result["after"]]
    # The regenerated answer replaced the old one; nothing else changed.
    assert answer["id"] not in after_ids
    assert after_ids[: len(result["before"]) - 1] == result["before"][:-1]
    assert [mark for _, mark in result["after"] if mark] == ["2/2"]
    # Switched back to the old head: the old answer, as before.
    assert result["switched"] == result["before"]
    assert page.console_errors == []
