"""The plugin refuses a LangGraph Server outside the supported versions, saying what to install,
and reads a run's status from the server's runtime where it runs inside one."""

from __future__ import annotations

import contextlib
import contextvars
import sys
import types
from types import SimpleNamespace

import pytest

from journal_bridge.host.compat import (
    InProcessClient,
    RuntimeUnreadable,
    UnsupportedServer,
    check_server,
    runtime_run_status,
)

SUPPORTED = {"langgraph-api": "0.16.7", "langgraph-runtime-inmem": "0.36.7"}


@pytest.mark.parametrize("api", ["0.11.0", "0.13.4", "0.16.7"])
def test_every_supported_minor_release_is_accepted(api):
    check_server({**SUPPORTED, "langgraph-api": api})


@pytest.mark.parametrize("api", ["0.10.3", "0.17.0", "1.0.0"])
def test_an_unsupported_server_is_refused_with_what_to_install(api):
    with pytest.raises(UnsupportedServer, match=rf"langgraph-api {api} \(supported: >=0.11,<0.17\).*pip install"):
        check_server({**SUPPORTED, "langgraph-api": api})


def test_the_in_memory_runtime_is_checked_only_where_it_runs():
    old_inmem = {**SUPPORTED, "langgraph-runtime-inmem": "0.30.3"}
    with pytest.raises(UnsupportedServer, match="langgraph-runtime-inmem 0.30.3"):
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
