"""Rows of deer-flow's `run_events` as deer-flow's database store writes them,
for the suites of the `?layout=deerflow` stores."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from journal_bridge.model.envelope import (
    LLM_AI_RESPONSE,
    LLM_HUMAN_INPUT,
    MESSAGE,
    RUN_END,
)
from journal_bridge.store.base import supports
from journal_bridge.store.conformance import THREAD, event

# The columns `deerflow_row` fills, in its order; deer-flow adds seq and created_at.
ROW_COLUMNS = "thread_id, run_id, user_id, event_type, category, content, event_metadata"


def deerflow_row(
    thread_id: str,
    run_id: str,
    event_type: str,
    category: str,
    content: Any,
    metadata: dict[str, Any] | None = None,
    user_id: str | None = None,
) -> tuple[Any, ...]:
    """The values of `ROW_COLUMNS` deer-flow stores for a record: a str content
    as is, anything else as JSON flagged in the metadata."""
    metadata = dict(metadata or {})
    if not isinstance(content, str):
        metadata["content_is_json"] = True
        if isinstance(content, dict):
            metadata["content_is_dict"] = True
        content = json.dumps(content, default=str, ensure_ascii=False)
    return (thread_id, run_id, user_id, event_type, category, content, json.dumps(metadata))


async def check_deerflow_rows_are_read_counted_and_continued(
    store: Any,
    put: Callable[..., int],
    delete_run: Callable[[str, str], None],
) -> None:
    """Rows deer-flow writes into the store's table are read, counted and
    continued. `put(*args, **kwargs)` appends `deerflow_row(*args, **kwargs)` as
    deer-flow does; `delete_run(thread_id, run_id)` deletes as deer-flow's
    `delete_by_run` does, with a plain DELETE."""
    await store.put_batch([event(run_id="ours", content="first")])
    put(THREAD, "theirs", LLM_HUMAN_INPUT, MESSAGE, "question")
    put(
        THREAD, "theirs", LLM_AI_RESPONSE, MESSAGE,
        {"type": "ai", "content": "answer"}, {"caller": "lead_agent"}, user_id="u1",
    )
    put(THREAD, "theirs", RUN_END, "outputs", None)
    records = await store.list_messages(THREAD)
    assert [(r["seq"], r["content"], r["metadata"]) for r in records] == [
        (1, "first", {}),
        (2, "question", {}),
        (3, {"type": "ai", "content": "answer"}, {"caller": "lead_agent"}),
    ]
    assert records[2]["user_id"] == "u1"
    assert records[2].created_at.tzinfo is not None
    assert await store.count_messages(THREAD) == 3
    assert await store.get_last_visible_ai_seq_by_run(THREAD, {"theirs"}) == {"theirs": 3}
    if supports(store, "search_threads"):
        assert [t["thread_id"] for t in await store.search_threads("ANSWER")] == [THREAD]
        assert [t["thread_id"] for t in await store.search_threads("question")] == [THREAD]
    (ours,) = await store.put_batch([event(run_id="ours", content="next")])
    assert ours.seq == 5
    (thread,) = await store.list_threads()
    assert (thread["last_seq"], thread["event_count"]) == (5, 5)
    assert datetime.fromisoformat(thread["updated_at"]).tzinfo is not None
    delete_run(THREAD, "theirs")
    assert await store.count_messages(THREAD) == 2
    assert await store.last_seq(THREAD) == 5
