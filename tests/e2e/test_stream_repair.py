"""A run's stream the runtime drops reaches its client whole through the plugin.

The graph `stream_cut` (`tests/harness/graphs/stream_cut.py`) makes the runtime
stop handing a run's frames to its client's stream, as frames lost on their
way between processes are: the runtime's join then ends the client's stream
once it finds the run over, with nothing of the run (or nothing after the
input's state). Without the plugin the client gets exactly that; with it the
client gets the whole run, each frame once: the same frames as a run nobody
dropped, through langgraph-sdk and through a raw POST. On `langgraph dev`
(langgraph-runtime-inmem) and on one `langhost serve` process of
langgraph-runtime-pg (PostgreSQL and Redis), where the graph stops the Redis
runtime's delivery in the same way.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from langgraph_sdk import get_client

from tests.harness.conversation import human, wait_journal_idle
from tests.harness.langgraph_server import HARNESS, LanggraphDevServer, project_config
from tests.harness.langhost_server import LanghostServer, ensure_pg_runtime_venv
from tests.harness.services import create_database, postgres_server, redis_server

pytestmark = pytest.mark.e2e

GRAPH = "stream_cut"
QUESTION = "what is new"


def _config(plugin: bool) -> dict[str, Any]:
    return project_config(plugin=plugin, graphs={GRAPH: str(HARNESS / "graphs" / "stream_cut.py") + ":graph"})


@contextlib.contextmanager
def _inmem(root: Path) -> Iterator[dict[str, Any]]:
    with (
        LanggraphDevServer(config=_config(True), workdir=root / "on") as on,
        LanggraphDevServer(config=_config(False), workdir=root / "off") as off,
    ):
        yield {"on": on, "off": off}


@contextlib.contextmanager
def _pg(root: Path) -> Iterator[dict[str, Any]]:
    """One `langhost serve` process with the plugin and one without, each on a database of its own."""
    with postgres_server() as postgres_url, redis_server() as redis_url:
        servers: dict[str, Any] = {}
        try:
            for side, plugin in (("on", True), ("off", False)):
                name = uuid.uuid4().hex[:10]
                servers[side] = LanghostServer(
                    ensure_pg_runtime_venv(), root / side,
                    database_url=create_database(postgres_url, f"repair_{name}"),
                    redis_url=redis_url, store_url=create_database(postgres_url, f"repair_journal_{name}"),
                ).start(_config(plugin))
            yield servers
        finally:
            for server in servers.values():
                server.stop()


@pytest.fixture(
    scope="module",
    params=["inmem", pytest.param("pg", marks=[pytest.mark.postgres, pytest.mark.own_versions])],
)
def servers(request, tmp_path_factory) -> Iterator[dict[str, Any]]:
    with (_inmem if request.param == "inmem" else _pg)(tmp_path_factory.mktemp(f"repair-{request.param}")) as servers:
        yield servers


def _sse(body: bytes) -> list[tuple[str, Any, str | None]]:
    """(event, data, id) of each frame of a raw SSE body."""
    frames = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        fields: dict[str, str] = {}
        for line in block.split(b"\n"):
            name, _, value = line.decode().partition(":")
            if name in ("event", "data", "id"):
                fields[name] = value.removeprefix(" ")
        if "event" in fields:
            frames.append((fields["event"], orjson.loads(fields.get("data") or "null"), fields.get("id")))
    return frames


async def _stream(url: str, thread_id: str, text: str, via: str) -> tuple[list[tuple[str, Any]], bytes]:
    """What the client of a `values` stream of `text` receives: its frames, and the raw body."""
    if via == "sdk":
        client = get_client(url=url, timeout=60)
        parts = [
            (part.event, part.data)
            async for part in client.runs.stream(
                thread_id, GRAPH, input=human(text), stream_mode="values", multitask_strategy="enqueue"
            )
        ]
        return parts, b""
    body = {"assistant_id": GRAPH, "input": human(text), "stream_mode": "values", "multitask_strategy": "enqueue"}
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        response = await http.post(f"/threads/{thread_id}/runs/stream", json=body)
    assert response.status_code == 200
    return [(event, data) for event, data, _ in _sse(response.content)], response.content


async def _run(server: Any, via: str, first: str, text: str) -> tuple[str, list[tuple[str, Any]], bytes]:
    """A thread whose first run (`first`, created without a stream) is followed by a
    stream of `text`: the thread, and what that stream's client receives."""
    client = get_client(url=server.url, timeout=60)
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.create(thread_id, GRAPH, input=human(first))
    frames, raw = await _stream(server.url, thread_id, text, via)
    await client.runs.join(thread_id, (await client.runs.list(thread_id, limit=1))[0]["run_id"])
    return thread_id, frames, raw


def _shape(frames: list[tuple[str, Any]]) -> list[tuple[str, list[tuple[str, str]]]]:
    """Each frame's event and, for a state, its messages' types and contents: what a
    run's frames show whatever its ids."""
    return [
        (event, [(m["type"], m["content"]) for m in data["messages"]] if event == "values" else [])
        for event, data in frames
    ]


def _answered(frames: list[tuple[str, Any]], thread_first: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """`_shape` with the first run's text in place of `thread_first`, to compare with a reference thread."""
    return [
        (event, [(kind, content.replace(thread_first, "FIRST")) for kind, content in messages])
        for event, messages in _shape(frames)
    ]


@pytest.mark.parametrize("via", ["sdk", "raw"])
async def test_a_stream_the_runtime_drops_reaches_the_client_once(servers, via) -> None:
    # The reference: the same stream behind a run nobody dropped.
    _, reference, _ = await _run(servers["on"], via, "first", QUESTION)
    expected = _answered(reference, "first")
    assert reference[0][0] == "metadata"
    assert expected[-1][1][-1] == ("ai", f"the answer to: {QUESTION}")

    # Without the plugin the runtime's drop reaches the client: an empty stream.
    _, dropped, raw = await _run(servers["off"], via, "hold", QUESTION)
    assert dropped == []
    assert raw == b""

    # With it the client gets the whole run, each frame once.
    repaired = await _repaired(servers["on"].url)
    thread_id, healed, raw = await _run(servers["on"], via, "hold", QUESTION)
    assert await _repaired(servers["on"].url) == repaired + 1
    assert _answered(healed, "hold") == expected
    client = get_client(url=servers["on"].url, timeout=60)
    run_id = (await client.runs.list(thread_id, limit=1))[0]["run_id"]
    assert healed[0] == ("metadata", {"run_id": run_id, "attempt": 1})
    state = await client.threads.get_state(thread_id)
    assert healed[-1][1]["messages"] == state["values"]["messages"]
    if via == "raw":
        assert b"\nid:" not in raw and not raw.startswith(b"id:")  # the client did not ask for a resumable run
    await _journaled_once(servers["on"].url, thread_id, run_id)


@pytest.mark.parametrize("via", ["sdk", "raw"])
async def test_a_stream_cut_after_the_input_gets_the_rest_once(servers, via) -> None:
    _, reference, _ = await _run(servers["on"], via, "first", QUESTION)
    expected = _answered(reference, "first")

    _, cut, _ = await _run(servers["off"], via, "first", f"cut {QUESTION}")
    assert [event for event, _ in cut] == ["metadata", "values"]  # the answer never came

    thread_id, healed, _ = await _run(servers["on"], via, "first", f"cut {QUESTION}")
    assert _answered(healed, "first") == [
        (event, [(kind, content.replace(QUESTION, f"cut {QUESTION}")) for kind, content in messages])
        for event, messages in expected
    ]
    client = get_client(url=servers["on"].url, timeout=60)
    run_id = (await client.runs.list(thread_id, limit=1))[0]["run_id"]
    await _journaled_once(servers["on"].url, thread_id, run_id)


@pytest.mark.parametrize("via", ["sdk", "raw"])
async def test_a_complete_stream_is_untouched(servers, via) -> None:
    _, on, raw_on = await _run(servers["on"], via, "first", QUESTION)
    _, off, raw_off = await _run(servers["off"], via, "first", QUESTION)
    assert _shape(on) == _shape(off)
    assert [event for event, _ in on].count("metadata") == 1
    if via == "raw":
        assert len(_sse(raw_on)) == len(_sse(raw_off))


async def _repaired(url: str) -> int:
    """How many streams the runtime ended early the plugin completed (its health report)."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        return (await http.get("/journal/health")).json()["streams_repaired"]


async def _journaled_once(url: str, thread_id: str, run_id: str) -> None:
    """The run's journal holds its answer once and its end."""
    await wait_journal_idle(url)
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        response = await http.get(f"/journal/threads/{thread_id}/runs/{run_id}/events", params={"limit": 500})
    body = response.json()
    records = body["data"] if isinstance(body, dict) else body
    types = [record["event_type"] for record in records]
    assert types.count("llm.ai.response") == 1
    assert types.count("run.end") == 1
