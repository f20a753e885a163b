"""history.js's `refresh` after a turn sent from the head checkpoint, as useStream sends
some turns: the journal records a fork (`branch` 1/1), and the history only grows, so
`refresh` appends what came instead of reading the whole branch again."""

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

from tests.harness.seed import ServedApp

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>refresh</title></head>
<body><script type="module">
import { JournalClient } from "__SERVER__/journal/static/history.js";
window.journal = new JournalClient({ apiUrl: "__SERVER__" });
document.body.dataset.ready = "true";
</script></body></html>"""


def _turn(client, thread_id: str, text: str, **kwargs) -> None:
    client.runs.wait(thread_id, "agent", input={"messages": [{"role": "user", "content": text, "id": str(uuid.uuid4())}]}, **kwargs)


def _journal(url: str, thread_id: str) -> list[dict]:
    return httpx.get(f"{url}/journal/threads/{thread_id}/messages", params={"limit": 500}, timeout=30).json()["data"]


def _wait_for(url: str, thread_id: str, last_id: str) -> list[dict]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        items = _journal(url, thread_id)
        if items and items[-1].get("id") == last_id:
            return items
        time.sleep(0.1)
    raise AssertionError("the journal never held the run's last message")


def test_refresh_appends_a_turn_sent_from_the_head(page, dev_server):
    with get_sync_client(url=dev_server.url, api_key=None) as client:
        thread_id = client.threads.create()["thread_id"]
        _turn(client, thread_id, "hello")
        state = client.threads.get_state(thread_id)
        _wait_for(dev_server.url, thread_id, state["values"]["messages"][-1]["id"])
        html = PAGE.replace("__SERVER__", dev_server.url)
        app = Starlette(routes=[Route("/", lambda request: HTMLResponse(html))])
        with ServedApp(app) as other_origin:
            page.on("pageerror", lambda exc: page.console_errors.append(str(exc)))
            page.goto(other_origin.url + "/")
            page.wait_for_selector("body[data-ready]", state="attached")
            page.evaluate(f"async () => {{ window.before = await journal.loadHistory({json.dumps(thread_id)}); }}")
            # The next turn goes on from the head checkpoint, named.
            _turn(client, thread_id, "add 2 and 3", checkpoint_id=state["checkpoint"]["checkpoint_id"])
            after = client.threads.get_state(thread_id)["values"]["messages"]
            journal = _wait_for(dev_server.url, thread_id, after[-1]["id"])
            requests: list[str] = []
            page.on("request", lambda request: requests.append(request.url) if "/journal/" in request.url else None)
            refreshed = page.evaluate(
                f"async () => (await journal.refresh({json.dumps(thread_id)}, window.before)).items.map((item) => item.id)"
            )
            before = page.evaluate("window.before.items.map((item) => item.id)")
    forks = [item["branch"] for item in journal if item.get("branch")]
    assert [(fork["index"], fork["count"]) for fork in forks] == [(1, 1)], "the turn was not journaled as a fork"
    assert refreshed == [item["id"] for item in journal]
    assert refreshed[: len(before)] == before and len(refreshed) > len(before)
    # One poll after what was held; the branch was not read again from its start.
    assert len(requests) == 1 and "after_seq=0" not in requests[0], requests
    assert page.console_errors == []
