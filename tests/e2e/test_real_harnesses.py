"""Real agent harnesses from PyPI: the journal holds exactly the conversation each client saw, with a marker per compaction.

Eight graphs built with deepagents, langgraph-supervisor (both output modes),
langgraph-swarm, langmem's `SummarizationNode` (overwriting `messages` and
beside it) and `create_agent` (as a node of a parent graph, and with a tool
returning a `Command`), each on a scripted model that uses its tools and
compacts several times in 12 turns (`tests/harness/graphs/harnesses.py`). Each
holds its conversation under every capture setting, for a `values` stream,
useStream's modes and `runs.wait` (side by side, on threads of their own). The
journal's history of each thread must hold every message id the client saw in a
state, no other, each once, in the order first seen, and one marker with its
summary per summarizer run (`tests/harness/client_view.py`).
`python -m tests.harness.harness_matrix` prints the same matrix as a table.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from importlib.metadata import version

import pytest

from tests.harness.client_view import ClientView, Comparison, compare, summarizer_runs
from tests.harness.harness_matrix import (
    CLIENTS,
    GRAPHS,
    SUMMARIZER_LOG,
    journal_history,
    run_cell,
    run_graph,
    start_server,
)
from tests.harness.js_onoff import JS_DIR, ensure_node_modules, node_problem
from tests.harness.services import create_database, postgres_server
from tests.harness.suites import require_or_skip

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


# One server per capture setting; the sample is the default capture, every graph and client.
@pytest.fixture(scope="module", params=["auto", pytest.param("events", marks=pytest.mark.full_matrix),
                                        pytest.param("lean", marks=pytest.mark.full_matrix)])
def server(request, tmp_path_factory):
    dev = start_server(request.param, tmp_path_factory.mktemp(f"harnesses-{request.param}"))
    yield request.param, dev
    dev.stop()


# A worker of a supervisor in `last_message` mode compacts what its own model sees and hands its
# parent one message: no state of the parent shows the compaction, and only a run captured from
# `events` sees the summarizer's call (docs/capture.md, "Agents built with other harnesses").
UNSEEN_BY_STATES = {"supervisor_last"}


def _values_path(capture: str, how: str) -> bool:
    return capture == "lean" or (capture == "auto" and how != "use_stream")


@pytest.mark.parametrize("graph", GRAPHS)
async def test_the_journal_holds_what_each_client_saw_with_a_marker_per_summarizer_run(server, graph):
    capture, dev = server
    failures = []
    for how, result in (await run_graph(dev, graph, list(CLIENTS))).items():
        if isinstance(result, BaseException):
            failures.append(f"{how}: could not hold the conversation: {type(result).__name__}: {result}")
            continue
        assert isinstance(result, Comparison)
        # The scripted conversation really used the harness: messages, and compactions to mark.
        assert result.truth >= 24, f"{graph}/{how}: the client saw only {result.truth} messages"
        assert result.summarizer_runs >= 3, f"{graph}/{how}: {result.summarizer_runs} summarizer runs"
        if graph in UNSEEN_BY_STATES and _values_path(capture, how):
            # Every message exact, and no marker rather than a false one.
            exact = dataclasses.replace(result, markers=result.summarizer_runs)
            if not (exact.holds and result.markers == 0):
                failures.append(f"{how}: " + "; ".join(result.problems()))
            continue
        if not result.holds:
            failures.append(f"{how}: " + "; ".join(result.problems()))
    assert not failures, f"{graph}:\n" + "\n".join(failures)


async def test_a_javascript_usestream_client_of_a_swarm_sees_what_the_journal_holds(server):
    """The JavaScript SDK useStream is built on, streaming useStream's modes, on a multi-agent harness."""
    capture, dev = server
    problem = node_problem()
    if problem:
        require_or_skip(f"JavaScript client of a harness: {problem}")
    ensure_node_modules()
    from tests.harness.graphs.harnesses import TURNS

    result = subprocess.run(["node", str(JS_DIR / "harness_turns.mjs"), dev.url, "swarm", *TURNS["swarm"]],
                            cwd=JS_DIR, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    seen = json.loads(result.stdout)
    view = ClientView(ids=seen["ids"], states=seen["states"], _seen=set(seen["ids"]))
    items = await journal_history(dev.url, seen["thread_id"], view.ids[-1])
    comparison = compare(view, items, summarizer_runs(dev.workdir / SUMMARIZER_LOG, seen["thread_id"]))
    assert comparison.truth >= 24 and comparison.summarizer_runs >= 3, comparison
    assert comparison.holds, f"swarm/js/{capture}: " + "; ".join(comparison.problems())


@pytest.mark.postgres
async def test_a_supervisors_conversation_journaled_on_postgres_is_what_its_clients_saw(tmp_path):
    with postgres_server() as postgres_url:
        store_url = create_database(postgres_url, "journal_harnesses")
        dev = start_server("auto", tmp_path, store_url=store_url)
        try:
            for how in ("use_stream", "wait"):
                result = await run_cell(dev, "supervisor_full", how)
                assert result.truth >= 24 and result.summarizer_runs >= 3, result
                assert result.holds, f"supervisor_full/{how} on Postgres: " + "; ".join(result.problems())
        finally:
            dev.stop()


def test_deepagents_is_in_the_matrix_wherever_its_version_set_installs_it():
    langchain = tuple(int(p) for p in version("langchain").split(".")[:3])
    if langchain < (1, 4, 7):
        pytest.skip(f"deepagents 0.7 needs langchain 1.4.7 or newer; this version set has langchain "
                    f"{version('langchain')}, so its cells run on the newest set only")
    assert "deepagent" in GRAPHS, "a set with a new enough langchain installs deepagents (tasks.py, harness-deepagents)"
