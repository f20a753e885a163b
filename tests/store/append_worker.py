"""One writer process: appends batches to a thread, starting when told to.

    python append_worker.py URL OPTIONS_JSON THREAD_ID WRITER BATCHES BARRIER_DIR

Creates BARRIER_DIR/ready-WRITER once the store is open, then waits for
BARRIER_DIR/go so that all writers contend for the thread at the same moment.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from journal_bridge.events import LLM_AI_RESPONSE, make_event
from journal_bridge.store import open_store


async def main(
    url: str, options: dict, thread_id: str, writer: str, batches: int, barrier: Path
) -> None:
    async with open_store(url, **options) as store:
        (barrier / f"ready-{writer}").touch()
        while not (barrier / "go").exists():
            await asyncio.sleep(0.005)
        for batch in range(batches):
            await store.put_batch(
                [
                    make_event(
                        thread_id=thread_id,
                        run_id=f"run-{writer}",
                        event_type=LLM_AI_RESPONSE,
                        content={"writer": writer, "batch": batch, "item": item},
                        source_key=f"{writer}:{batch}:{item}",
                    )
                    for item in range(1 + batch % 3)
                ]
            )


if __name__ == "__main__":
    url, options, thread_id, writer, batches, barrier = sys.argv[1:7]
    asyncio.run(
        main(url, json.loads(options), thread_id, writer, int(batches), Path(barrier))
    )
