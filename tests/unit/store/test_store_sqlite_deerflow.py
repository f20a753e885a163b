"""The conformance suite in deer-flow's `run_events` table of a SQLite file, and
the table shared with deer-flow: what one writes, the other reads."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from journal_bridge.model.envelope import (
    LLM_AI_RESPONSE,
    LLM_HUMAN_INPUT,
    MESSAGE,
    RUN_END,
)
from journal_bridge.store import create_store, open_store
from journal_bridge.store.conformance import THREAD, SharedStorageConformance, event
from journal_bridge.store.deerflow import run_events_statements
from journal_bridge.store.sqlite import SqliteRunEventStore
from journal_bridge.store.sqlite_deerflow import DeerflowSqliteRunEventStore
from tests.unit.store.old_markers import THREAD as OLD_THREAD, check_markers_upgraded, write_old_markers
from tests.unit.store.deerflow_rows import (
    ROW_COLUMNS,
    check_deerflow_rows_are_read_counted_and_continued,
    deerflow_row,
)


def _url(path: Path) -> str:
    return f"sqlite:///{path}?layout=deerflow"


class TestDeerflowSqliteRunEventStore(SharedStorageConformance):

    @pytest.fixture
    def store_url(self, tmp_path: Path) -> str:
        return _url(tmp_path / "deerflow.db")


# deer-flow's run_events as deer-flow creates it on SQLite: the table and its
# indexes, without what journal-bridge adds (the pragma test above pins them).
_DEERFLOW_TABLE = [
    statement.format(events="run_events")
    for statement in run_events_statements(
        id_type="INTEGER", json_type="JSON", time_type="DATETIME"
    )
    if "source_key" not in statement
]


def _deerflow_put(path: Path, *record: Any, **fields: Any) -> int:
    """Append a row (`deerflow_row`'s arguments) the way deer-flow's database
    store does on SQLite: at one above the highest stored seq, the time as
    SQLAlchemy stores it (UTC, no offset)."""
    row = deerflow_row(*record, **fields)
    thread_id = row[0]
    created_at = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    with sqlite3.connect(path) as conn:
        (seq,) = conn.execute(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM run_events WHERE thread_id = ?",
            (thread_id,),
        ).fetchone()
        conn.execute(
            f"INSERT INTO run_events ({ROW_COLUMNS}, seq, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*row, seq, created_at),
        )
    conn.close()
    return seq


def _deerflow_messages(path: Path, thread_id: str) -> list[dict[str, Any]]:
    """The thread's messages as deer-flow's database store reads them."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT thread_id, run_id, user_id, event_type, category, content,"
            " event_metadata, seq, created_at FROM run_events"
            " WHERE thread_id = ? AND category = 'message' ORDER BY seq",
            (thread_id,),
        ).fetchall()
    conn.close()
    records = []
    for thread, run, user, etype, category, content, metadata, seq, created in rows:
        metadata = json.loads(metadata)
        if metadata.get("content_is_json") or metadata.get("content_is_dict"):
            content = json.loads(content)
        # SQLAlchemy parses the stored time with fromisoformat; naive is UTC.
        created_at = datetime.fromisoformat(created)
        assert created_at.tzinfo is None
        records.append(
            {"thread_id": thread, "run_id": run, "user_id": user, "event_type": etype,
             "category": category, "content": content, "metadata": metadata, "seq": seq,
             "created_at": created_at.replace(tzinfo=UTC)}
        )
    return records


def test_the_url_chooses_the_layout(tmp_path):
    store = create_store(f"sqlite:///{tmp_path / 'x.db'}?busy_timeout=2&layout=deerflow")
    assert type(store) is DeerflowSqliteRunEventStore
    assert (store.path, store.busy_timeout) == (str(tmp_path / "x.db"), 2.0)
    assert type(create_store(f"sqlite:///{tmp_path / 'x.db'}?layout=journal")) is (
        SqliteRunEventStore
    )
    with pytest.raises(ValueError, match="SQLite journal layout 'mysql'"):
        create_store(f"sqlite:///{tmp_path / 'x.db'}?layout=mysql")


async def test_the_events_table_is_deerflows_run_events(tmp_path):
    path = tmp_path / "deerflow.db"
    async with open_store(_url(path)):
        pass
    with sqlite3.connect(path) as conn:
        columns = conn.execute(
            "SELECT name, type, \"notnull\", pk FROM pragma_table_info('run_events')"
        ).fetchall()
        indexes = conn.execute(
            "SELECT name, \"unique\", origin FROM pragma_index_list('run_events')"
            " ORDER BY name"
        ).fetchall()
        unique = conn.execute(
            "SELECT name FROM pragma_index_info('sqlite_autoindex_run_events_1')"
        ).fetchall()
    conn.close()
    assert columns == [
        ("id", "INTEGER", 1, 1),
        ("thread_id", "VARCHAR(64)", 1, 0),
        ("run_id", "VARCHAR(64)", 1, 0),
        ("user_id", "VARCHAR(64)", 0, 0),
        ("event_type", "VARCHAR(32)", 1, 0),
        ("category", "VARCHAR(16)", 1, 0),
        ("content", "TEXT", 1, 0),
        ("event_metadata", "JSON", 1, 0),
        ("seq", "INTEGER", 1, 0),
        ("created_at", "DATETIME", 1, 0),
        ("source_key", "TEXT", 0, 0),  # journal-bridge's addition
    ]
    assert indexes == [
        ("ix_events_run", 0, "c"),
        ("ix_events_thread_cat_seq", 0, "c"),
        ("ix_run_events_user_id", 0, "c"),
        ("journal_bridge_run_events_source_key", 1, "c"),
        ("sqlite_autoindex_run_events_1", 1, "u"),
    ]
    assert unique == [("thread_id",), ("seq",)]


async def test_rows_are_stored_as_deerflow_stores_them(tmp_path):
    path = tmp_path / "deerflow.db"
    created = datetime(2025, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
    async with open_store(_url(path)) as store:
        await store.put_batch(
            [
                event(content="plain text", metadata={"caller": "agent"}, user_id="u1",
                      created_at=created),
                event(content={"type": "ai", "content": "hi"}),
                event(content=[1, 2]),
                event(content='{"not": "json content"}', source_key="k"),
            ]
        )
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT id, seq, content, event_metadata, user_id, source_key FROM run_events"
            " ORDER BY seq"
        ).fetchall()
        (first_created,) = conn.execute(
            "SELECT created_at FROM run_events WHERE seq = 1"
        ).fetchone()
    conn.close()
    assert [(row[0], row[1], row[2], json.loads(row[3]), *row[4:]) for row in rows] == [
        (1, 1, "plain text", {"caller": "agent"}, "u1", None),
        (2, 2, '{"type":"ai","content":"hi"}',
         {"content_is_json": True, "content_is_dict": True}, None, None),
        (3, 3, "[1,2]", {"content_is_json": True}, None, None),
        (4, 4, '{"not": "json content"}', {}, None, "k"),
    ]
    assert first_created == "2025-03-04 05:06:07.890123"


async def test_what_journal_bridge_writes_deerflow_reads(tmp_path):
    path = tmp_path / "deerflow.db"
    created = datetime(2025, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
    async with open_store(_url(path)) as store:
        stored = await store.put_batch(
            [
                event(event_type=LLM_HUMAN_INPUT, content={"type": "human", "content": "q"},
                      created_at=created),
                event(content="answer", metadata={"caller": "lead_agent"}, user_id="u1"),
                event(event_type=RUN_END, category="outputs", content={"status": "success"}),
            ]
        )
    human, answer = _deerflow_messages(path, THREAD)
    assert human == {
        "thread_id": THREAD, "run_id": "run-1", "user_id": None,
        "event_type": LLM_HUMAN_INPUT, "category": MESSAGE,
        "content": {"type": "human", "content": "q"},
        # deer-flow hands its own flags on with the metadata
        "metadata": {"content_is_json": True, "content_is_dict": True},
        "seq": 1, "created_at": created,
    }
    assert answer == {
        "thread_id": THREAD, "run_id": "run-1", "user_id": "u1",
        "event_type": LLM_AI_RESPONSE, "category": MESSAGE, "content": "answer",
        "metadata": {"caller": "lead_agent"}, "seq": 2, "created_at": stored[1].created_at,
    }


async def test_rows_deerflow_writes_are_read_counted_and_continued(tmp_path):
    path = tmp_path / "deerflow.db"

    def delete_run(thread_id: str, run_id: str) -> None:
        with sqlite3.connect(path) as conn:
            conn.execute(
                "DELETE FROM run_events WHERE thread_id = ? AND run_id = ?", (thread_id, run_id)
            )
        conn.close()

    async with open_store(_url(path)) as store:
        await check_deerflow_rows_are_read_counted_and_continued(
            store, lambda *record, **fields: _deerflow_put(path, *record, **fields), delete_run
        )


async def test_a_run_events_table_deerflow_created_is_adopted(tmp_path):
    path = tmp_path / "deerflow.db"
    with sqlite3.connect(path) as conn:
        for statement in _DEERFLOW_TABLE:
            conn.execute(statement)
    conn.close()
    for n in range(3):
        _deerflow_put(path, "old", "r", LLM_AI_RESPONSE, MESSAGE, f"m{n}")
    _deerflow_put(path, "old", "r", RUN_END, "outputs", {"done": True})
    _deerflow_put(path, "older", "r", LLM_HUMAN_INPUT, MESSAGE, "hello")
    async with open_store(_url(path)) as store:
        assert await store.count_messages("old") == 3
        assert await store.last_seq("old") == 4
        assert [t["thread_id"] for t in await store.list_threads()] == ["older", "old"]
        (end,) = await store.list_events("old", "r", event_types=[RUN_END])
        assert end["content"] == {"done": True} and end["metadata"] == {}
        (stored,) = await store.put_batch([event(thread_id="old", source_key="k")])
        assert stored.seq == 5
        assert (await store.put_batch([event(thread_id="old", source_key="k")]))[0].seq == 5
    async with open_store(_url(path)) as store:  # opening again changes nothing
        assert await store.count_messages("old") == 4
        assert (await store.put_batch([event(thread_id="old", source_key="k")]))[0].seq == 5


async def test_the_journal_layout_and_the_deerflow_layout_share_a_file(tmp_path):
    path = tmp_path / "both.db"
    async with (
        open_store(_url(path)) as shared,
        open_store(f"sqlite:///{path}") as own,
    ):
        await shared.put_batch([event(content="in run_events")])
        await own.put_batch([event(content="in journal_events"), event()])
        assert [r["content"] for r in await shared.list_messages(THREAD)] == ["in run_events"]
        assert await own.count_messages(THREAD) == 2
        assert await shared.count_messages(THREAD) == 1


async def test_markers_written_before_the_fields_of_deerflows_design_get_them(tmp_path):
    path = tmp_path / "deerflow.db"
    await write_old_markers(_url(path))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE journal_bridge_schema SET version = 1")
    conn.close()
    async with open_store(_url(path)) as store:
        await check_markers_upgraded(store)
    # deer-flow reads the upgraded rows as it reads its own: the flags still say JSON.
    with sqlite3.connect(path) as conn:
        (content, metadata), = conn.execute(
            "SELECT content, event_metadata FROM run_events WHERE thread_id = ? AND seq = 3", (OLD_THREAD,)
        ).fetchall()
    conn.close()
    assert json.loads(metadata) == {"content_is_json": True, "content_is_dict": True,
                                    "replaced_count": 6, "preserved_count": 4, "condensed_count": 5}
    assert json.loads(content)["content"] == "The user asked about Paris twice."
