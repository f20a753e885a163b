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

import pytest

from tests.harness.client_view import Comparison
from tests.harness.harness_matrix import CLIENTS, GRAPHS, run_graph, start_server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


# One server per capture setting; the sample is the default capture, every graph and client.
@pytest.fixture(scope="module", params=["auto", pytest.param("events", marks=pytest.mark.full_matrix),
                                        pytest.param("lean", marks=pytest.mark.full_matrix)])
def server(request, tmp_path_factory):
    dev = start_server(request.param, tmp_path_factory.mktemp(f"harnesses-{request.param}"))
    yield dev
    dev.stop()


@pytest.mark.parametrize("graph", GRAPHS)
async def test_the_journal_holds_what_each_client_saw_with_a_marker_per_summarizer_run(server, graph):
    failures = []
    for how, result in (await run_graph(server, graph, list(CLIENTS))).items():
        if isinstance(result, BaseException):
            failures.append(f"{how}: could not hold the conversation: {type(result).__name__}: {result}")
            continue
        assert isinstance(result, Comparison)
        # The scripted conversation really used the harness: messages, and compactions to mark.
        assert result.truth >= 24, f"{graph}/{how}: the client saw only {result.truth} messages"
        assert result.summarizer_runs >= 3, f"{graph}/{how}: {result.summarizer_runs} summarizer runs"
        if not result.holds:
            failures.append(f"{how}: " + "; ".join(result.problems()))
    assert not failures, f"{graph}:\n" + "\n".join(failures)
