"""The conformance suite against a real PostgreSQL, one schema per test."""

from __future__ import annotations

import socket

import psycopg
import pytest

from journal_bridge.store import StoreError, StoreUnavailable, open_store
from journal_bridge.store.base import SCHEMA_VERSION
from journal_bridge.store.conformance import THREAD, SharedStorageConformance, event
from journal_bridge.store.postgres import MIGRATIONS, PostgresRunEventStore
from tests.unit.store.old_markers import check_markers_upgraded, write_old_markers
from tests.unit.store.version_1_journal import (
    CREATED_AT,
    ROWS,
    check_upgraded,
    version_1_statements,
)
from tests.unit.store.version_1_journal import THREAD as V1_THREAD

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
    # Only this store's connections are cut: other tests may be using the server.
    name = f"lost-{postgres_schema}"
    url = postgres_url + ("&" if "?" in postgres_url else "?") + f"application_name={name}"
    async with open_store(url, schema=postgres_schema, max_size=1) as store:
        await store.put_batch([event()])
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (name,))
        with pytest.raises(StoreUnavailable):
            await store.list_messages(THREAD)
        # the pool replaces the broken connection; the next call succeeds
        assert len(await store.list_messages(THREAD)) == 1


async def test_a_version_1_schema_is_upgraded_and_keeps_its_records(
    postgres_url, postgres_schema
):
    s = f'"{postgres_schema}"'
    tables = {key: f"{s}.{name}" for key, name in PostgresRunEventStore.tables.items()}
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {s}")
        for statement in version_1_statements(MIGRATIONS, tables):
            conn.execute(statement)
        conn.execute(f"INSERT INTO {s}.journal_schema VALUES (1)")
        with conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {s}.journal_events VALUES"
                " (%s, %s, %s, %s, %s, %s::jsonb, '{}', %s, %s)",
                [
                    (V1_THREAD, seq, run, etype, cat, content, CREATED_AT, key)
                    for seq, run, etype, cat, content, key in ROWS
                ],
            )
        conn.execute(
            f"INSERT INTO {s}.journal_threads VALUES"
            f" (%s, 5, 5, now(), nextval('{s}.journal_thread_writes'))",
            (V1_THREAD,),
        )
    async with open_store(postgres_url, schema=postgres_schema) as store:
        await check_upgraded(store)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        version = conn.execute(f"SELECT version FROM {s}.journal_schema").fetchall()
    assert version == [(SCHEMA_VERSION,)]


async def test_markers_of_a_version_2_schema_get_the_fields_of_deerflows_design(
    postgres_url, postgres_schema
):
    await write_old_markers(postgres_url, schema=postgres_schema)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'UPDATE "{postgres_schema}".journal_schema SET version = 2')
    async with open_store(postgres_url, schema=postgres_schema) as store:
        await check_markers_upgraded(store)
