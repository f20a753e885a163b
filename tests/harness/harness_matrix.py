"""Real agent harnesses under a real `langgraph dev` with the plugin: each cell's journal against its client's view.

A cell is a graph of `tests/harness/graphs/harnesses.py` x a capture setting
(`JOURNAL_BRIDGE_CAPTURE`) x a client: a `values` stream, useStream's modes
(`messages-tuple` and `values`), or `runs.wait`. It holds the graph's 12 turns
on a new thread, then reads the thread's history from the journal and compares
it with what the client saw (`tests/harness/client_view.py`). A graph's clients
hold their conversations side by side.

`tests/e2e/test_real_harnesses.py` asserts every cell; run as a script, it prints
a table instead, one row per cell, against the checkout it is run from:

    .venv/bin/python -m tests.harness.harness_matrix                       # every cell
    .venv/bin/python -m tests.harness.harness_matrix --capture auto --graph swarm deepagent --client wait
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import httpx
from langgraph_sdk import get_client

from tests.harness.client_view import ClientView, Comparison, compare, summarizer_runs
from tests.harness.conversation import human
from tests.harness.graphs.scripted_model import SUMMARIZER_LOG_ENV
from tests.harness.langgraph_server import PROJECT_ROOT, LanggraphDevServer, project_config

GRAPHS_FILE = PROJECT_ROOT / "tests" / "harness" / "graphs" / "harnesses.py"
ALL_GRAPHS = ["deepagent", "supervisor_last", "supervisor_full", "swarm", "langmem_overwrite", "langmem_side",
              "agent_node", "command_tool"]
# The graphs whose harness this venv holds (deepagents is not on the oldest version set).
GRAPHS = [g for g in ALL_GRAPHS if g != "deepagent" or find_spec("deepagents") is not None]
CAPTURES = ["auto", "events", "lean"]
# How each client asks for a run: stream modes, or None for `runs.wait`.
CLIENTS: dict[str, list[str] | None] = {
    "values": ["values"],
    "use_stream": ["messages-tuple", "values"],
    "wait": None,
}
SUMMARIZER_LOG = "summarizer.log"
# How long the journal may take to hold a finished run's last message.
JOURNAL_WAIT = 60.0


def start_server(capture: str, workdir: Path, store_url: str | None = None) -> LanggraphDevServer:
    """A `langgraph dev` of this checkout with the plugin, serving every harness graph, under `capture`
    (its journal at `store_url`, else the default SQLite file)."""
    config = project_config(graphs={graph: f"{GRAPHS_FILE}:{graph}" for graph in GRAPHS})
    env = {"JOURNAL_BRIDGE_CAPTURE": capture, SUMMARIZER_LOG_ENV: str(workdir / SUMMARIZER_LOG)}
    if store_url is not None:
        env["JOURNAL_BRIDGE_STORE_URL"] = store_url
    return LanggraphDevServer(config=config, env=env, workdir=workdir).start()


async def converse(client, graph: str, how: str) -> tuple[str, ClientView]:
    """Hold the graph's conversation on a new thread as the client `how` does; the thread and what it saw."""
    from tests.harness.graphs.harnesses import TURNS

    thread_id = (await client.threads.create())["thread_id"]
    view = ClientView()
    modes = CLIENTS[how]
    checkpoints: set[str] = set()
    for text in TURNS[graph]:
        if modes is None:
            result = await client.runs.wait(thread_id, graph, input=human(text))
            # A client that waits sees the run's last state; the states before it, which
            # the thread committed too, it reads from the thread's history.
            for state in reversed(await client.threads.get_history(thread_id, limit=200)):
                if state["checkpoint"]["checkpoint_id"] not in checkpoints:
                    checkpoints.add(state["checkpoint"]["checkpoint_id"])
                    view.saw_state(state["values"])
            view.saw_state(result)
            continue
        async for part in client.runs.stream(thread_id, graph, input=human(text), stream_mode=modes):
            if part.event == "error":
                raise AssertionError(f"{graph}/{how}: the run failed: {part.data}")
            if part.event == "values":
                view.saw_state(part.data)
        if "values" not in modes:
            view.saw_state((await client.threads.get_state(thread_id))["values"])
    return thread_id, view


async def journal_history(url: str, thread_id: str, last_id: str | None) -> list[dict[str, Any]]:
    """The thread's history once it holds `last_id`, or as it is once the journal has nothing left to
    write (or after `JOURNAL_WAIT` seconds)."""
    deadline = time.monotonic() + JOURNAL_WAIT
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        while True:
            # Read before the page: idle then means the page holds everything journaled.
            idle = _idle((await http.get("/journal/health")).json())
            response = await http.get(f"/journal/threads/{thread_id}/messages", params={"limit": 500})
            response.raise_for_status()
            items = response.json()["data"]
            if any(i.get("id") == last_id for i in items) or idle or time.monotonic() > deadline:
                return items
            await asyncio.sleep(0.3)


def _idle(health: dict[str, Any]) -> bool:
    """Whether the plugin's health says every run it observed is journaled."""
    done = health["runs_completed"] + health["runs_failed"] + health.get("runs_read_elsewhere", 0)
    return health["active_runs"] == 0 and health["backlog"] == 0 and done >= health["runs_observed"]


async def run_cell(server: LanggraphDevServer, graph: str, how: str) -> Comparison:
    client = get_client(url=server.url, api_key=None)
    thread_id, view = await converse(client, graph, how)
    items = await journal_history(server.url, thread_id, view.ids[-1] if view.ids else None)
    return compare(view, items, summarizer_runs(server.workdir / SUMMARIZER_LOG, thread_id))


async def run_graph(server: LanggraphDevServer, graph: str, clients: list[str]) -> dict[str, Comparison | BaseException]:
    """Each client's cell of `graph`, the clients side by side on threads of their own (half the wall time)."""
    results = await asyncio.gather(*(run_cell(server, graph, how) for how in clients), return_exceptions=True)
    return dict(zip(clients, results, strict=True))


_COLUMNS = ("capture", "graph", "client", "truth", "journal", "missing", "unseen", "dups", "order",
            "markers/runs", "no summary", "holds")


def row(capture: str, graph: str, how: str, result: Comparison) -> tuple[str, ...]:
    return (capture, graph, how, str(result.truth), str(result.journaled), str(len(result.missing)),
            str(len(result.unseen)), str(len(result.duplicates)), "ok" if result.order_ok else "NO",
            f"{result.markers}/{result.summarizer_runs}", str(result.markers_without_summary),
            "yes" if result.holds else "NO")


def print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(_COLUMNS)]
    for line in [_COLUMNS, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--capture", nargs="+", choices=CAPTURES, default=CAPTURES)
    parser.add_argument("--graph", nargs="+", choices=GRAPHS, default=GRAPHS)
    parser.add_argument("--client", nargs="+", choices=list(CLIENTS), default=list(CLIENTS))
    parser.add_argument("--verbose", action="store_true", help="say what each failing cell got wrong")
    args = parser.parse_args(argv)
    rows, failed, started = [], 0, time.monotonic()
    print(f"checkout: {PROJECT_ROOT}", flush=True)
    for capture in args.capture:
        scratch = tempfile.TemporaryDirectory(prefix=f"harness-matrix-{capture}-", ignore_cleanup_errors=True)
        server = start_server(capture, Path(scratch.name))
        try:
            for graph in args.graph:
                for how, result in asyncio.run(run_graph(server, graph, args.client)).items():
                    if isinstance(result, BaseException):  # a cell that could not run
                        print(f"{capture} {graph} {how}: {type(result).__name__}: {result}", file=sys.stderr, flush=True)
                        failed += 1
                        continue
                    rows.append(row(capture, graph, how, result))
                    failed += not result.holds
                    if args.verbose and not result.holds:
                        print(f"  {capture} {graph} {how}: " + "; ".join(result.problems()), flush=True)
        finally:
            server.stop()
            scratch.cleanup()
    print()
    print_table(rows)
    print(f"\n{len(rows)} cells, {failed} not holding, {time.monotonic() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
