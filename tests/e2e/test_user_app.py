"""The journal added to a FastAPI app of a user's own, on a real `langgraph dev`.

The app (`tests/harness/apps/gateway.py`) is served as `http.app` in both documented
ways: its module wraps it (`app = with_journal(...)`), or `http.app` names the
journal and `JOURNAL_BRIDGE_APP` names the app. Either way a conversation is
journaled, and the app's lifespan, routes and middleware keep working.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from langgraph_sdk import get_client

from journal_bridge.store import open_store
from tests.harness.contract import assert_contract, journaled_records
from tests.harness.conversation import EARLY_SUMMARIZATION, human, is_summary, wait_journal_idle
from tests.harness.langgraph_server import HARNESS, LanggraphDevServer, project_config
from tests.harness.marker_spec import condensed_label
from tests.harness.thread_truth import chain, messages

pytestmark = pytest.mark.e2e

APPS = HARNESS / "apps"
TURNS = ["hello there", "add 2 and 3", "what is the weather in Paris", "add 40 and 2", "thanks"]


@pytest.fixture(scope="module", params=["with_journal", "setting"])
def server(request, tmp_path_factory) -> Iterator[LanggraphDevServer]:
    if request.param == "with_journal":
        http, env = {"app": f"{APPS / 'journaled_gateway.py'}:app"}, {}
    else:
        http, env = {"app": "journal_bridge.server:app"}, {"JOURNAL_BRIDGE_APP": f"{APPS / 'gateway.py'}:app"}
    workdir = tmp_path_factory.mktemp(f"user-app-{request.param}")
    dev = LanggraphDevServer(config=project_config(http=http), env=env, workdir=workdir)
    with dev:
        yield dev
    # The app's shutdown ran, inside the journal's: the store was still open.
    assert json.loads((workdir / "gateway-shutdown.json").read_text())["store_open"] is True


async def test_a_conversation_is_journaled_through_the_users_app(server):
    client = get_client(url=server.url)
    assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
    thread_id = (await client.threads.create())["thread_id"]
    for text in TURNS:
        async for _ in client.runs.stream(thread_id, assistant["assistant_id"], input=human(text), stream_mode="values"):
            pass
    await wait_journal_idle(server.url)

    async with open_store(server.store_url) as store:
        records = await store.list_timeline(thread_id, limit=500)
    assert_contract(records)
    humans = [r.content["content"] for r in records if r.event_type == "llm.human.input"]
    assert humans == TURNS
    assert any(r.event_type == "middleware:summarize" for r in records)
    state = await client.threads.get_state(thread_id)
    journaled = {r.content["id"] for r in records if r.category == "message"}
    assert {m["id"] for m in state["values"]["messages"] if not is_summary(m)} <= journaled

    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        page = await http.get(f"/journal/threads/{thread_id}/messages", params={"limit": 100})
    assert page.status_code == 200
    assert "summary_marker" in [item["type"] for item in page.json()["data"]]
    assert page.headers["x-gateway"] == "stamped", "the app's middleware wraps the journal's routes too"


async def test_the_users_lifespan_routes_and_middleware_still_work(server):
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        status = await http.get("/api/gateway/status")
        own = await http.get("/journal/ui")
        health = await http.get("/journal/health")
        threads = await http.post("/threads", json={})
        spec = (await http.get("/openapi.json")).json()
    # The journal's lifespan encloses the app's: the store was open when the app started.
    assert status.json() == {"ready": "ready", "store_open_at_startup": True}
    # A route of the app under the journal's prefix is the app's.
    assert own.json() == {"owner": "gateway"}
    assert health.status_code == 200 and health.json()["enabled"] is True
    for response in (status, own, health, threads):
        assert response.headers["x-gateway"] == "stamped"
    assert threads.status_code == 200, "the server's own routes are reachable"
    # FastAPI describes its own routes only; the journal's are added to its document.
    assert {"/api/gateway/status", "/journal/threads/{thread_id}/messages"} <= set(spec["paths"])


async def test_a_run_streamed_through_the_users_middleware_reaches_its_client_unchanged(server):
    client = get_client(url=server.url)
    thread_id = (await client.threads.create())["thread_id"]
    body = {"assistant_id": "agent", "input": human("add 1 and 2"), "stream_mode": ["values"]}
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        async with http.stream("POST", f"/threads/{thread_id}/runs/stream", json=body) as response:
            assert response.headers["x-gateway"] == "stamped"
            raw = b"".join([chunk async for chunk in response.aiter_raw()]).decode()
    events = {line[len("event: "):] for line in raw.splitlines() if line.startswith("event: ")}
    # The modes the journal added stay the journal's: the client gets what it asked for.
    assert events == {"metadata", "values"}
    await wait_journal_idle(server.url)
    async with open_store(server.store_url) as store:
        records = await store.list_timeline(thread_id, limit=100)
    assert [r.content["type"] for r in records if r.category == "message"] == ["human", "ai", "tool", "ai"]


@pytest.fixture(scope="module")
def deerflow_server(tmp_path_factory) -> Iterator[LanggraphDevServer]:
    workdir = tmp_path_factory.mktemp("user-app-deerflow")
    database = workdir / "deerflow.db"
    env = {"JOURNAL_BRIDGE_STORE_URL": f"sqlite:///{database}?layout=deerflow", "GATEWAY_DATABASE": str(database)}
    config = project_config(http={"app": f"{APPS / 'journaled_gateway.py'}:app"})
    with LanggraphDevServer(config=config, env=env, workdir=workdir) as dev:
        yield dev


def _compactions(states: list[dict]) -> list[tuple[int, str]]:
    """The server's word on each compaction of a branch (its checkpoints, oldest
    first): how many messages it took out of the state, and its summary message."""
    found = []
    for before, after in zip(states, states[1:]):
        earlier = {m["id"] for m in messages(before)}
        new = [m for m in messages(after) if is_summary(m) and m["id"] not in earlier]
        if new:
            present = {m["id"] for m in messages(after)}
            found.append((len(earlier - present), new[0]["content"]))
    return found


async def test_the_gateway_reading_as_deerflows_design_shows_every_compaction(deerflow_server):
    server = deerflow_server
    client = get_client(url=server.url)
    assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
    thread_id = (await client.threads.create())["thread_id"]
    turns = [*TURNS, "add 7 and 8", "what is the weather in Oslo", "add 1 and 1", "bye"]
    for text in turns:
        async for _ in client.runs.stream(thread_id, assistant["assistant_id"], input=human(text), stream_mode="values"):
            pass
    await wait_journal_idle(server.url)
    compactions = _compactions(await chain(client, thread_id))
    assert len(compactions) >= 2

    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        designed = (await http.get(f"/api/threads/{thread_id}/history")).json()["messages"]
        ours = (await http.get(f"/journal/threads/{thread_id}/markers", params={"limit": 100})).json()["data"]
    markers = [item for item in designed if item["type"] == "summary_marker"]
    assert [condensed_label(m) for m in markers] == [f"{n} messages condensed" for n, _ in compactions]
    for marker, (_, summary_message) in zip(markers, compactions, strict=True):
        assert marker["summary"] and marker["summary"] in summary_message
    # The design's history is the journal's: the same markers at the same places.
    assert [(m["id"], m["replaced_count"], m["summary"]) for m in markers] == [
        (m["id"], m["replaced_count"], m["summary"]) for m in ours
    ]
    assert [m["content"] for m in designed if m["type"] == "human"] == turns
    # And the rows keep deer-flow's current contract.
    records = await journaled_records(server.store_url, thread_id)
    assert len([r for r in records if r.event_type == "middleware:summarize"]) == len(compactions)
