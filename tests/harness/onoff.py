"""Client scenarios run against a server with and without the plugin, recorded as transcripts.

A transcript is everything a client can observe: status codes, the headers that
matter, every SSE frame (its field lines and its data), every JSON body, and
afterwards the thread's checkpoints (message ids and types, as a client reading
the history sees them). It is recorded as it came; `tests.harness.transcripts`
normalises and compares it, as it does the JavaScript client's.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
from langgraph_sdk import get_client

from tests.harness.conversation import EARLY_SUMMARIZATION, human

TURNS = ["hello", "add 2 and 3", "what is the weather in Paris", "add 4 and 5"]

STREAM_MODES: list[Any] = [
    "values",
    "updates",
    "messages-tuple",
    "messages",
    "custom",
    "debug",
    "tasks",
    "checkpoints",
    "events",
    ["values", "messages-tuple", "custom"],
    ["values", "updates"],
]
# The stream modes every pass runs: one of each way the plugin reads a run (the
# client's values, its messages, its events, and modes it adds to the client's).
SAMPLED_STREAM_MODES: list[Any] = ["values", "messages-tuple", "events", ["values", "messages-tuple", "custom"]]


def sse_frames(raw: bytes) -> list[Any]:
    """Each frame as its field lines (`[name, value]`, `data` left out) and its data
    as JSON; heartbeats dropped. Data is kept as a JSON value, its key order
    meaning nothing (see `tests.harness.transcripts`)."""
    frames: list[Any] = []
    for frame in re.split(r"\r\n\r\n|\n\n", raw.decode()):
        if not frame or frame.startswith(":"):
            continue
        lines = frame.splitlines()
        data = "\n".join(line[len("data: ") :] for line in lines if line.startswith("data: "))
        fields = [_field(line) for line in lines if not line.startswith("data: ")]
        try:
            value: Any = json.loads(data) if data else None
        except ValueError:
            value = data
        frames.append({"fields": fields, "data": value})
    return frames


def _field(line: str) -> list[str]:
    name, _, value = line.partition(":")
    return [name, value.removeprefix(" ")]


def _response(response: httpx.Response, *, stream: bool = False) -> dict[str, Any]:
    body = response.content
    item: dict[str, Any] = {
        "status": response.status_code,
        "content-type": response.headers.get("content-type"),
        "location": response.headers.get("location"),
        "content-location": response.headers.get("content-location"),
    }
    if stream and response.headers.get("content-type", "").startswith("text/event-stream"):
        item["frames"] = sse_frames(body)
    else:
        try:
            item["json"] = json.loads(body) if body.strip() else None
        except ValueError:
            item["text"] = body.decode("utf-8", "replace")
    return item


class Scenario:
    """One client's script against one server; `transcript` is what it observed."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sdk = get_client(url=url)
        self.http = httpx.AsyncClient(base_url=url, timeout=60)
        self.transcript: list[Any] = []

    async def __aenter__(self) -> Scenario:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    async def setup(self) -> tuple[str, str]:
        assistant = await self.sdk.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
        thread = await self.sdk.threads.create()
        return assistant["assistant_id"], thread["thread_id"]

    async def post(self, path: str, body: Any = None, *, raw: bytes | None = None, headers=None, stream=False):
        content = raw if raw is not None else json.dumps(body).encode()
        hdrs = {"content-type": "application/json", **(headers or {})}
        response = await self.http.post(path, content=content, headers=hdrs)
        item = _response(response, stream=stream)
        self.transcript.append({"request": f"POST {path}", **item})
        return response

    async def get(self, path: str, *, headers=None, stream=False, record=True):
        response = await self.http.get(path, headers=headers)
        item = _response(response, stream=stream)
        if record:
            self.transcript.append({"request": f"GET {path}", **item})
        return response

    async def checkpoints(self, thread_id: str) -> None:
        """What a client reading the thread's history sees: message ids and types per checkpoint."""
        history = await self.sdk.threads.get_history(thread_id, limit=1000)
        self.transcript.append(
            {
                "history": [
                    [[m.get("type"), m.get("id")] for m in (c.get("values") or {}).get("messages", [])]
                    for c in reversed(history)
                ]
            }
        )


def mode_name(mode: Any) -> str:
    return "+".join(mode) if isinstance(mode, list) else str(mode)


async def stream_scenario(url: str, mode: Any, *, subgraphs: bool = False) -> list[Any]:
    async with Scenario(url) as s:
        assistant_id, thread_id = await s.setup()
        for text in TURNS:
            body = {"assistant_id": assistant_id, "input": human(text), "stream_mode": mode}
            if subgraphs:
                body["stream_subgraphs"] = True
            await s.post(f"/threads/{thread_id}/runs/stream", body, stream=True)
        await s.checkpoints(thread_id)
        return s.transcript


async def wait_scenario(url: str) -> list[Any]:
    async with Scenario(url) as s:
        assistant_id, thread_id = await s.setup()
        for text in TURNS:
            await s.post(f"/threads/{thread_id}/runs/wait", {"assistant_id": assistant_id, "input": human(text)})
        await s.checkpoints(thread_id)
        return s.transcript


async def background_scenario(url: str) -> list[Any]:
    """runs.create, then the ways a client follows a run it did not stream."""
    async with Scenario(url) as s:
        assistant_id, thread_id = await s.setup()
        for index, text in enumerate(TURNS):
            created = await s.post(f"/threads/{thread_id}/runs", {"assistant_id": assistant_id, "input": human(text)})
            run_id = created.json()["run_id"]
            if index % 2:
                await s.get(f"/threads/{thread_id}/runs/{run_id}/stream", stream=True)
            else:
                await s.get(f"/threads/{thread_id}/runs/{run_id}/join")
            await s.get(f"/threads/{thread_id}/runs/{run_id}")
            # A client resuming with a Last-Event-ID on a run it did not make resumable.
            await s.get(f"/threads/{thread_id}/runs/{run_id}/stream", headers={"Last-Event-ID": "-1"}, stream=True)
        await s.get(f"/threads/{thread_id}/runs")
        sdk_runs = await s.sdk.runs.list(thread_id)
        s.transcript.append({"sdk runs.list": sdk_runs})
        await s.checkpoints(thread_id)
        return s.transcript


# (the run's `stream_mode` when created, the `stream_mode` query of its client's join)
JOINS: list[tuple[Any, str | None]] = [
    (None, None),
    (None, "values"),
    (["values", "messages-tuple"], "messages-tuple"),
    ("events", "values"),
    (["updates", "custom"], '["updates","custom"]'),
]
SAMPLED_JOINS = [JOINS[1], JOINS[3]]


def join_name(join: tuple[Any, str | None]) -> str:
    created, query = join
    return f"{mode_name(created) if created else 'default'}-join-{query or 'all'}"


async def joined_scenario(url: str, join: tuple[Any, str | None]) -> list[Any]:
    """runs.create, then the client joins the run's stream at once, naming modes or not;
    the run starts a second later, so the live join holds all of it with and without the plugin."""
    created_modes, query = join
    async with Scenario(url) as s:
        assistant_id, thread_id = await s.setup()
        for text in TURNS[:2]:
            body: dict[str, Any] = {"assistant_id": assistant_id, "input": human(text), "after_seconds": 1}
            if created_modes is not None:
                body["stream_mode"] = created_modes
            run_id = (await s.post(f"/threads/{thread_id}/runs", body)).json()["run_id"]
            params = f"?stream_mode={query}" if query else ""
            await s.get(f"/threads/{thread_id}/runs/{run_id}/stream{params}", stream=True)
        # The SDK's join with a list of modes (sent as repeated parameters).
        run = await s.sdk.runs.create(thread_id, assistant_id, input=human(TURNS[2]), after_seconds=1)
        parts = [[p.event, p.data] async for p in s.sdk.runs.join_stream(thread_id, run["run_id"], stream_mode=["updates", "values"])]
        s.transcript.append({"sdk runs.join_stream": parts})
        await s.checkpoints(thread_id)
        return s.transcript


async def stateless_scenario(url: str) -> list[Any]:
    async with Scenario(url) as s:
        await s.post("/runs/stream", {"assistant_id": "agent", "input": human("add 2 and 3")}, stream=True)
        await s.post("/runs/wait", {"assistant_id": "agent", "input": human("weather in Paris")})
        await s.post(
            "/runs/batch",
            [{"assistant_id": "agent", "input": human("hello")}, {"assistant_id": "agent", "input": human("add 1 and 1"), "stream_mode": "updates"}],
        )
        return s.transcript


BAD_BODIES: dict[str, bytes] = {
    "stream_mode bogus": b'{"assistant_id": "agent", "input": {"messages": []}, "stream_mode": "bogus"}',
    "stream_mode list with bogus": b'{"assistant_id": "agent", "stream_mode": ["values", "bogus"]}',
    "stream_mode empty string": b'{"assistant_id": "agent", "stream_mode": ""}',
    "stream_mode null": b'{"assistant_id": "agent", "stream_mode": null}',
    "stream_resumable 0": b'{"assistant_id": "agent", "stream_resumable": 0}',
    "stream_resumable null": b'{"assistant_id": "agent", "stream_resumable": null}',
    "utf-8 bom": b'\xef\xbb\xbf{"assistant_id": "agent"}',
    "utf-16": '{"assistant_id": "agent"}'.encode("utf-16"),
    "3000 deep": b'{"assistant_id": "agent", "input": ' + b"[" * 3000 + b"]" * 3000 + b"}",
    "not json": b"{nope",
    "unknown assistant": b'{"assistant_id": "nobody"}',
    # Accepted, and stored with the NUL replaced: the run object says so in its own escapes.
    "nul in content": b'{"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": "a\\u0000b"}]}}',
    "nul in metadata": b'{"assistant_id": "agent", "metadata": {"note": "\\u0000"}, "stream_mode": ["updates"]}',
}


async def bad_input_scenario(url: str) -> list[Any]:
    async with Scenario(url) as s:
        _, thread_id = await s.setup()
        for name, body in BAD_BODIES.items():
            for path in (f"/threads/{thread_id}/runs/stream", f"/threads/{thread_id}/runs", "/runs/wait"):
                await s.post(path, raw=body, stream=True)
                s.transcript[-1]["case"] = name
        return s.transcript
