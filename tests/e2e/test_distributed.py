"""The plugin in a distributed LangGraph Server: langgraph-runtime-pg, several processes.

Every process runs the plugin and journals into one PostgreSQL journal. Runs
are queued in PostgreSQL and executed by whichever process takes them; a run
is journaled by the process its request came through, reading the run's frames
from Redis wherever it executes.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness.conversation import EARLY_SUMMARIZATION, TURNS, human, wait_journal_idle
from tests.harness.langhost_server import LanghostServer, ensure_pg_runtime_venv
from tests.harness.services import create_database, postgres_server, redis_server
from tests.harness.kills import (
    ClientView,
    attempt_forks,
    executed_again,
    history,
    running_on,
    stream_viewed,
    until_history_is_branch,
)
from tests.harness.suites import sampled

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.own_versions, pytest.mark.timeout(900)]


class Deployment:
    """One database, one Redis, one journal; server processes added on demand."""

    def __init__(self, root: Path, postgres_url: str, redis_url: str) -> None:
        self.root = root
        name = uuid.uuid4().hex[:10]
        self.database_url = create_database(postgres_url, f"runtime_{name}")
        self.store_url = create_database(postgres_url, f"journal_{name}")
        self.redis_url = redis_url
        self.bin_dir = ensure_pg_runtime_venv()
        self.servers: list[LanghostServer] = []

    def start(self, *, n_jobs: int = 2, env: dict[str, str] | None = None) -> LanghostServer:
        server = LanghostServer(
            self.bin_dir,
            self.root / f"server-{len(self.servers)}",
            database_url=self.database_url,
            redis_url=self.redis_url,
            store_url=self.store_url,
            n_jobs=n_jobs,
            # A crashed executor's runs are reclaimed within a few seconds.
            env={"LG_BG_JOB_HEARTBEAT": "1", **(env or {})},
        )
        self.servers.append(server)
        return server.start()

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    with postgres_server() as postgres_url, redis_server() as redis_url:
        deployment = Deployment(tmp_path, postgres_url, redis_url)
        try:
            yield deployment
        finally:
            deployment.stop()


async def _journal(url: str, thread_id: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        response = await http.get(f"/journal/threads/{thread_id}/messages", params={"limit": 500})
        response.raise_for_status()
        return response.json()["data"]


async def _run_events(url: str, thread_id: str, run_id: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        response = await http.get(f"/journal/threads/{thread_id}/runs/{run_id}/events", params={"limit": 500})
        response.raise_for_status()
        body = response.json()
        return body["data"] if isinstance(body, dict) else body


async def _turn(client, thread_id: str, assistant_id: str, text: str, kind: int) -> None:
    if kind == 0:
        async for _ in client.runs.stream(thread_id, assistant_id, input=human(text), stream_mode="values"):
            pass
    elif kind == 1:
        await client.runs.wait(thread_id, assistant_id, input=human(text))
    else:
        run = await client.runs.create(thread_id, assistant_id, input=human(text))
        await client.runs.join(thread_id, run["run_id"])


def _assert_conversation(journal: list[dict[str, Any]], turns: list[str]) -> None:
    ids = [item["id"] for item in journal if item.get("id")]
    assert len(ids) == len(set(ids)), Counter(ids).most_common(3)
    humans = [item["content"] for item in journal if item["type"] == "human"]
    assert humans == turns
    markers = [item for item in journal if item["type"] == "summary_marker"]
    assert markers, "the conversation compacts: its markers are journaled"
    seqs = [item["seq"] for item in journal]
    assert seqs == sorted(seqs)


async def test_runs_through_either_process_are_journaled_once_in_conversation_order(deployment):
    from langgraph_sdk import get_client

    # One process only serves the API; the other also executes the queue, so a
    # run created through the first is executed by the second.
    api_only = deployment.start(n_jobs=0)
    executor = deployment.start(n_jobs=2)
    clients = [get_client(url=api_only.url), get_client(url=executor.url)]
    assistant = await clients[0].assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
    thread = await clients[1].threads.create()
    thread_id, assistant_id = thread["thread_id"], assistant["assistant_id"]
    turns = TURNS[:9]
    for index, text in enumerate(turns):
        await _turn(clients[index % 2], thread_id, assistant_id, text, index % 3)
    for server in deployment.servers:
        await wait_journal_idle(server.url)

    runs = await clients[0].runs.list(thread_id, limit=100)
    assert len(runs) == len(turns)
    assert {run["run_id"] for run in runs} <= executor.executed_run_ids()
    for run in runs:
        events = await _run_events(api_only.url, thread_id, run["run_id"])
        kinds = Counter(event["event_type"] for event in events)
        assert kinds["run.start"] == 1 and kinds["run.end"] == 1, (run["run_id"], kinds)

    # Either process reads the same journal.
    journal = await _journal(api_only.url, thread_id)
    assert journal == await _journal(executor.url, thread_id)
    _assert_conversation(journal, turns)
    state = await clients[0].threads.get_state(thread_id)
    summary = next(m for m in state["values"]["messages"] if (m.get("additional_kwargs") or {}).get("lc_source"))
    assert [m for m in journal if m["type"] == "summary_marker"][-1]["summary_message_id"] == summary["id"]



def _started(server: LanghostServer, run_id: str) -> bool:
    return any(run_id in line for line in server.read_log().splitlines() if "Starting background run" in line)


async def test_a_server_killed_mid_run_is_repaired_by_the_other_without_duplicates(deployment):
    from langgraph_sdk import get_client

    # The first process answers slowly, so the run is in flight when it dies;
    # until the second process is up, it is the only one executing runs.
    first = deployment.start(n_jobs=2, env={"JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": "0.5"})
    client = get_client(url=first.url)
    assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
    thread = await client.threads.create()
    thread_id, assistant_id = thread["thread_id"], assistant["assistant_id"]
    turns = TURNS[:4]
    for text in turns[:-1]:
        await _turn(client, thread_id, assistant_id, text, 1)

    # The last run is created through, executed by and journaled by `first`.
    run = await client.runs.create(thread_id, assistant_id, input=human(turns[-1]))
    while not _started(first, run["run_id"]):
        await asyncio.sleep(0.1)
    second = deployment.start(n_jobs=2)
    assert (await get_client(url=second.url).runs.get(thread_id, run["run_id"]))["status"] == "running"
    while not any(item.get("content") == turns[-1] for item in await _journal(second.url, thread_id)):
        await asyncio.sleep(0.1)
    first.kill()

    # The second process reclaims the run once its heartbeat expires and
    # executes it again; its reconciler, or else the repair route, journals
    # what the killed one had not, each record once.
    survivor = get_client(url=second.url)
    await survivor.runs.join(thread_id, run["run_id"])
    assert (await survivor.runs.get(thread_id, run["run_id"]))["status"] == "success"
    assert _started(second, run["run_id"])
    await wait_journal_idle(second.url)
    async with httpx.AsyncClient(base_url=second.url, timeout=60) as http:
        repaired = await http.post(f"/journal/threads/{thread_id}/repair")
        assert repaired.status_code == 200, repaired.text
        again = await http.post(f"/journal/threads/{thread_id}/repair")
    assert again.status_code == 200 and again.json()["written"] == 0, again.text
    journal = await _journal(second.url, thread_id)
    _assert_conversation(journal, turns)
    state = await survivor.threads.get_state(thread_id)
    journaled = {item["id"] for item in journal}
    assert {m["id"] for m in state["values"]["messages"] if not (m.get("additional_kwargs") or {}).get("lc_source")} <= journaled


async def _health(url: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        return (await http.get("/journal/health")).json()


async def _until(check, what: str, timeout: float = 120.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while not (result := await check()):
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)
    return result


async def test_a_run_whose_reader_is_killed_is_taken_over_and_journaled_once(deployment):
    from langgraph_sdk import get_client

    # The run is created through a process that executes nothing, before any
    # other process exists: that process claims it and is its one reader.
    reader = deployment.start(n_jobs=0)
    client = get_client(url=reader.url)
    assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
    thread_id = (await client.threads.create())["thread_id"]
    turn = TURNS[0]
    run = await client.runs.create(thread_id, assistant["assistant_id"], input=human(turn))
    run_id = run["run_id"]
    await _until(lambda: _run_read(reader.url), "the first process to read the run")

    # The executor answers slowly, so the run is still going when its reader dies.
    executor = deployment.start(n_jobs=2, env={"JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": "0.5"})

    async def left_to_the_reader() -> bool:
        health = await _health(executor.url)
        return health["reconciler"]["runs_found"] >= 1 and health["runs_read"] == 0

    await _until(left_to_the_reader, "the executor's reconciler to find the run and leave it")
    await _until(lambda: _has_event(executor.url, thread_id, run_id, "llm.human.input"), "the run's first records")
    assert (await get_client(url=executor.url).runs.get(thread_id, run_id))["status"] == "running"
    assert (await _health(executor.url))["runs_read"] == 0, "one reader while the first process lives"
    reader.kill()

    # The executor's reconciler finds the claim free and reads the run from its first frame.
    survivor = get_client(url=executor.url)
    await survivor.runs.join(thread_id, run_id)
    assert (await survivor.runs.get(thread_id, run_id))["status"] == "success"
    await _until(lambda: _has_event(executor.url, thread_id, run_id, "run.end"), "the run's end in the journal")
    await wait_journal_idle(executor.url)
    health = await _health(executor.url)
    assert health["runs_read"] == 1 and health["reconciler"]["runs_taken_over"] == 1, health
    # The run let go was checked with the others of its thread: one journal query found no end.
    assert health["reconciler"]["released_checks"] >= 1, health

    events = await _run_events(executor.url, thread_id, run_id)
    kinds = Counter(event["event_type"] for event in events)
    assert kinds["run.start"] == 1 and kinds["run.end"] == 1 and kinds["llm.human.input"] == 1, kinds
    assert kinds["journal.fork"] == 0, "the same attempt, read on: no branch"
    journal = await _journal(executor.url, thread_id)
    ids = [item["id"] for item in journal if item.get("id")]
    assert len(ids) == len(set(ids)), Counter(ids).most_common(3)
    assert [item["content"] for item in journal if item["type"] == "human"] == [turn]
    state = await survivor.threads.get_state(thread_id)
    assert {m["id"] for m in state["values"]["messages"]} <= set(ids)


async def _run_read(url: str) -> bool:
    return (await _health(url))["runs_read"] >= 1


async def _has_event(url: str, thread_id: str, run_id: str, event_type: str) -> bool:
    try:
        events = await _run_events(url, thread_id, run_id)
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code == 404:
            return False  # nothing of the thread journaled yet
        raise
    return any(event["event_type"] == event_type for event in events)


# -- kills while runs execute ------------------------------------------------------

FAST_RECONCILE = {"JOURNAL_BRIDGE_RECONCILE_INTERVAL": "0.5"}
SLOW_MODEL = {"JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": "0.15"}


async def _wait_all_ended(client, thread_ids: list[str], timeout: float = 300.0) -> None:
    async def ended() -> bool:
        for thread_id in thread_ids:
            if any(r["status"] in ("pending", "running") for r in await client.runs.list(thread_id)):
                return False
        return True

    await _until(ended, "every run to end", timeout)


@pytest.mark.parametrize("processes", sampled([2, 3], sample=[2]))
async def test_runs_through_kills_keep_one_attempt_and_all_the_client_saw(deployment, processes):
    """One process serves the clients; the others execute runs, with the plugin in
    each. While runs execute, the process executing them is killed with SIGKILL
    (twice); the runtime executes them again. Each thread's history must then be
    its branch of checkpoints exactly -- one attempt of each run, every message
    once -- and hold every message a client saw that the thread kept."""
    from langgraph_sdk import get_client

    front = deployment.start(n_jobs=0, env=FAST_RECONCILE)
    executors = [deployment.start(n_jobs=4, env={**FAST_RECONCILE, **SLOW_MODEL}) for _ in range(processes - 1)]
    client = get_client(url=front.url)
    assistant_id = (await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION}))["assistant_id"]
    thread_ids = [(await client.threads.create())["thread_id"] for _ in range(3)]
    for thread_id in thread_ids:
        await client.runs.wait(thread_id, assistant_id, input=human(TURNS[0]))

    views: list[ClientView] = []
    kills = 0
    turns = ["add 2 and 3", "what is the weather in Paris"]
    for text in turns:
        streams = []
        for thread_id in thread_ids:
            views.append(ClientView())
            # Two threads stream through the front process; the third's request goes
            # through an executor, whose kill takes its client's connection and reader with it.
            via = client if thread_id != thread_ids[2] else get_client(url=executors[-1].url)
            streams.append(asyncio.create_task(stream_viewed(via, thread_id, assistant_id, text, views[-1])))
        round_views = views[-len(thread_ids):]

        async def answering() -> bool:
            # Two messages before the turn; its input makes three, the first answer four.
            return all(view.messages >= 4 for view in round_views)  # noqa: B023 - awaited in this round

        await _until(answering, "every run to answer in part", 120)
        victim = max(executors, key=lambda s: len(running_on(s)))
        assert running_on(victim), "the runs are executing when their process is killed"
        victim.kill()
        kills += 1
        if processes == 2:
            # The only executor: started again on its working directory (its spool, its reconciler's state).
            victim.start()
        else:
            executors.remove(victim)
            executors.append(deployment.start(n_jobs=4, env={**FAST_RECONCILE, **SLOW_MODEL}))
        await asyncio.gather(*streams)
        await _wait_all_ended(client, thread_ids)

    survivors = [front, *executors]
    for server in survivors:
        await wait_journal_idle(server.url, timeout=180)
    found = await until_history_is_branch(front.url, client, thread_ids)
    forks = []
    for thread_id, (shown_items, expected, items) in found.items():
        assert shown_items == expected, (thread_id, shown_items, expected)
        ids = [item["id"] for item in items if item.get("id")]
        assert len(ids) == len(set(ids)), Counter(ids).most_common(3)
        assert [item["content"] for item in items if item["type"] == "human"] == [TURNS[0], *turns]
        runs = {r["run_id"] for r in await client.runs.list(thread_id)}
        for view in views:
            if view.run_id in runs:
                # What a client saw and the thread kept is in the history.
                assert set(view.message_ids) & set(expected) <= set(ids), view.message_ids
        for run_id in runs:
            kinds = Counter(event["event_type"] for event in await _run_events(front.url, thread_id, run_id))
            assert kinds["run.end"] <= 1 and kinds["run.error"] == 0, (run_id, kinds)
        forks += await attempt_forks(front.url, thread_id)
        # Every process reads the same history.
        for server in survivors[1:]:
            assert await history(server.url, thread_id) == items

    # The kills hit runs in flight: the runtime executed them again, and each such run
    # the journal had records of is superseded once.
    again = await executed_again(client, thread_ids)
    attempts = Counter(max(view.attempts or [1]) for view in views)
    print(f"\n{processes} processes: {kills} kills, {len(again)} runs executed again, client streams by "
          f"last attempt seen {dict(attempts)}, {len(forks)} attempt forks journaled")
    assert again, "a killed process's runs are executed again"
    assert {fork["run_id"] for fork in forks} <= again
    assert len(forks) == len({fork["run_id"] for fork in forks}), "one fork per run executed again"


async def test_a_rollback_and_a_deletion_no_request_showed_on_postgres(deployment):
    """A run rolled back by the next one: langgraph-runtime-pg deletes the run but keeps
    its checkpoints, and the thread goes on from them -- so does the history. A thread
    deleted in the runtime's database (no request showed it) loses its journal at a
    reconciler's sweep."""
    import psycopg
    from langgraph_sdk import get_client

    from tests.harness.thread_truth import conversation, shown

    first = deployment.start(n_jobs=2, env={**FAST_RECONCILE, "JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": "0.2"})
    second = deployment.start(n_jobs=2, env={**FAST_RECONCILE, "JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": "0.2"})
    client, other = get_client(url=first.url), get_client(url=second.url)
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, "agent", input=human(TURNS[0]))
    rolled = await client.runs.create(thread_id, "agent", input=human("add 2 and 3"))
    # Rolled back once it has answered in part: its messages are journaled.
    await _until(lambda: _has_event(first.url, thread_id, rolled["run_id"], "llm.ai.response"), "the run's first answer")
    then = await other.runs.create(thread_id, "agent", input=human(TURNS[2]), multitask_strategy="rollback")
    await other.runs.join(thread_id, then["run_id"])
    for server in (first, second):
        await wait_journal_idle(server.url)
    assert rolled["run_id"] not in {r["run_id"] for r in await client.runs.list(thread_id)}, "the run is gone"
    expected = await conversation(client, thread_id)

    async def branch_shown() -> bool:
        return shown(await _journal(second.url, thread_id)) == expected

    await _until(branch_shown, "the history to be the thread's branch", 60)
    items = await _journal(first.url, thread_id)
    assert len({item["id"] for item in items}) == len(items)
    # The rolled back run ends in its cancel; its messages stay where the thread kept them.
    events = await _run_events(first.url, thread_id, rolled["run_id"])
    assert [e["event_type"] for e in events if e["category"] in ("outputs", "error")] == ["run.error"]
    checkpointed = {m["id"] for s in await client.threads.get_history(thread_id, limit=100)
                    if s["metadata"].get("run_id") == rolled["run_id"] for m in s["values"]["messages"]}
    assert checkpointed, "langgraph-runtime-pg keeps a rolled back run's checkpoints"
    try:
        forks = [e["content"] for e in await _run_events(first.url, thread_id, "journal-bridge:branches")]
    except httpx.HTTPStatusError as exc:
        assert exc.response.status_code == 404
        forks = []
    assert not any(f.get("rolled_back_run_id") for f in forks)

    # Gone from the runtime's database behind every process's back.
    kept = (await client.threads.create())["thread_id"]
    await client.runs.wait(kept, "agent", input=human(TURNS[0]))
    await wait_journal_idle(first.url)
    with psycopg.connect(deployment.database_url, autocommit=True) as conn:
        conn.execute("DELETE FROM threads WHERE thread_id = %s", (thread_id,))

    async def swept() -> bool:
        async with httpx.AsyncClient(base_url=first.url, timeout=30) as http:
            return (await http.get(f"/journal/threads/{thread_id}/messages")).status_code == 404

    await _until(swept, "a reconciler's sweep to delete the journal", 120)
    assert (await _journal(second.url, kept)), "a thread the server still has keeps its journal"
    deleted = [(await _health(server.url))["reconciler"]["threads_deleted"] for server in (first, second)]
    assert sum(deleted) >= 1, deleted
