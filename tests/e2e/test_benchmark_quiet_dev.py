"""The bridge benchmark's servers run without the dev server's file persistence.

`langgraph dev` pickles its in-memory runtime every 10 s from a thread of its
own, a cost of every server that lands in some rounds and not others. The
benchmark launches its servers through `tests/harness/bench/quiet_dev.py` and refuses
one whose log shows the flush loop; the plain server here shows that the log
line the check looks for is still written when the loop runs.
"""

from __future__ import annotations

import pytest
from langgraph_sdk import get_client

from tests.harness.bench.servers import FLUSH_LOOP_LINE, start_server
from tests.harness.langgraph_server import LanggraphDevServer

pytestmark = pytest.mark.e2e


async def test_a_benchmark_server_has_no_flush_loop_and_still_runs_the_agent():
    plain = LanggraphDevServer(plugin=False).start()
    try:
        assert FLUSH_LOOP_LINE in plain.read_log()
    finally:
        plain.stop()
    quiet = start_server("auto", 0.0)
    try:
        client = get_client(url=quiet.url)
        thread = (await client.threads.create())["thread_id"]
        state = await client.runs.wait(thread, "agent", input={"messages": [{"role": "human", "content": "hello"}]})
        assert state["messages"][-1]["type"] == "ai"
    finally:
        quiet.stop()
    # Over the server's whole life, not only its start (which `start_server` checks).
    assert FLUSH_LOOP_LINE not in quiet.read_log()
