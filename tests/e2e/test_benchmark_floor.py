"""The bridge benchmark's `floor` server reads every run once, whatever its client does.

The floor is what the journal's cost is measured against: a floor that skipped
some runs would make the plugin look dearer than it is.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from langgraph_sdk import get_client

from journal_bridge.settings import Settings
from tests.harness.bench.cells import CPU, Cell
from tests.harness.bench.clients import CLIENTS, create_join, use_stream, values_stream, wait
from tests.harness.bench.floor_app import FLOOR_HEADER
from tests.harness.bench.full_collections import FullCollections
from tests.harness.bench.report import print_tasks, print_threads
from tests.harness.bench.server_threads import LOOP, SQLITE, ThreadNames
from tests.harness.bench.servers import start_paired, start_server
from tests.harness.bench.task_clock import TaskClock, grouped
from tests.harness.conversation import wait_journal_idle
from tests.harness.langgraph_server import foreign_tracebacks

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("floor", ["floor", "floor-twin"])
async def test_the_floor_joins_streamed_waited_and_created_runs_once_each(floor):
    # The twin is a second floor, there to show what two identical servers differ by.
    server = start_server(floor, 0.0)
    try:
        client = get_client(url=server.url)
        thread = (await client.threads.create())["thread_id"]
        await values_stream(client, thread, "agent", "hello there")
        await use_stream(client, thread, "agent", "add 2 and 3")
        await wait(client, thread, "agent", "what is the weather in Paris")
        await create_join(client, thread, "agent", "thanks")
        health = await wait_journal_idle(server.url, timeout=60)
        assert health["runs_observed"] == 4
        assert health["runs_completed"] == 4
        assert health["runs_failed"] == 0
        assert health["parts_seen"] >= 4 * 3  # each joined run: metadata, values and its end at least
        assert health["retained_frames"] == 0
    finally:
        server.stop()
    assert foreign_tracebacks(server.read_log()) == 0


async def test_the_task_clock_and_the_thread_split_put_the_journal_s_work_where_it_runs(capsys):
    clocks = {name: TaskClock() for name in ("floor", "auto")}
    names = {name: ThreadNames() for name in clocks}
    servers = {
        name: start_server(name, 0.0, clock=clock, thread_names=names[name]) for name, clock in clocks.items()
    }
    try:
        cells = {
            ("runs.wait", name): Cell(
                server, CLIENTS["runs.wait"], True, clock=clocks[name], thread_names=names[name]
            )
            for name, server in servers.items()
        }
        for cell in cells.values():
            await cell.setup(2)
            await cell.round(4)
        journal = grouped(cells["runs.wait", "auto"].tasks)
        floor = grouped(cells["runs.wait", "floor"].tasks)
        assert journal["journal"] > 0 and journal["floor"] == 0
        assert floor["floor"] > 0 and floor["journal"] == 0
        assert cells["runs.wait", "auto"].tasks["journal_bridge/delivery/bridge.py:Bridge._follow_after"] > 0
        assert cells["runs.wait", "floor"].tasks["tests/harness/bench/floor_app.py:FloorSink._join"] > 0
        for cell in cells.values():
            # The server's own tasks (its worker running the graph) are clocked as well.
            assert any(kind.startswith("langgraph_api/") for kind in cell.tasks)
            assert sum(cell.tasks.values()) <= cell.loop_cpu  # within the loop thread's CPU
            # The split by thread holds the loop thread's CPU and adds up to the server's.
            assert cell.by_thread[LOOP] == pytest.approx(cell.loop_cpu, abs=0.005)
            assert sum(cell.by_thread.values()) == pytest.approx(cell.cpu)
        # The journal's store writes on its SQLite connection's thread; the floor stores nothing.
        assert cells["runs.wait", "auto"].by_thread[SQLITE] > 0
        assert cells["runs.wait", "floor"].by_thread[SQLITE] == 0
        print_tasks(cells, ["runs.wait"], ("floor", "auto"))
        print_threads(cells, ["runs.wait"], ("floor", "auto"))
        printed = capsys.readouterr().out
        assert "above the floor's, by kind of task:" in printed
        assert "journal_bridge/delivery/bridge.py:Bridge._follow_after" in printed
        assert SQLITE in printed and "above floor" in printed
    finally:
        for server in servers.values():
            server.stop()
        for probe in [*clocks.values(), *names.values()]:
            probe.remove()
    for server in servers.values():
        assert foreign_tracebacks(server.read_log()) == 0


async def test_a_paired_server_journals_its_plain_requests_and_floor_joins_those_with_the_header():
    collections = FullCollections()
    server = start_paired("auto", collections)
    try:
        journaled = Cell(server, CLIENTS["runs.wait"], True, collections)
        floored = Cell(server, CLIENTS["runs.wait"], True, collections, headers={FLOOR_HEADER: "1"})
        for cell in (journaled, floored):
            await cell.setup(1)
            await cell.round(2)
        health = await wait_journal_idle(server.url, timeout=60)
        # Both readers were handed their two runs, and the health counts both.
        assert health["floor"]["runs_observed"] == 2 and health["floor"]["runs_completed"] == 2
        assert health["runs_observed"] == 4 and health["runs_completed"] == 4
        async with httpx.AsyncClient(base_url=server.url) as http:
            mine = (await http.get(f"/journal/threads/{journaled.threads[0]}/messages")).json()
            assert [m["type"] for m in mine["data"]][:2] == ["human", "ai"]
            # The floor's runs are not journaled, and no reconciler reads them afterwards
            # (one would have passed by now at the plugin's default interval).
            await asyncio.sleep(Settings().reconcile_interval + 1.0)
            answer = await http.get(f"/journal/threads/{floored.threads[0]}/messages")
            assert answer.status_code == 404 or answer.json()["data"] == []
        # Each cell's rounds were measured on the one process.
        assert len(journaled.rounds) == len(floored.rounds) == 1
        assert journaled.rounds[0][CPU] > 0 and floored.rounds[0][CPU] > 0
        for cell in (journaled, floored):
            await cell.client.aclose()
    finally:
        server.stop()
        collections.remove()
    assert foreign_tracebacks(server.read_log()) == 0
