"""The lag from a compaction reaching a client to its marker being readable in the journal.

Shared by the benchmarks that measure it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.harness.conversation import human


async def turn_compaction_lags(
    client: Any, store: Any, thread_id: str, assistant_id: str, text: str, stream_mode: list[str], *, poll: float
) -> list[float]:
    """Stream one turn; for each compaction's custom frame, the seconds until `store` holds its marker row."""
    lags: list[float] = []
    async for part in client.runs.stream(thread_id, assistant_id, input=human(text), stream_mode=stream_mode):
        if part.event != "custom" or not isinstance(part.data, dict):
            continue
        seen = time.perf_counter()
        summary_id = part.data.get("summary_message_id")
        while True:
            markers = await store.list_timeline(thread_id, categories=("middleware",), limit=500)
            if any(m.content["changes"].get("summary_message_id") == summary_id for m in markers):
                lags.append(time.perf_counter() - seen)
                break
            await asyncio.sleep(poll)
    return lags
