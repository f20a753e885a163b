"""A scripted conversation with the bundled agent, and checks on what it leaves behind.

Used by the end-to-end tests: a UI-like client sends the turns, and the tests
compare the journal with what the client saw and with the thread's checkpoints.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from typing import Any

import httpx

# Compacts every few turns: 8 messages trigger a summary that keeps the last 4.
EARLY_SUMMARIZATION = {
    "summarization": {
        "enabled": True,
        "trigger": [{"type": "messages", "value": 8}],
        "keep": {"type": "messages", "value": 4},
    }
}

TURNS = [
    "hello there",
    "add 2 and 3",
    "what is the weather in Paris",
    "tell me about the journal",
    "add 40 and 2",
    "weather in Oslo please",
    "how many turns so far",
    "add 7 and 8",
    "say something short",
    "weather in Lima",
    "what did I ask first",
    "thanks, goodbye",
]


def human(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def stream_turn(client, thread_id: str, assistant_id: str, text: str, stream_mode) -> list[tuple[str, Any]]:
    frames = []
    async for part in client.runs.stream(thread_id, assistant_id, input=human(text), stream_mode=stream_mode):
        frames.append((part.event, part.data))
    return frames


async def kill_mid_stream(server, client, thread_id: str, text: str, *, messages: int, then: float) -> list[tuple[str, Any]]:
    """Stream a turn of `text` in values mode and SIGKILL the server `then` seconds after a
    state with `messages` messages came out; the frames the client saw."""
    frames: list[tuple[str, Any]] = []

    async def read() -> None:
        async for part in client.runs.stream(thread_id, "agent", input=human(text), stream_mode="values"):
            frames.append((part.event, part.data))

    reader = asyncio.create_task(read())
    while not any(e == "values" and len(d.get("messages", [])) >= messages for e, d in frames):
        await asyncio.sleep(0.05)
    await asyncio.sleep(then)
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait()
    reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)
    return frames


def message_ids_seen(frames: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Every message that appeared in a `values` frame, in order of first appearance."""
    seen: dict[str, dict[str, Any]] = {}
    for event, data in frames:
        if event != "values" or not isinstance(data, dict):
            continue
        for message in data.get("messages", []):
            if message.get("id") and message["id"] not in seen:
                seen[message["id"]] = message
    return list(seen.values())


def is_summary(message: dict[str, Any]) -> bool:
    return (message.get("additional_kwargs") or {}).get("lc_source") == "summarization"


async def wait_journal_idle(url: str, *, timeout: float = 60.0) -> dict[str, Any]:
    """Poll the plugin's health until every observed run is journaled (or left to the process reading it)."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        while True:
            health = (await http.get("/journal/health")).json()
            if (
                health["active_runs"] == 0
                and health["backlog"] == 0
                and health["runs_completed"] + health["runs_failed"] + health.get("runs_read_elsewhere", 0)
                >= health["runs_observed"]
            ):
                return health
            if time.monotonic() > deadline:
                raise AssertionError(f"journal did not catch up: {health}")
            await asyncio.sleep(0.1)


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_PORT = re.compile(r"(http://127\.0\.0\.1):\d+")


def normalize(frames: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Frames with run-specific values (uuids, the server port) replaced by stable names.

    Each distinct uuid becomes `<id-N>` in order of first appearance (objects
    read in key order, which carries no meaning in JSON), so two runs of the same
    script compare equal exactly when they have the same shape and the same
    values everywhere else.
    """
    names: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0), f"<id-{len(names)}>")

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return _PORT.sub(r"\1:<port>", _UUID.sub(rename, value))
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {walk(k): walk(v) for k, v in sorted(value.items())}
        return value

    return [(event, walk(data)) for event, data in frames]
