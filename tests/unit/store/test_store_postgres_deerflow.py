"""The conformance suite in deer-flow's `run_events` table, and the table shared
with deer-flow: what one writes, the other reads."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from journal_bridge.model.envelope import LLM_AI_RESPONSE, MESSAGE, RUN_END
from journal_bridge.store import open_store
from journal_bridge.store.conformance import THREAD, SharedStorageConformance, event
from journal_bridge.store.deerflow import run_events_statements
from journal_bridge.store.postgres_deerflow import DeerflowPostgresRunEventStore
from tests.unit.store.old_markers import THREAD as OLD_THREAD, check_markers_upgraded, write_old_markers
from tests.unit.store.deerflow_rows import (
    ROW_COLUMNS,
    check_deerflow_rows_are_read_counted_and_continued,
    deerflow_row,
)

pytestmark = pytest.mark.postgres


def _deerflow_url(postgres_url: str) -> str:
    separator = "&" if "?" in postgres_url else "?"
    return f"{postgres_url}{separator}layout=deerflow"


class TestDeerflowPostgresRunEventStore(SharedStorageConformance):

    @pytest.fixture
    def store_url(self, postgres_url: str) -> str:
        return _deerflow_url(postgres_url)

    @pytest.fixture
    def store_options(self, postgres_schema: str) -> dict:
        return {"schema": postgres_schema}


# deer-flow's run_events as its baseline migration creates it, without what
# journal-bridge adds (the information_schema test below pins the columns).
_DEERFLOW_TABLE = [
    statement
    for statement in run_events_statements(
        id_type="SERIAL", json_type="JSON", time_type="TIMESTAMP WITH TIME ZONE"
    )
    if "source_key" not in statement
]


def _deerflow_put(conn: psycopg.Connection, schema: str, *record: Any, **fields: Any) -> int:
    """Append a row (`deerflow_row`'s arguments) the way deer-flow's database
    store does: under its thread lock, at one above the highest stored seq."""
    row = deerflow_row(*record, **fields)
    thread_id = row[0]
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s::text)::bigint)", (thread_id,))
        (seq,) = conn.execute(
            f'SELECT COALESCE(MAX(seq), 0) + 1 FROM "{schema}".run_events WHERE thread_id = %s',
            (thread_id,),
        ).fetchone()
        conn.execute(
            f'INSERT INTO "{schema}".run_events ({ROW_COLUMNS}, seq, created_at)'
            " VALUES (%s, %s, %s, %s, %s, %s, %s::json, %s, now())",
            (*row, seq),
        )
    return seq


async def test_the_events_table_is_deerflows_run_events(postgres_url, postgres_schema):
    async with open_store(_deerflow_url(postgres_url), schema=postgres_schema) as store:
        assert isinstance(store, DeerflowPostgresRunEventStore)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        columns = conn.execute(
            "SELECT column_name, data_type, character_maximum_length, is_nullable"
            " FROM information_schema.columns WHERE table_schema = %s"
            " AND table_name = 'run_events' ORDER BY ordinal_position",
            (postgres_schema,),
        ).fetchall()
        constraints = conn.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = %s::regclass AND contype = 'u'",
            (f'"{postgres_schema}".run_events',),
        ).fetchall()
    assert columns == [
        ("id", "integer", None, "NO"),
        ("thread_id", "character varying", 64, "NO"),
        ("run_id", "character varying", 64, "NO"),
        ("user_id", "character varying", 64, "YES"),
        ("event_type", "character varying", 32, "NO"),
        ("category", "character varying", 16, "NO"),
        ("content", "text", None, "NO"),
        ("event_metadata", "json", None, "NO"),
        ("seq", "integer", None, "NO"),
        ("created_at", "timestamp with time zone", None, "NO"),
        ("source_key", "text", None, "YES"),  # journal-bridge's addition
    ]
    assert constraints == [("uq_events_thread_seq", "UNIQUE (thread_id, seq)")]


async def test_rows_are_stored_as_deerflow_stores_them(postgres_url, postgres_schema):
    async with open_store(_deerflow_url(postgres_url), schema=postgres_schema) as store:
        await store.put_batch(
            [
                event(content="plain text", metadata={"caller": "agent"}, user_id="u1"),
                event(content={"type": "ai", "content": "hi"}),
                event(content=[1, 2]),
                event(content='{"not": "json content"}', source_key="k"),
            ]
        )
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        rows = conn.execute(
            f'SELECT seq, content, event_metadata, user_id, source_key FROM "{postgres_schema}".run_events'
            " ORDER BY seq"
        ).fetchall()
    assert rows == [
        (1, "plain text", {"caller": "agent"}, "u1", None),
        (2, '{"type":"ai","content":"hi"}', {"content_is_json": True, "content_is_dict": True}, None, None),
        (3, "[1,2]", {"content_is_json": True}, None, None),
        (4, '{"not": "json content"}', {}, None, "k"),
    ]


async def test_rows_deerflow_writes_are_read_counted_and_continued(
    postgres_url, postgres_schema
):
    def delete_run(thread_id: str, run_id: str) -> None:
        conn.execute(
            f'DELETE FROM "{postgres_schema}".run_events WHERE thread_id = %s AND run_id = %s',
            (thread_id, run_id),
        )

    url = _deerflow_url(postgres_url)
    async with open_store(url, schema=postgres_schema) as store:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            await check_deerflow_rows_are_read_counted_and_continued(
                store,
                lambda *record, **fields: _deerflow_put(conn, postgres_schema, *record, **fields),
                delete_run,
            )


async def test_a_run_events_table_deerflow_created_is_adopted(postgres_url, postgres_schema):
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{postgres_schema}"')
        for statement in _DEERFLOW_TABLE:
            conn.execute(statement.format(events=f'"{postgres_schema}".run_events'))
        for n in range(3):
            _deerflow_put(conn, postgres_schema, "old", "r", LLM_AI_RESPONSE, MESSAGE, f"m{n}")
        _deerflow_put(conn, postgres_schema, "old", "r", RUN_END, "outputs", {"done": True})
    async with open_store(_deerflow_url(postgres_url), schema=postgres_schema) as store:
        assert await store.count_messages("old") == 3
        assert await store.last_seq("old") == 4
        (end,) = await store.list_events("old", "r", event_types=[RUN_END])
        assert end["content"] == {"done": True} and end["metadata"] == {}
        (stored,) = await store.put_batch([event(thread_id="old", source_key="k")])
        assert stored.seq == 5
        assert (await store.put_batch([event(thread_id="old", source_key="k")]))[0].seq == 5


async def test_the_journal_layout_and_the_deerflow_layout_share_a_schema(
    postgres_url, postgres_schema
):
    async with (
        open_store(_deerflow_url(postgres_url), schema=postgres_schema) as shared,
        open_store(postgres_url, schema=postgres_schema) as own,
    ):
        await shared.put_batch([event(content="in run_events")])
        await own.put_batch([event(content="in journal_events"), event()])
        assert [r["content"] for r in await shared.list_messages(THREAD)] == ["in run_events"]
        assert await own.count_messages(THREAD) == 2


async def test_markers_written_before_the_fields_of_deerflows_design_get_them(
    postgres_url, postgres_schema
):
    url = _deerflow_url(postgres_url)
    await write_old_markers(url, schema=postgres_schema)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'UPDATE "{postgres_schema}".journal_bridge_schema SET version = 1')
    async with open_store(url, schema=postgres_schema) as store:
        await check_markers_upgraded(store)
    # deer-flow reads the upgraded rows as it reads its own: the flags still say JSON.
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        (content, metadata), = conn.execute(
            f'SELECT content, event_metadata FROM "{postgres_schema}".run_events'
            " WHERE thread_id = %s AND seq = 3", (OLD_THREAD,)
        ).fetchall()
    assert metadata == {"content_is_json": True, "content_is_dict": True,
                        "replaced_count": 6, "preserved_count": 4, "condensed_count": 5}
    assert json.loads(content)["content"] == "The user asked about Paris twice."
