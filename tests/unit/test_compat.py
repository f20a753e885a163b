"""The plugin refuses a LangGraph Server outside the supported versions, saying what to install,
and reads a run's status from the server's runtime where it runs inside one."""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import os
import subprocess
import sys
import types
import uuid
from types import SimpleNamespace

import orjson
import pytest

from journal_bridge.host.compat import UnsupportedServer, check_server
from journal_bridge.host.in_process import InProcessClient
from journal_bridge.host.runtime_reads import RuntimeUnreadable, runtime_run_status

SUPPORTED = {"langgraph-api": "0.16.7", "langgraph-runtime-inmem": "0.36.7"}


@pytest.mark.parametrize("api", ["0.10.0", "0.13.4", "0.16.7"])
def test_every_supported_minor_release_is_accepted(api):
    check_server({**SUPPORTED, "langgraph-api": api})


@pytest.mark.parametrize("api", ["0.9.1", "0.17.0", "1.0.0"])
def test_an_unsupported_server_is_refused_with_what_to_install(api):
    with pytest.raises(UnsupportedServer, match=rf"langgraph-api {api} \(supported: >=0.10,<0.17\).*pip install"):
        check_server({**SUPPORTED, "langgraph-api": api})


def test_the_in_memory_runtime_is_checked_only_where_it_runs():
    old_inmem = {**SUPPORTED, "langgraph-runtime-inmem": "0.29.2"}
    with pytest.raises(UnsupportedServer, match="langgraph-runtime-inmem 0.29.2"):
        check_server(old_inmem, edition="inmem")
    check_server(old_inmem, edition="pg")


# -- a run's status, read from the server's runtime ------------------------------------

_USER = contextvars.ContextVar("user", default=None)


def _server_routes(runs: list[dict], seen: list) -> types.ModuleType:
    """`langgraph_api.api.runs` as the server binds it: the runtime's `Runs` and `connect`."""

    class Runs:
        @staticmethod
        async def get(conn, run_id, *, thread_id, ctx=None):
            seen.append((conn, _USER.get()))

            async def rows():
                for run in runs:
                    if (run["run_id"], run["thread_id"]) == (run_id, thread_id):
                        yield run

            return rows()

    @contextlib.asynccontextmanager
    async def connect():
        yield "connection"

    module = types.ModuleType("langgraph_api.api.runs")
    module.Runs, module.connect = Runs, connect
    return module


async def test_a_runs_status_is_read_from_the_runtime_as_the_server_itself(monkeypatch):
    seen: list = []
    run = {"run_id": "r1", "thread_id": "t1", "status": "interrupted"}
    monkeypatch.setitem(sys.modules, "langgraph_api.api.runs", _server_routes([run], seen))
    _USER.set("someone")  # a request's user: not the reader's
    assert await runtime_run_status("t1", "r1") == (True, "interrupted")
    assert await runtime_run_status("t1", "r2") == (False, None)
    assert seen == [("connection", None), ("connection", None)]
    client = InProcessClient(SimpleNamespace(assistants=None, threads=None, runs=None))
    assert await client.run_status("t1", "r1") == (True, "interrupted")


async def test_outside_a_server_the_runtime_is_unreadable(monkeypatch):
    monkeypatch.delitem(sys.modules, "langgraph_api.api.runs", raising=False)
    with pytest.raises(RuntimeUnreadable):
        await runtime_run_status("t1", "r1")
    monkeypatch.setitem(sys.modules, "langgraph_api.api.runs", types.ModuleType("langgraph_api.api.runs"))
    with pytest.raises(RuntimeUnreadable):
        await runtime_run_status("t1", "r1")


# -- listings, read from the server's runtime -------------------------------------------


class _SdkSide:
    """The SDK's `threads` or `runs`: records what reached it."""

    def __init__(self, answer):
        self.calls: list = []
        self.answer = answer

    async def search(self, **kwargs):
        self.calls.append(kwargs)
        return self.answer

    async def list(self, thread_id, **kwargs):
        self.calls.append((thread_id, kwargs))
        return self.answer


def _listing_routes(monkeypatch, threads: list[dict], runs: list[dict], seen: list) -> None:
    """The server's thread and run routes as langgraph-api binds them, over rows
    holding what a runtime holds (ids and times as objects), and its JSON encoder."""

    class Threads:
        @staticmethod
        async def search(conn, *, ids=None, metadata, values, status, limit, offset, sort_by=None,
                         sort_order=None, select=None, ctx=None):
            seen.append(("threads", conn, _USER.get(), ids, limit, offset, sort_by, sort_order))
            rows = [t for t in threads if ids is None or str(t["thread_id"]) in ids][offset:offset + limit]

            async def found():
                for row in rows:
                    yield {k: v for k, v in row.items() if k in select}

            return found(), None

    class Runs:
        @staticmethod
        async def search(conn, thread_id, *, limit=10, offset=0, status=None, select=None, ctx=None):
            seen.append(("runs", conn, _USER.get(), thread_id, limit, offset))
            return [{k: v for k, v in r.items() if k in select} for r in runs if str(r["thread_id"]) == thread_id]

    @contextlib.asynccontextmanager
    async def connect():
        yield "connection"

    def json_dumpb(obj):
        return orjson.dumps(obj, default=str)

    threads_module = types.ModuleType("langgraph_api.api.threads")
    threads_module.Threads, threads_module.connect = Threads, connect
    runs_module = types.ModuleType("langgraph_api.api.runs")
    runs_module.Runs, runs_module.connect = Runs, connect
    serde = types.ModuleType("langgraph_api.serde")
    serde.json_dumpb = json_dumpb
    monkeypatch.setitem(sys.modules, "langgraph_api.api.threads", threads_module)
    monkeypatch.setitem(sys.modules, "langgraph_api.api.runs", runs_module)
    monkeypatch.setitem(sys.modules, "langgraph_api.serde", serde)


async def test_plain_listings_are_read_from_the_runtime_as_the_sdk_returns_them(monkeypatch):
    thread_id = uuid.uuid4()
    when = datetime.datetime(2026, 12, 3, 4, 30, tzinfo=datetime.UTC)
    seen: list = []
    _listing_routes(
        monkeypatch,
        [{"thread_id": thread_id, "updated_at": when, "values": {"secret": 1}}],
        [{"run_id": uuid.UUID(int=7), "thread_id": thread_id, "status": "success", "created_at": when,
          "kwargs": {"input": 1}}],
        seen,
    )
    sdk_threads, sdk_runs = _SdkSide([]), _SdkSide([])
    client = InProcessClient(SimpleNamespace(assistants=None, threads=sdk_threads, runs=sdk_runs))
    _USER.set("someone")  # a request's user: not the reader's

    found = await client.threads.search(limit=100, offset=0, sort_by="updated_at", sort_order="desc",
                                        select=["thread_id", "updated_at"])
    assert found == [{"thread_id": str(thread_id), "updated_at": when.isoformat()}]
    listed = await client.runs.list(str(thread_id), limit=5, offset=0, select=["run_id", "status", "created_at"])
    assert listed == [{"run_id": str(uuid.UUID(int=7)), "status": "success", "created_at": when.isoformat()}]
    assert seen == [
        ("threads", "connection", None, None, 100, 0, "updated_at", "desc"),
        ("runs", "connection", None, str(thread_id), 5, 0),
    ]
    assert sdk_threads.calls == sdk_runs.calls == []
    assert client.listings == {"runtime": 2, "sdk": 0}


async def test_listings_the_runtime_cannot_answer_as_the_route_would_go_through_the_sdk(monkeypatch):
    seen: list = []
    _listing_routes(monkeypatch, [], [], seen)
    sdk_threads, sdk_runs = _SdkSide(["from the sdk"]), _SdkSide(["from the sdk"])
    client = InProcessClient(SimpleNamespace(assistants=None, threads=sdk_threads, runs=sdk_runs))
    gone = str(uuid.uuid4())
    # Fields the route may decrypt, no select, arguments it does not take: the SDK.
    assert await client.threads.search(limit=10, select=["thread_id", "values"]) == ["from the sdk"]
    assert await client.threads.search(limit=10) == ["from the sdk"]
    assert await client.threads.search(metadata={"a": 1}, select=["thread_id"]) == ["from the sdk"]
    assert await client.runs.list(gone, limit=5, select=["run_id", "kwargs"]) == ["from the sdk"]
    # No run listed: a thread that is gone answers 404 through the route, so it asks it.
    assert await client.runs.list(gone, limit=5, select=["run_id"]) == ["from the sdk"]
    assert [s[0] for s in seen] == ["runs"]
    assert len(sdk_threads.calls) == 3 and [c[0] for c in sdk_runs.calls] == [gone, gone]
    assert client.listings == {"runtime": 0, "sdk": 5}


async def test_outside_a_server_listings_go_through_the_sdk(monkeypatch):
    for name in ("langgraph_api.api.threads", "langgraph_api.api.runs"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    sdk_threads, sdk_runs = _SdkSide(["t"]), _SdkSide(["r"])
    client = InProcessClient(SimpleNamespace(assistants=None, threads=sdk_threads, runs=sdk_runs))
    assert await client.threads.search(limit=1, select=["thread_id"]) == ["t"]
    assert await client.runs.list("t1", limit=1, select=["run_id"]) == ["r"]
    assert client.listings == {"runtime": 0, "sdk": 2}


# The comparison runs in a process of its own: the runtime's package reads the
# server's configuration on import, given here as `langgraph dev` gives it.
_AGAINST_THE_RUNTIME = """
import asyncio, json, sys, types, uuid
import langgraph_runtime_inmem.database as database
import langgraph_runtime_inmem.ops as ops
from journal_bridge.host.runtime_reads import runtime_run_status

routes = types.ModuleType("langgraph_api.api.runs")
routes.Runs, routes.connect = ops.Runs, database.connect
sys.modules["langgraph_api.api.runs"] = routes
threads = [uuid.uuid4() for _ in range(3)]
statuses = ("success", "error", "interrupted", "pending")
runs = [{"run_id": uuid.uuid4(), "thread_id": threads[i % 3], "status": statuses[i % 4]} for i in range(1000)]
database.GLOBAL_STORE["runs"].extend(runs)
asked = [(r["thread_id"], r["run_id"]) for r in (runs[0], runs[1], runs[500], runs[-2], runs[-1])]
asked += [(threads[1], runs[0]["run_id"]), (threads[0], uuid.uuid4())]

async def runtimes_own(thread_id, run_id):
    async with database.connect() as conn:
        async for run in await ops.Runs.get(conn, run_id, thread_id=thread_id):
            return [True, run["status"]]
    return [False, None]

async def main():
    answers = [[list(await runtime_run_status(str(t), str(r))), await runtimes_own(t, r)] for t, r in asked]
    # The runtime's own walk from the oldest run is not what answers.
    async def walked(*args, **kwargs):
        raise AssertionError("the runtime's Runs.get was called")
    ops.Runs.get = walked
    newest = runs[-1]
    return answers, list(await runtime_run_status(str(newest["thread_id"]), str(newest["run_id"])))

print(json.dumps(asyncio.run(main())))
"""


def test_the_in_memory_runtime_answers_as_its_own_runs_get(tmp_path):
    pytest.importorskip("langgraph_runtime_inmem")
    env = {**os.environ, "REDIS_URI": "fake", "DATABASE_URI": ":memory:", "MIGRATIONS_PATH": "__inmem"}
    done = subprocess.run([sys.executable, "-c", _AGAINST_THE_RUNTIME], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    answers, without_the_walk = orjson.loads(done.stdout.strip().splitlines()[-1])
    assert without_the_walk == [True, "pending"]
    assert [ours for ours, _ in answers] == [theirs for _, theirs in answers]
    assert [ours for ours, _ in answers] == [
        [True, "success"], [True, "error"], [True, "success"], [True, "interrupted"], [True, "pending"],
        [False, None], [False, None],
    ]
