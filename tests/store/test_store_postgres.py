"""The conformance suite against a real PostgreSQL, one schema per test."""

from __future__ import annotations

import socket

import psycopg
import pytest

from journal_bridge.store import StoreError, StoreUnavailable, open_store
from journal_bridge.store.base import SCHEMA_VERSION
from journal_bridge.store.conformance import THREAD, SharedStorageConformance, event

pytestmark = pytest.mark.postgres


class TestPostgresRunEventStore(SharedStorageConformance):

    @pytest.fixture
    def store_url(self, postgres_url: str) -> str:
        return postgres_url

    @pytest.fixture
    def store_options(self, postgres_schema: str) -> dict:
        return {"schema": postgres_schema}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_a_closed_port_is_unavailable():
    url = f"postgresql://postgres@127.0.0.1:{_closed_port()}/postgres"
    with pytest.raises(StoreUnavailable, match="cannot connect to PostgreSQL"):
        async with open_store(url, connect_timeout=2):
            pass


async def test_postgres_scheme_alias_is_accepted(postgres_url, postgres_schema):
    url = postgres_url.replace("postgresql://", "postgres://", 1)
    async with open_store(url, schema=postgres_schema) as store:
        assert (await store.put_batch([event()]))[0].seq == 1


async def test_schemas_are_isolated(postgres_url, postgres_schema):
    async with open_store(postgres_url, schema=postgres_schema) as store:
        await store.put_batch([event()])
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        count = conn.execute(
            f'SELECT COUNT(*) FROM "{postgres_schema}".journal_events'
        ).fetchone()[0]
        version = conn.execute(
            f'SELECT version FROM "{postgres_schema}".journal_schema'
        ).fetchall()
    assert count == 1 and version == [(SCHEMA_VERSION,)]


async def test_content_and_metadata_are_jsonb(postgres_url, postgres_schema):
    async with open_store(postgres_url, schema=postgres_schema) as store:
        await store.put_batch([event(content={"a": [1, 2]}, metadata={"caller": "x"})])
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        row = conn.execute(
            f"SELECT content -> 'a' ->> 1, metadata ->> 'caller'"
            f' FROM "{postgres_schema}".journal_events'
        ).fetchone()
    assert row == ("2", "x")


async def test_a_newer_schema_version_is_refused(postgres_url, postgres_schema):
    async with open_store(postgres_url, schema=postgres_schema):
        pass
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            f'UPDATE "{postgres_schema}".journal_schema SET version = %s',
            (SCHEMA_VERSION + 1,),
        )
    with pytest.raises(StoreError, match="schema version"):
        async with open_store(postgres_url, schema=postgres_schema):
            pass


async def test_a_lost_server_makes_calls_unavailable(postgres_url, postgres_schema):
    async with open_store(postgres_url, schema=postgres_schema, max_size=1) as store:
        await store.put_batch([event()])
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = '' AND pid <> pg_backend_pid()"
                " AND datname = current_database()"
            )
        with pytest.raises(StoreUnavailable):
            await store.list_messages(THREAD)
        # the pool replaces the broken connection; the next call succeeds
        assert len(await store.list_messages(THREAD)) == 1


# The tables as journal-bridge created them at schema version 1, written out
# here so the upgrade is tested against the old layout, not today's first step.
_VERSION_1_SCHEMA = [
    "CREATE TABLE {s}.journal_schema (version integer NOT NULL)",
    """CREATE TABLE {s}.journal_events (
        thread_id text NOT NULL,
        seq bigint NOT NULL,
        run_id text NOT NULL,
        event_type varchar(32) NOT NULL,
        category varchar(16) NOT NULL,
        content jsonb NOT NULL,
        metadata jsonb NOT NULL,
        created_at timestamptz NOT NULL,
        source_key text,
        PRIMARY KEY (thread_id, seq)
    )""",
    "CREATE INDEX journal_events_category ON {s}.journal_events (thread_id, category, seq)",
    "CREATE INDEX journal_events_run ON {s}.journal_events (thread_id, run_id, seq)",
    (
        "CREATE UNIQUE INDEX journal_events_source_key"
        " ON {s}.journal_events (thread_id, source_key) WHERE source_key IS NOT NULL"
    ),
    """CREATE TABLE {s}.journal_threads (
        thread_id text PRIMARY KEY,
        last_seq bigint NOT NULL,
        event_count bigint NOT NULL,
        updated_at timestamptz NOT NULL,
        write_order bigint NOT NULL
    )""",
    "CREATE INDEX journal_threads_write_order ON {s}.journal_threads (write_order)",
    "CREATE SEQUENCE {s}.journal_thread_writes",
]


async def test_a_version_1_schema_is_upgraded_and_keeps_its_records(
    postgres_url, postgres_schema
):
    s = f'"{postgres_schema}"'
    rows = [
        (1, "r1", "run.start", "trace", '{"run": 1}', None),
        (2, "r1", "llm.human.input", "message", '"hi"', "human-1"),
        (3, "r1", "llm.ai.response", "message", '"hello"', "ai-1"),
        (4, "r2", "llm.ai.response", "message", '"again"', None),
        (5, "r2", "run.end", "outputs", "null", None),
    ]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {s}")
        for statement in _VERSION_1_SCHEMA:
            conn.execute(statement.format(s=s))
        conn.execute(f"INSERT INTO {s}.journal_schema VALUES (1)")
        with conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {s}.journal_events VALUES"
                " ('t', %s, %s, %s, %s, %s::jsonb, '{}', '2025-01-01T00:00:00Z', %s)",
                rows,
            )
        conn.execute(
            f"INSERT INTO {s}.journal_threads VALUES"
            f" ('t', 5, 5, now(), nextval('{s}.journal_thread_writes'))"
        )
    async with open_store(postgres_url, schema=postgres_schema) as store:
        assert await store.count_messages("t") == 3
        assert [r["content"] for r in await store.list_messages("t")] == [
            "hi",
            "hello",
            "again",
        ]
        assert await store.get_last_visible_ai_seq_by_run("t", {"r1", "r2"}) == {
            "r1": 3,
            "r2": 4,
        }
        (again,) = await store.put_batch([event(thread_id="t", source_key="ai-1")])
        assert again.seq == 3
        (new,) = await store.put_batch([event(thread_id="t", user_id="u")])
        assert new.seq == 6
        assert await store.count_messages("t") == 4
        assert await store.delete_by_run("t", "r1") == 3
        assert await store.count_messages("t") == 2
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        version = conn.execute(f"SELECT version FROM {s}.journal_schema").fetchall()
    assert version == [(SCHEMA_VERSION,)]
