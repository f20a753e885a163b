"""Killing the processes of a distributed deployment while runs execute, and what to check after.

Shared by `tests/e2e/test_distributed.py` and `benchmarks/distributed.py`: which
runs a `langhost serve` process is executing (from its log), what a client saw
of its streamed run (the attempts its `metadata` frames announced, the message
ids of its states), and a thread's history compared with its branch of
checkpoints (`tests.harness.thread_truth`).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx

from tests.harness.conversation import human
from tests.harness.langhost_server import LanghostServer
from tests.harness.thread_truth import conversation, shown

_RUN_ID = re.compile(r"run_id\S*?=\S*?([0-9a-f]{8}-[0-9a-f-]{27})")


def running_on(server: LanghostServer) -> set[str]:
    """Runs this process started and has not finished (from its log)."""
    started, ended = set(), set()
    for line in server.read_log().splitlines():
        match = _RUN_ID.search(line)
        if match is None:
            continue
        if "Starting background run" in line:
            started.add(match.group(1))
        elif "Background run" in line:
            ended.add(match.group(1))
    return started - ended


class ClientView:
    """What one client saw of its streamed run."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.attempts: list[int] = []
        self.message_ids: list[str] = []
        self.messages = 0  # in its last state
        self.error: BaseException | None = None  # its stream broke (its process was killed)

    def part(self, event: str, data: Any) -> None:
        if event == "metadata" and isinstance(data, dict):
            self.run_id = data.get("run_id") or self.run_id
            if isinstance(data.get("attempt"), int):
                self.attempts.append(data["attempt"])
        elif event == "values" and isinstance(data, dict):
            ids = [m["id"] for m in data.get("messages", []) if m.get("id")]
            self.messages = len(ids)
            self.message_ids += [i for i in ids if i not in self.message_ids]


async def stream_viewed(client, thread_id: str, assistant_id: str, text: str, view: ClientView) -> None:
    """Stream a turn of `text` in `values` mode into `view`; a broken stream is kept in `view.error`."""
    try:
        async for part in client.runs.stream(thread_id, assistant_id, input=human(text), stream_mode="values"):
            view.part(part.event, part.data)
    except Exception as exc:  # noqa: BLE001 - its process was killed under it: what it saw still counts
        view.error = exc


async def journal_items(url: str, path: str) -> list[dict[str, Any]]:
    """Up to 500 items of a journal listing at `path`; none where the thread or run is unknown (404)."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        response = await http.get(path, params={"limit": 500})
    if response.status_code == 404:
        return []
    response.raise_for_status()
    body = response.json()
    return body["data"] if isinstance(body, dict) else body


async def history(url: str, thread_id: str) -> list[dict[str, Any]]:
    return await journal_items(url, f"/journal/threads/{thread_id}/messages")


async def until_history_is_branch(url: str, client, thread_ids: list[str], timeout: float = 180.0) -> dict[str, tuple]:
    """Per thread `(shown history, the branch's conversation, history items)`, once each
    history shows its branch or at the deadline (for the caller's assertion to show)."""
    found: dict[str, tuple] = {}
    deadline = asyncio.get_running_loop().time() + timeout
    for thread_id in thread_ids:
        expected = await conversation(client, thread_id)
        while True:
            items = await history(url, thread_id)
            found[thread_id] = (shown(items), expected, items)
            if shown(items) == expected or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.5)
    return found


async def executed_again(client, thread_ids: list[str]) -> set[str]:
    """The runs of these threads whose checkpoints show a second attempt or later."""
    runs = set()
    for thread_id in thread_ids:
        for state in await client.threads.get_history(thread_id, limit=500):
            if (state["metadata"].get("run_attempt") or 1) > 1:
                runs.add(state["metadata"].get("run_id"))
    return runs


async def attempt_forks(url: str, thread_id: str) -> list[dict[str, Any]]:
    """The journal's `superseded_attempt` forks of the thread (their content)."""
    from journal_bridge.model.records import BRANCHES_RUN_ID

    events = await journal_items(url, f"/journal/threads/{thread_id}/runs/{BRANCHES_RUN_ID}/events")
    return [e["content"] for e in events if isinstance(e.get("content"), dict) and e["content"].get("attempt")]
