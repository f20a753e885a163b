"""One process that journals numbered messages through a `TeeWriter`.

    python tee_worker.py STORE_URL FIRST COUNT (--hold | --drain)

Writes messages FIRST..FIRST+COUNT-1 of thread `t1` (keys `message:mN`), then
prints `accepted N` once the writer has accepted them. With `--hold` it then
waits to be killed; with `--drain` it waits until everything it holds --
what an earlier process left in the spool included -- is in the store, prints
its health as JSON and stops.
"""

from __future__ import annotations

import asyncio
import json
import sys

from journal_bridge.model.envelope import make_event
from journal_bridge.tee import TeeWriter


def message(n: int):
    return make_event(
        thread_id="t1",
        run_id=f"r{n // 10}",
        event_type="llm.human.input",
        content={"type": "human", "content": f"m{n}", "id": f"m{n}"},
        source_key=f"message:m{n}",
    )


async def main(url: str, first: int, count: int, mode: str) -> None:
    writer = TeeWriter(url, max_backoff=0.05)
    await writer.start()
    for n in range(first, first + count, 10):
        await writer.write([message(i) for i in range(n, min(n + 10, first + count))])
    print(f"accepted {count}", flush=True)
    if mode == "--hold":
        while True:
            print(json.dumps(writer.health()), flush=True)
            await asyncio.sleep(0.05)
    await writer.drain()
    print(json.dumps(writer.health()), flush=True)
    await writer.stop()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
