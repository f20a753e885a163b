"""The kinds of client the benchmarks drive, and the SDK client they drive them with.

Each kind is one turn of a conversation as a kind of client sends it: a values
stream, useStream's modes (with or without `events`, resumable or not),
`runs.wait`, and a background run joined by its client.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from langgraph_sdk.client import LangGraphClient

from tests.harness.conversation import human

USE_STREAM = ["values", "messages-tuple", "custom"]

Run = Callable[[Any, str, str, str], Awaitable[None]]


async def _stream(client, thread_id: str, assistant_id: str, text: str, modes, resumable: bool = False) -> None:
    async for _ in client.runs.stream(thread_id, assistant_id, input=human(text), stream_mode=modes,
                                      stream_resumable=resumable):
        pass


async def values_stream(client, thread_id, assistant_id, text) -> None:
    await _stream(client, thread_id, assistant_id, text, "values")


async def use_stream(client, thread_id, assistant_id, text) -> None:
    await _stream(client, thread_id, assistant_id, text, USE_STREAM)


async def use_stream_events(client, thread_id, assistant_id, text) -> None:
    await _stream(client, thread_id, assistant_id, text, [*USE_STREAM, "events"])


async def use_stream_resumable(client, thread_id, assistant_id, text) -> None:
    """useStream with `reconnectOnMount`: its runs are resumable, the server keeps their frames."""
    await _stream(client, thread_id, assistant_id, text, USE_STREAM, resumable=True)


async def use_stream_resumable_events(client, thread_id, assistant_id, text) -> None:
    await _stream(client, thread_id, assistant_id, text, [*USE_STREAM, "events"], resumable=True)


async def wait(client, thread_id, assistant_id, text) -> None:
    await client.runs.wait(thread_id, assistant_id, input=human(text))


async def create_join(client, thread_id, assistant_id, text) -> None:
    run = await client.runs.create(thread_id, assistant_id, input=human(text))
    async for _ in client.runs.join_stream(thread_id, run["run_id"], stream_mode="values"):
        pass


CLIENTS: dict[str, Run] = {
    "values stream": values_stream,
    "useStream": use_stream,
    "runs.wait": wait,
    "create+join": create_join,
}


async def control_request(url: str) -> None:
    """What a round's end costs a server without the plugin: one request on a
    new connection, as the journaled cells' wait for their journal makes at
    least one (about 1.6 ms of the server's CPU, a tenth of a millisecond
    per run in a round of 16), so that it is on both sides of a ratio to `off`."""
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        (await http.get("/ok")).raise_for_status()


def sdk_client(url: str, headers: dict[str, str] | None = None) -> LangGraphClient:
    """langgraph-sdk's client as `get_client` makes it, except that an idle
    connection is dropped after a second: the server (uvicorn) closes one idle
    for 5 s, and a cell whose client sat out other cells' turns for about that
    long would send its next run on a connection being closed (a `ReadError`)."""
    return LangGraphClient(
        httpx.AsyncClient(
            base_url=url,
            headers=headers,
            transport=httpx.AsyncHTTPTransport(retries=5, limits=httpx.Limits(keepalive_expiry=1.0)),
            timeout=httpx.Timeout(connect=5, read=300, write=300, pool=5),
        )
    )
