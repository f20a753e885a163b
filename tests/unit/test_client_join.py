"""A created run read from its client's join: which joins are taken, what the
server is asked, what the client gets, and when the journal joins the run itself.

The end-to-end suites (on/off of both SDKs, capture) drive this on real servers;
here each decision is shown on its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from types import SimpleNamespace
from urllib.parse import parse_qsl

import orjson
import pytest
from httpx import ASGITransport, AsyncClient

from journal_bridge.capture.intercept import RunObserverMiddleware
from journal_bridge.capture.run_requests import RunPlan
from journal_bridge.delivery.bridge import Bridge
from journal_bridge.host import compat
from journal_bridge.host.compat import (
    join_mode_matches,
    join_query_modes,
    join_query_with_modes,
    joins_take_subgraph_events,
)
from journal_bridge.host.sse import Frame
from journal_bridge.mapping.capture_setting import Capture, CaptureSetting
from journal_bridge.mapping.reader import ClientJoin, RunSource
from journal_bridge.model.envelope import RUN_END
from journal_bridge.store import open_store
from tests.unit.test_intercept import RUN, THREAD
from tests.unit.test_intercept import _Server as _CreatingServer

STATE = Capture("state", ("values", "custom"), ("custom",))

# -- the server's reading of a join's modes ---------------------------------------

EVENTS = ["values", "updates", "custom", "metadata", "error", "events", "debug", "tasks", "checkpoints",
          "messages", "messages/partial", "messages/complete", "messages/metadata", "messages-tuple",
          "values|sub:1", "updates|a|b", "messages|sub:2", "custom|x"]
MODE_LISTS = [[], ["values"], ["updates", "custom"], ["messages"], ["messages-tuple"], ["events"],
              ["values", "metadata"], ["debug", "tasks", "checkpoints"]]


# Publishes every event of EVENTS to a resumable run of the in-memory runtime,
# joins the run for each of MODE_LISTS with the runtime's own `Runs.Stream.join`,
# and prints, per list, the events the join sent and those the plugin expects.
_AGAINST_THE_RUNTIME = """
import asyncio, json, sys, uuid
from langgraph_runtime_inmem import ops
from langgraph_runtime_inmem.inmem_stream import Message, get_stream_manager
from journal_bridge.host.compat import join_mode_matches

events, mode_lists = json.loads(sys.argv[1])

async def joined(modes):
    run_id, thread_id = uuid.uuid4(), uuid.uuid4()
    async with ops.connect() as conn:
        conn.store["runs"].append({"run_id": run_id, "thread_id": thread_id, "status": "success",
                                   "kwargs": {"resumable": True}, "metadata": {}})
    for event in events:
        await ops.Runs.Stream.publish(run_id, event, b"{}", thread_id=thread_id, resumable=True)
    done = Message(topic=f"run:{run_id}:control".encode(), data=b"done")
    await get_stream_manager().put(run_id, thread_id, done, resumable=True)
    queue = await ops.Runs.Stream.subscribe(run_id, thread_id)
    sent = []
    async for mode, _payload, _id in ops.Runs.Stream.join(
        run_id, stream_channel=queue, thread_id=thread_id, stream_mode=modes, last_event_id="0"
    ):
        sent.append(mode.decode())
    return sent

async def main():
    return [[await joined(modes), [e for e in events if join_mode_matches(e, modes)]] for modes in mode_lists]

print(json.dumps(asyncio.run(main())))
"""


def test_the_join_filter_is_the_installed_runtimes(tmp_path):
    env = {**os.environ, "REDIS_URI": "fake", "DATABASE_URI": ":memory:", "MIGRATIONS_PATH": "__inmem"}
    env.pop("LANGGRAPH_RUNTIME_EDITION", None)
    done = subprocess.run(
        [sys.executable, "-c", _AGAINST_THE_RUNTIME, json.dumps([EVENTS, MODE_LISTS])],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answers = orjson.loads(done.stdout.strip().splitlines()[-1])
    for modes, (runtimes, ours) in zip(MODE_LISTS, answers, strict=True):
        assert ours == runtimes, modes
    # Every event went through the runtime's join: the lists are not empty by accident.
    assert answers[0][0] == EVENTS


def test_subgraph_events_go_with_their_mode_from_the_in_memory_runtime_031_on():
    assert not joins_take_subgraph_events("inmem", "0.30.0")
    assert joins_take_subgraph_events("inmem", "0.31.0")
    assert joins_take_subgraph_events("inmem", "0.36.7")
    assert joins_take_subgraph_events("pg", "0.30.0")


@pytest.mark.parametrize(
    ("query", "modes"),
    [
        (b"", []),
        (b"stream_mode=values", ["values"]),
        (b"stream_mode=%5B%22values%22%2C%22custom%22%5D", ["values", "custom"]),
        # The SDK sends a list as repeated parameters: the server reads the last.
        (b"stream_mode=values&stream_mode=updates", ["updates"]),
        (b"cancel_on_disconnect=true&stream_mode=", []),
    ],
)
def test_a_joins_modes_are_read_as_the_server_reads_them(query, modes):
    assert join_query_modes(query) == modes


def test_a_rewritten_join_query_keeps_every_other_parameter():
    query = join_query_with_modes(b"cancel_on_disconnect=true&stream_mode=values&stream_mode=updates", ["updates", "metadata"])
    assert parse_qsl(query.decode()) == [("cancel_on_disconnect", "true"), ("stream_mode", '["updates","metadata"]')]
    assert join_query_modes(query) == ["updates", "metadata"]


# -- the reader's choice ---------------------------------------------------------

PARTS = [
    ("metadata", {"run_id": RUN, "attempt": 1}, "1"),
    ("values", {"messages": [{"type": "human", "content": "hi", "id": "h1"}]}, "2"),
    ("values", {"messages": [{"type": "human", "content": "hi", "id": "h1"},
                             {"type": "ai", "content": "hello", "id": "a1"}]}, "3"),
]


class _Joinable:
    """A run the server still has: its frames replayed from after `last_event_id` to a join."""

    def __init__(self) -> None:
        self.joins: list[str | None] = []

    def join_stream(self, thread_id, run_id, params=None, last_event_id=None):
        self.joins.append(last_event_id)

        async def replay():
            for event, data, part_id in PARTS:
                if last_event_id is None or int(part_id) > int(last_event_id):
                    yield SimpleNamespace(event=event, data=data, id=part_id)

        return replay()

    async def get(self, thread_id, run_id):
        return {"status": "success"}


async def _no_thread(thread_id):
    raise LookupError(thread_id)


def _frame(event, data, part_id):
    return Frame(b"", b"\n\n", event, orjson.dumps(data), part_id)


async def _read(tmp_path, client, *, wait=5.0):
    """Journal one created run while `client(join)` plays its client; the SDK joins and the records."""
    runs = _Joinable()
    sdk = SimpleNamespace(runs=runs, threads=SimpleNamespace(get=_no_thread), assistants=None)
    async with open_store(f"sqlite:///{tmp_path / 'journal.db'}") as store:
        bridge = Bridge(store, lambda: sdk)
        await bridge.start()
        join = ClientJoin(RUN, STATE, wait)
        bridge.observe(THREAD, RUN, RunSource(STATE, run={"assistant_id": "a", "kwargs": {}}, client_join=join))
        await client(join)
        await bridge.wait_for_runs()
        await bridge.stop()
        events = await store.list_events(THREAD, RUN)
    kinds = [e.event_type for e in events]
    assert kinds[-1] == RUN_END and kinds.count(RUN_END) == 1, kinds
    assert [e.content.get("id") for e in events if e.category == "message"] == ["a1"], events
    return runs.joins, bridge.health()["runs_read_from_client_joins"]


async def test_a_join_from_the_runs_start_is_read_instead_of_joining_again(tmp_path):
    async def client(join):
        frames = join.take(("values",))
        for part in PARTS:
            frames.feed(_frame(*part))
        frames.close(complete=True)

    assert await _read(tmp_path, client) == ([], 1)


async def test_a_join_that_came_after_the_runs_start_is_not_read(tmp_path):
    async def client(join):
        frames = join.take(("values",))
        for part in PARTS[1:]:
            frames.feed(_frame(*part))
        frames.close(complete=True)

    assert await _read(tmp_path, client) == (["0"], 0)


async def test_a_join_of_another_runs_start_is_not_read(tmp_path):
    async def client(join):
        frames = join.take(("values",))
        frames.feed(_frame("metadata", {"run_id": "someone-else", "attempt": 1}, "1"))
        frames.close(complete=True)

    assert await _read(tmp_path, client) == (["0"], 0)


async def test_without_a_join_in_time_the_journal_joins_the_run_itself(tmp_path):
    async def client(join):
        await asyncio.sleep(0.1)
        assert join.take(("values",)) is None, "too late"

    assert await _read(tmp_path, client, wait=0.02) == (["0"], 0)


async def test_a_join_that_ends_before_its_first_frame_leaves_the_run_to_the_journal(tmp_path):
    async def client(join):
        join.take(("values",)).close(complete=False)

    assert await _read(tmp_path, client) == (["0"], 0)


async def test_a_client_that_leaves_its_join_early_leaves_the_rest_to_a_join_from_its_last_frame(tmp_path):
    async def client(join):
        frames = join.take(("values",))
        for part in PARTS[:2]:
            frames.feed(_frame(*part))
        frames.close(complete=False)

    assert await _read(tmp_path, client) == (["2"], 1)


async def test_only_the_first_join_is_taken_and_a_cancel_keeps_nothing():
    join = ClientJoin(RUN, STATE, 5.0)
    frames = join.take(("values",))
    assert join.take(("values",)) is None
    frames.feed(_frame(*PARTS[0]))
    stream = await join.stream()
    join.cancel()
    frames.feed(_frame(*PARTS[1]))
    assert not stream.ready(), "a run read elsewhere keeps no frame"


# -- the middleware --------------------------------------------------------------


def _sse(event: str, data: dict, frame_id: str) -> bytes:
    return f"event: {event}\ndata: {orjson.dumps(data).decode()}\nid: {frame_id}\n\n".encode()


class _Server(_CreatingServer):
    """Creates a background run (as the intercept tests' server); a join of it streams
    the frames of the modes its query names."""

    FRAMES = [("metadata", {"run_id": RUN, "attempt": 1}), ("values", {"v": 1}), ("custom", {"c": 1}),
              ("updates", {"u": 1}), ("values|sub:1", {"v": 2}), ("values", {"v": 3})]

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[bytes] = []

    async def __call__(self, scope, receive, send) -> None:
        if scope["method"] != "GET":
            await super().__call__(scope, receive, send)
            return
        self.queries.append(scope["query_string"])
        modes = join_query_modes(scope["query_string"])
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for index, (event, data) in enumerate(self.FRAMES):
            if join_mode_matches(event, modes):
                await send({"type": "http.response.body", "body": _sse(event, data, str(index)), "more_body": True})
        await send({"type": "http.response.body", "body": b""})


class _Feed:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.complete: bool | None = None

    def feed(self, frame: Frame) -> None:
        self.events.append(frame.event)

    def close(self, *, complete: bool) -> None:
        self.complete = complete


class _Sink:
    def __init__(self) -> None:
        self.taken: list[tuple[str, ...]] = []
        self.feed = _Feed()

    def join(self, thread_id: str, run_id: str, plan: RunPlan) -> None:
        pass

    def take_client_join(self, thread_id, run_id, modes):
        self.taken.append(modes)
        return self.feed

    def read_client_stream(self, thread_id, run_id, plan):  # pragma: no cover - no streamed runs here
        raise AssertionError("no run is streamed")

    def unplanned(self, reason: str) -> None:  # pragma: no cover
        raise AssertionError(reason)


async def _create_and_join(params: dict, headers: dict | None = None, create: dict | None = None):
    server, sink = _Server(), _Sink()
    middleware = RunObserverMiddleware(server, lambda scope: sink, CaptureSetting.AUTO)
    async with AsyncClient(transport=ASGITransport(app=middleware), base_url="http://server") as http:
        await http.post(f"/threads/{THREAD}/runs", json={"assistant_id": "agent", "stream_mode": ["values"], **(create or {})})
        joined = await http.get(f"/threads/{THREAD}/runs/{RUN}/stream", params=params, headers=headers or {})
    return server, sink, joined.text


@pytest.mark.parametrize("inmem", ["0.30.0", "0.36.7"])
async def test_a_join_naming_fewer_modes_than_the_journal_reads_gets_only_its_own(monkeypatch, inmem):
    # The server's join filter is that of this runtime (with or without subgraph events).
    monkeypatch.setattr(compat, "_installed_inmem", lambda: inmem)
    monkeypatch.delenv("LANGGRAPH_RUNTIME_EDITION", raising=False)
    subgraphs = joins_take_subgraph_events()
    assert subgraphs == (inmem != "0.30.0")
    server, sink, text = await _create_and_join({"stream_mode": "values"})
    asked = join_query_modes(server.queries[0])
    assert asked[0] == "values" and set(asked) == {"values", "custom", "metadata"}
    assert sink.taken == [("values", "custom", "metadata")]
    assert sink.feed.events == ["metadata", "values", "custom", *(["values|sub:1"] if subgraphs else []), "values"]
    assert sink.feed.complete
    # Without the plugin: the `values` frames of a run the client did not make resumable.
    assert text == "".join(
        _sse(e, d, str(i)).replace(f"id: {i}\n".encode(), b"").decode()
        for i, (e, d) in enumerate(_Server.FRAMES) if e == "values" or (subgraphs and e.split("|")[0] == "values")
    )


async def test_a_join_of_every_mode_is_read_as_it_is():
    server, sink, text = await _create_and_join({})
    assert join_query_modes(server.queries[0]) == [], "the query is left alone"
    assert sink.taken == [("values", "custom")]
    assert "event: custom" not in text and "event: metadata" in text and "event: updates" in text


async def test_a_client_resuming_its_own_resumable_run_is_not_taken():
    server, sink, _ = await _create_and_join(
        {"stream_mode": "values"}, headers={"Last-Event-ID": "1"}, create={"stream_resumable": True}
    )
    assert sink.taken == [] and server.queries == [b"stream_mode=values"]


# -- which deployments wait for a client's join -------------------------------------


@pytest.mark.parametrize(("edition", "waits"), [("", True), ("pg", False)])
async def test_a_created_run_waits_for_its_clients_join_only_on_the_in_memory_runtime(monkeypatch, tmp_path, edition, waits):
    # With several processes, a run joined late could be written after the thread's
    # next run, read by another process: there the journal joins every run at once.
    from journal_bridge.server import Journal

    monkeypatch.setenv("LANGGRAPH_RUNTIME_EDITION", edition)
    observed = []
    journal = Journal(f"sqlite:///{tmp_path / 'journal.db'}", spool_dir=tmp_path)
    journal.bridge = SimpleNamespace(observe=lambda thread_id, run_id, source: observed.append(source))
    plan = RunPlan("create", False, ("values",), STATE, True)
    journal.join(THREAD, RUN, plan)
    assert (observed[0].client_join is not None) is waits
    assert (journal.take_client_join(THREAD, RUN, ("values",)) is not None) is waits
