"""The journal follows the thread: regenerate, edit, forks, state updates, delete, prune and copy.

Each scenario runs on a real `langgraph dev` with the plugin through the real
SDK, on a SQLite journal and on Postgres in both layouts. The truth is the
server's own: the messages first seen along the thread's current chain of
checkpoints (from `threads.get_state` back through `parent_checkpoint`), and
one marker per compaction on that chain. The journal's default history must
equal it id for id, and every abandoned run must stay readable by `run_id`.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from journal_bridge.store import open_store
from tests.harness.conversation import EARLY_SUMMARIZATION, TURNS, human, kill_mid_stream
from tests.harness.js_onoff import JS_DIR, ensure_node_modules, node_problem
from tests.harness.langgraph_server import retries_runs_left_running
from tests.harness.services import create_database, postgres_server
from tests.harness.suites import require_or_skip
from tests.harness.thread_truth import MESSAGE_TYPES, chain, conversation, is_summary, messages, shown, truth

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]



# The full matrix runs once, on the newest versions; the oldest-version pass samples it.
@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.full_matrix),
                                        pytest.param("postgres-deerflow", marks=pytest.mark.full_matrix)])
def server(request, tmp_path_factory):
    from tests.harness.langgraph_server import LanggraphDevServer

    workdir = tmp_path_factory.mktemp(f"thread-life-{request.param}")
    if request.param == "sqlite":
        env = {"JOURNAL_BRIDGE_STORE_URL": f"sqlite:///{workdir / 'journal.db'}"}
        with LanggraphDevServer(workdir=workdir, env=env) as dev:
            yield dev
        return
    with postgres_server() as server_url:
        url = create_database(server_url, f"thread_life_{request.param.replace('-', '_')}")
        if request.param == "postgres-deerflow":
            url += "?layout=deerflow"
        with LanggraphDevServer(workdir=workdir, env={"JOURNAL_BRIDGE_STORE_URL": url}) as dev:
            yield dev


def _client(server):
    return get_client(url=server.url, api_key=None)


async def _assistant(client) -> str:
    assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
    return assistant["assistant_id"]


async def _conversation(client, assistant_id: str, turns: list[str]) -> str:
    thread = await client.threads.create()
    for text in turns:
        await client.runs.wait(thread["thread_id"], assistant_id, input=human(text))
    return thread["thread_id"]


def _history(server, thread_id: str, **params) -> httpx.Response:
    return httpx.get(f"{server.url}/journal/threads/{thread_id}/messages", params={"limit": 500, **params}, timeout=30)


def _journal(server, thread_id: str, **params) -> tuple[list[str], int, list[dict[str, Any]]]:
    items = _history(server, thread_id, **params).json()["data"]
    ids = [i["id"] for i in items if i["type"] in MESSAGE_TYPES]
    markers = sum(1 for i in items if i["type"] == "summary_marker")
    return ids, markers, items


async def _settled(server, client, thread_id: str, timeout: float = 60) -> tuple[list[str], int, list[dict[str, Any]]]:
    """The journal's history once it equals the thread's branch (or the last one seen)."""
    expected = await truth(client, thread_id)
    deadline = time.monotonic() + timeout
    while True:
        ids, markers, items = _journal(server, thread_id)
        if (ids, markers) == expected or time.monotonic() > deadline:
            return ids, markers, items
        await asyncio.sleep(0.3)


async def _checkpoint_where(client, thread_id: str, predicate) -> dict[str, Any]:
    """The newest checkpoint of the current branch whose state satisfies `predicate`."""
    for state in reversed(await chain(client, thread_id)):
        if predicate(state):
            return state
    raise AssertionError("no such checkpoint")


async def _assert_branch(server, client, thread_id: str) -> list[dict[str, Any]]:
    truth_ids, truth_markers = await truth(client, thread_id)
    ids, markers, items = await _settled(server, client, thread_id)
    assert ids == truth_ids
    assert markers == truth_markers
    # Each marker at its place.
    assert shown(items) == await conversation(client, thread_id)
    return items


async def test_regenerate_shows_only_the_new_answer_and_keeps_the_old_one_readable(server):
    client = _client(server)
    assistant_id = await _assistant(client)
    thread_id = await _conversation(client, assistant_id, TURNS[:3])
    last_human = [m for m in messages(await client.threads.get_state(thread_id)) if m["type"] == "human"][-1]
    old_ids, _, old_items = await _settled(server, client, thread_id)
    # useStream's regenerate: no input, from the checkpoint that holds the question.
    before_answer = await _checkpoint_where(
        client, thread_id, lambda s: messages(s) and messages(s)[-1]["id"] == last_human["id"]
    )
    run = await client.runs.wait(
        thread_id, assistant_id, input=None, checkpoint_id=before_answer["checkpoint"]["checkpoint_id"]
    )
    items = await _assert_branch(server, client, thread_id)
    abandoned_answer = old_ids[-1]
    assert abandoned_answer not in [i["id"] for i in items]
    # The regenerated answer says where it came from and what else was answered there.
    marked = [i for i in items if "branch" in i]
    assert len(marked) == 1 and marked[0]["branch"]["count"] == 2 and marked[0]["branch"]["index"] == 2
    original = marked[0]["branch"]["alternatives"][0]
    old_branch = _history(server, thread_id, run_id=original["run_id"]).json()["data"]
    assert [i["id"] for i in old_branch if i["type"] in MESSAGE_TYPES] == old_ids
    assert run is not None


async def test_the_history_as_of_every_checkpoint_of_every_branch_is_that_branch(server):
    client = _client(server)
    assistant_id = await _assistant(client)
    thread_id = await _conversation(client, assistant_id, TURNS[:4])
    states = await chain(client, thread_id)
    question = next(s for s in reversed(states) if s["next"] and messages(s) and messages(s)[-1]["type"] == "human")
    await client.runs.wait(thread_id, assistant_id, input=None, checkpoint_id=question["checkpoint"]["checkpoint_id"])
    await client.runs.wait(thread_id, assistant_id, input=human("an edit"), checkpoint_id=states[-1]["parent_checkpoint"]["checkpoint_id"])
    await _assert_branch(server, client, thread_id)
    checkpoints = await client.threads.get_history(thread_id, limit=1000)
    assert len(checkpoints) > len(states)
    for state in checkpoints:
        checkpoint_id = state["checkpoint"]["checkpoint_id"]
        ids, markers, items = _journal(server, thread_id, checkpoint_id=checkpoint_id)
        assert (ids, markers) == await truth(client, thread_id, checkpoint_id), checkpoint_id
        assert shown(items) == await conversation(client, thread_id, checkpoint_id), checkpoint_id
    assert _history(server, thread_id, checkpoint_id="no-such-checkpoint").status_code == 404
    assert _history(server, thread_id, run_id="no-such-run").status_code == 404


async def test_edits_at_depth_one_and_five_show_the_conversation_that_happened(server):
    client = _client(server)
    assistant_id = await _assistant(client)
    thread_id = await _conversation(client, assistant_id, TURNS[:6])
    humans = [m for m in await truth(client, thread_id)][0]
    assert humans
    for depth in (1, 5):
        state = await client.threads.get_state(thread_id)
        asked = [m for m in messages(state) if m["type"] == "human"]
        target = asked[-depth] if depth <= len(asked) else asked[0]
        # The checkpoint before the edited question: the newest one that does not hold it yet.
        states = await chain(client, thread_id)
        first = next(i for i, s in enumerate(states) if any(m["id"] == target["id"] for m in messages(s)))
        parent = states[first - 1]["checkpoint"]["checkpoint_id"]
        await client.runs.wait(thread_id, assistant_id, input=human(f"edited at depth {depth}"), checkpoint_id=parent)
        items = await _assert_branch(server, client, thread_id)
        assert items[-1]["type"] == "ai"
        assert any(i["type"] == "human" and i["content"] == f"edited at depth {depth}" for i in items)


async def test_forks_before_and_after_a_compaction_and_a_fork_of_a_fork(server):
    client = _client(server)
    assistant_id = await _assistant(client)
    thread_id = await _conversation(client, assistant_id, TURNS[:6])
    _, markers_before, _ = await _settled(server, client, thread_id)
    assert markers_before >= 1
    states = await chain(client, thread_id)
    first_summary = next(i for i, s in enumerate(states) if any(is_summary(m) for m in messages(s)))
    early = states[first_summary - 1]["checkpoint"]["checkpoint_id"]
    late = states[first_summary + 2]["checkpoint"]["checkpoint_id"]
    for checkpoint_id in (early, late):
        await client.runs.wait(thread_id, assistant_id, input=human("a fork"), checkpoint_id=checkpoint_id)
        await _assert_branch(server, client, thread_id)
        await client.runs.wait(thread_id, assistant_id, input=human("and on"))
        await _assert_branch(server, client, thread_id)
    # A fork of the fork: from a checkpoint of the branch made just now.
    states = await chain(client, thread_id)
    await client.runs.wait(
        thread_id, assistant_id, input=human("a fork of a fork"), checkpoint_id=states[-3]["checkpoint"]["checkpoint_id"]
    )
    await _assert_branch(server, client, thread_id)


async def test_a_state_update_from_an_earlier_checkpoint_forks_the_history(server):
    client = _client(server)
    assistant_id = await _assistant(client)
    thread_id = await _conversation(client, assistant_id, TURNS[:3])
    await _settled(server, client, thread_id)
    states = await chain(client, thread_id)
    # Studio's "edit state": the second question, reworded in place, from the checkpoint that holds it.
    at = next(s for s in states if len([m for m in messages(s) if m["type"] == "human"]) == 2 and s["next"])
    question = [m for m in messages(at) if m["type"] == "human"][-1]
    edited = {**question, "content": "reworded question"}
    await client.threads.update_state(
        thread_id, {"messages": [edited]}, checkpoint_id=at["checkpoint"]["checkpoint_id"]
    )
    await client.runs.wait(thread_id, assistant_id, input=None)
    items = await _assert_branch(server, client, thread_id)
    shown = [i for i in items if i["id"] == question["id"]]
    assert [i["content"] for i in shown] == ["reworded question"]


async def test_delete_and_prune_remove_the_journal_and_a_refused_prune_removes_nothing(server):
    client = _client(server)
    assistant_id = await _assistant(client)
    doomed = [await _conversation(client, assistant_id, TURNS[:1]) for _ in range(3)]
    for thread_id in doomed:
        await _settled(server, client, thread_id)
    await client.threads.delete(doomed[0])
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        pruned = await http.post("/threads/prune", json={"thread_ids": [doomed[1]], "strategy": "delete"})
        assert pruned.status_code == 200, pruned.text
        # The in-memory runtime refuses `keep_latest`; what the server refuses changes nothing.
        kept = await http.post("/threads/prune", json={"thread_ids": [doomed[2]], "strategy": "keep_latest"})
        assert kept.status_code == 422, kept.text
    for thread_id in doomed[:2]:
        assert _history(server, thread_id).status_code == 404
        assert httpx.get(f"{server.url}/journal/threads/{thread_id}/markers", timeout=30).status_code == 404
    assert _history(server, doomed[2]).status_code == 200
    async with open_store(server.store_url) as store:
        for thread_id in doomed[:2]:
            assert not await store.has_thread(thread_id)
            assert await store.list_timeline(thread_id, categories=("message", "middleware", "trace", "outputs", "error")) == []
        assert await store.has_thread(doomed[2])


async def test_a_copy_has_the_source_journal_and_continues_it(server):
    client = _client(server)
    assistant_id = await _assistant(client)
    source = await _conversation(client, assistant_id, TURNS[:4])
    source_ids, source_markers, source_items = await _settled(server, client, source)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        response = await http.post(f"/threads/{source}/copy")
        assert response.status_code == 200
        copy = response.json()["thread_id"]
    copied = _history(server, copy).json()["data"]
    strip = lambda items: [{k: v for k, v in i.items() if k != "seq"} for i in items]
    assert strip(copied) == strip(source_items)
    await client.runs.wait(copy, assistant_id, input=human("and after the copy"))
    items = await _assert_branch(server, client, copy)
    assert [i["id"] for i in items if i["type"] in MESSAGE_TYPES][: len(source_ids)] == source_ids
    # The source is untouched.
    assert _journal(server, source)[:2] == (source_ids, source_markers)


async def test_a_thread_deleted_past_the_middleware_loses_its_journal_to_the_reconciler(start_dev_server):
    # Another process, a TTL sweep or an in-process caller deletes without the plugin seeing the request.
    dev = start_dev_server(env={"JOURNAL_BRIDGE_RECONCILE_INTERVAL": "0.3"})
    client = _client(dev)
    assistant_id = await _assistant(client)
    gone, kept = [await _conversation(client, assistant_id, TURNS[:1]) for _ in range(2)]
    for thread_id in (gone, kept):
        await _settled(dev, client, thread_id)
    unseen = get_client(url=dev.url, api_key=None, headers={"x-journal-bridge-reader": "1"})
    await unseen.threads.delete(gone)
    assert _history(dev, gone).status_code == 200  # the middleware did not see it
    deadline = time.monotonic() + 60
    while _history(dev, gone).status_code != 404 and time.monotonic() < deadline:
        await asyncio.sleep(0.3)
    assert _history(dev, gone).status_code == 404
    assert _history(dev, kept).status_code == 200
    health = httpx.get(f"{dev.url}/journal/health", timeout=30).json()
    assert health["reconciler"]["threads_deleted"] == 1


async def test_regenerate_and_edit_from_the_javascript_sdk_as_usestream_submits_them(server):
    problem = node_problem()
    if problem is not None:
        require_or_skip(problem)
    ensure_node_modules()
    script = JS_DIR / "branches.mjs"
    result = await asyncio.to_thread(
        subprocess.run, ["node", str(script), server.url, *TURNS[:4]],
        cwd=JS_DIR, capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    done = json.loads(result.stdout)
    thread_id = done["thread_id"]
    assert all(done["runs"]) and len(done["runs"]) == 6
    client = _client(server)
    items = await _assert_branch(server, client, thread_id)
    assert [i["content"] for i in items if i["type"] == "human"] == [TURNS[0], "the second question, edited"]
    # Every run stays readable: the regenerated answer's branch ends with it.
    regenerated = _history(server, thread_id, run_id=done["runs"][4]).json()["data"]
    assert regenerated[-1]["run_id"] == done["runs"][4] and regenerated[-1]["type"] == "ai"


async def test_a_run_executed_anew_after_a_kill_leaves_the_killed_attempt_off_the_branch(start_dev_server):
    # The model writes a token a second: the server is killed mid-answer, before
    # its state is flushed, and the runtime executes the run anew after the restart.
    env = {"JOURNAL_BRIDGE_RECONCILE_INTERVAL": "0.5", "JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": "1.0"}
    first = start_dev_server(env=env)
    client = _client(first)
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, "agent", input=human(TURNS[0]))
    frames = await kill_mid_stream(first, client, thread_id, "add 2 and 3", messages=4, then=1)
    killed = [m["id"] for m in frames[-1][1]["messages"]]

    second = start_dev_server(env=env, workdir=first.workdir)
    client = _client(second)
    if not retries_runs_left_running(second.read_log()):
        # An older runtime executes nothing anew: the run stays `running`, and the
        # journal keeps what the killed server journaled of it.
        assert [r["status"] for r in await client.runs.list(thread_id)][0] == "running"
        async with open_store(second.store_url) as store:
            records = await store.list_timeline(thread_id, limit=500)
        assert set(killed) <= {r.content.get("id") for r in records if r.category == "message"}
        return
    deadline = time.monotonic() + 120
    while any(r["status"] in ("pending", "running") for r in await client.runs.list(thread_id)):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.3)
    # Whether the runtime kept some of the killed attempt's state depends on when
    # it last flushed: either way the history is the thread's branch.
    await _assert_branch(server=second, client=client, thread_id=thread_id)
    # What the killed attempt journaled stays readable: the branch its run ends.
    async with open_store(second.store_url) as store:
        records = await store.list_timeline(thread_id, limit=500)
    run_of = {r.content.get("id"): r.run_id for r in records if r.category == "message"}
    assert set(killed) <= set(run_of)
    killed_run = run_of[killed[-1]]
    old_branch = [i["id"] for i in _history(second, thread_id, run_id=killed_run).json()["data"]]
    assert old_branch[-len(killed) + 2 :] == killed[2:]


async def test_a_run_rolled_back_by_the_next_one_leaves_the_history(start_dev_server):
    dev = start_dev_server(env={"JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": "0.3"})
    client = _client(dev)
    thread_id = await _conversation(client, "agent", TURNS[:1])
    first = await client.runs.create(thread_id, "agent", input=human("add 2 and 3"))
    deadline = time.monotonic() + 60
    # Rolled back once it has answered in part: its messages are journaled.
    while len(_journal(dev, thread_id)[0]) < 3:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
    second = await client.runs.create(
        thread_id, "agent", input=human("what is the weather in Paris"), multitask_strategy="rollback"
    )
    await client.runs.join(thread_id, second["run_id"])
    items = await _assert_branch(dev, client, thread_id)
    assert first["run_id"] not in {i["run_id"] for i in items}
    assert not any("branch" in i for i in items)
    # The rolled back run stays readable.
    rolled_back = _history(dev, thread_id, run_id=first["run_id"]).json()["data"]
    assert rolled_back[-1]["run_id"] == first["run_id"]
