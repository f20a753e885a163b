"""The bridge benchmark's `floor` server reads every run once, whatever its client does.

The floor is what the journal's cost is measured against: a floor that skipped
some runs would make the plugin look dearer than it is.
"""

from __future__ import annotations

import pytest
from langgraph_sdk import get_client

from benchmarks import bridge
from tests.harness.conversation import wait_journal_idle
from tests.harness.langgraph_server import foreign_tracebacks

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("floor", ["floor", "floor-twin"])
async def test_the_floor_joins_streamed_waited_and_created_runs_once_each(floor):
    # The twin is a second floor, there to show what two identical servers differ by.
    server = bridge.start_server(floor, 0.0)
    try:
        client = get_client(url=server.url)
        thread = (await client.threads.create())["thread_id"]
        await bridge.values_stream(client, thread, "agent", "hello there")
        await bridge.use_stream(client, thread, "agent", "add 2 and 3")
        await bridge.wait(client, thread, "agent", "what is the weather in Paris")
        await bridge.create_join(client, thread, "agent", "thanks")
        health = await wait_journal_idle(server.url, timeout=60)
        assert health["runs_observed"] == 4
        assert health["runs_completed"] == 4
        assert health["runs_failed"] == 0
        assert health["parts_seen"] >= 4 * 3  # each joined run: metadata, values and its end at least
        assert health["retained_frames"] == 0
    finally:
        server.stop()
    assert foreign_tracebacks(server.read_log()) == 0
