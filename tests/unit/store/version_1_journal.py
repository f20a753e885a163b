"""A journal as journal-bridge left it at schema version 1, for the upgrade
tests of the SQL stores.

Its tables are made by the store's own first migration step: a released step is
never edited, so that step is exactly what version 1 created. The rows are
inserted by position, so a first step that grew a later column fails them.
"""

from __future__ import annotations

from typing import Any

from journal_bridge.store import RunEventStore
from journal_bridge.store.conformance import event

THREAD = "t"
CREATED_AT = "2025-01-01T00:00:00+00:00"

# Thread `t` of version 1: 3 messages among 5 events, as
# `(seq, run_id, event_type, category, content JSON, source_key)`.
ROWS: list[tuple[Any, ...]] = [
    (1, "r1", "run.start", "trace", '{"run": 1}', None),
    (2, "r1", "llm.human.input", "message", '"hi"', "human-1"),
    (3, "r1", "llm.ai.response", "message", '"hello"', "ai-1"),
    (4, "r2", "llm.ai.response", "message", '"again"', None),
    (5, "r2", "run.end", "outputs", "null", None),
]


def version_1_statements(
    migrations: list[tuple[str, ...]], tables: dict[str, str]
) -> list[str]:
    """The statements that created a version-1 journal in `tables`."""
    return [statement.format(**tables) for statement in migrations[0]]


async def check_upgraded(store: RunEventStore) -> None:
    """The upgraded journal reads `ROWS` as they were and appends after them,
    its message counter filled in by the upgrade."""
    assert await store.count_messages(THREAD) == 3
    assert [r["content"] for r in await store.list_messages(THREAD)] == [
        "hi",
        "hello",
        "again",
    ]
    assert all("user_id" not in r for r in await store.list_events(THREAD, "r1"))
    assert await store.get_last_visible_ai_seq_by_run(THREAD, {"r1", "r2"}) == {
        "r1": 3,
        "r2": 4,
    }
    # appends continue the old sequence and keep the new counter
    (again,) = await store.put_batch([event(thread_id=THREAD, source_key="ai-1")])
    assert again.seq == 3
    (new,) = await store.put_batch([event(thread_id=THREAD, user_id="u")])
    assert new.seq == 6
    assert await store.count_messages(THREAD) == 4
    assert await store.delete_by_run(THREAD, "r1") == 3
    assert await store.count_messages(THREAD) == 2
