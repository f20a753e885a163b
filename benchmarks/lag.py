"""How long after a compaction reaches a client is its marker readable in the journal?

One server with the plugin (`auto`), the instant model and an agent that
compacts every few turns; for a client of `values` and `custom` (journaled
from the run's states) and a useStream client (journaled from `events`), the
seconds from the compaction's custom frame reaching the client to the marker
row being readable in the store, p50 and p99 over `--compactions`.

    python3 tasks.py bench lag [--compactions 20]

`python3 tasks.py bench bridge --only lag` runs the same.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

from journal_bridge.store import open_store
from tests.harness.bench.clients import USE_STREAM, sdk_client
from tests.harness.bench.compaction_lag import turn_compaction_lags
from tests.harness.bench.servers import quiet_dev_server
from tests.harness.bench.stats import pct
from tests.harness.conversation import EARLY_SUMMARIZATION, TURNS


async def measure_lag(compactions: int) -> None:
    """Seconds from the custom frame reaching the client to the marker row being readable."""
    server = quiet_dev_server(env={"JOURNAL_BRIDGE_CAPTURE": "auto"})
    try:
        for label, modes in (("values+custom client (state capture)", ["values", "custom"]),
                             ("useStream client (events capture)", USE_STREAM)):
            client = sdk_client(server.url)
            assistant = await client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
            thread_id = (await client.threads.create())["thread_id"]
            lags: list[float] = []
            async with open_store(server.store_url) as store:
                turn = 0
                while len(lags) < compactions:
                    text = TURNS[turn % len(TURNS)]
                    turn += 1
                    lags.extend(await turn_compaction_lags(client, store, thread_id, assistant["assistant_id"], text,
                                                           modes, poll=0.002))
            print(f"compaction -> marker readable, {label}, {len(lags)} compactions: "
                  f"p50 {pct(lags, .5) * 1000:.1f} ms, p99 {pct(lags, .99) * 1000:.1f} ms")
    finally:
        server.stop()


def add_options(parser: argparse.ArgumentParser) -> None:
    """The lag's own options (`bench bridge` takes them too)."""
    parser.add_argument("--compactions", type=int, default=20)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add_options(parser)
    # A stopped benchmark stops the server it started: SIGTERM unwinds like Ctrl-C.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    asyncio.run(measure_lag(parser.parse_args().compactions))
