"""The conformance suite against a real SQLite file, plus what only SQLite has."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from journal_bridge.store import StoreError, StoreUnavailable, open_store
from journal_bridge.store.base import SCHEMA_VERSION
from journal_bridge.store.conformance import THREAD, SharedStorageConformance, event
from journal_bridge.store.sqlite import MIGRATIONS, SqliteRunEventStore
from tests.unit.store.old_markers import check_markers_upgraded, write_old_markers
from tests.unit.store.version_1_journal import (
    CREATED_AT,
    ROWS,
    check_upgraded,
    version_1_statements,
)
from tests.unit.store.version_1_journal import THREAD as V1_THREAD


class TestSqliteRunEventStore(SharedStorageConformance):

    @pytest.fixture
    def store_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'events.db'}"


async def test_a_path_in_a_missing_directory_is_unavailable(tmp_path):
    url = f"sqlite:///{tmp_path / 'missing' / 'events.db'}"
    with pytest.raises(StoreUnavailable, match="cannot open SQLite journal"):
        async with open_store(url):
            pass


async def test_the_file_is_in_wal_mode_with_a_schema_version(tmp_path):
    path = tmp_path / "events.db"
    async with open_store(f"sqlite:///{path}") as store:
        await store.put_batch([event()])
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT version FROM journal_schema").fetchall() == [
            (SCHEMA_VERSION,)
        ]


async def test_records_survive_reopening_the_file(tmp_path):
    url = f"sqlite:///{tmp_path / 'events.db'}"
    async with open_store(url) as store:
        stored = await store.put_batch([event(content={"a": 1}, source_key="k")])
    async with open_store(url) as store:
        assert [r.to_event() for r in await store.list_messages(THREAD)] == stored
        assert (await store.put_batch([event(source_key="k")])) == stored
        assert (await store.put_batch([event()]))[0].seq == 2


async def test_a_newer_schema_version_is_refused(tmp_path):
    path = tmp_path / "events.db"
    async with open_store(f"sqlite:///{path}"):
        pass
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE journal_schema SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match="schema version"):
        async with open_store(f"sqlite:///{path}"):
            pass


async def test_a_relative_url_is_relative_to_the_working_directory(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    async with open_store("sqlite:///relative.db") as store:
        await store.put_batch([event()])
    assert (tmp_path / "relative.db").exists()


async def test_tables_vanishing_under_a_running_store_is_unavailable(tmp_path):
    path = tmp_path / "events.db"
    async with open_store(f"sqlite:///{path}") as store:
        await store.put_batch([event()])
        with sqlite3.connect(path) as conn:
            for table in ("journal_events", "journal_threads", "journal_schema"):
                conn.execute(f"DROP TABLE {table}")
        with pytest.raises(StoreUnavailable, match="no such table"):
            await store.list_messages(THREAD)
        with pytest.raises(StoreUnavailable, match="no such table"):
            await store.put_batch([event()])


async def test_a_locked_file_is_unavailable(tmp_path):
    path = tmp_path / "events.db"
    url = f"sqlite:///{path}"
    async with open_store(url):
        pass
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        async with open_store(url, busy_timeout=0.2) as store:
            with pytest.raises(StoreUnavailable, match="locked"):
                await store.put_batch([event()])
            assert await store.list_messages(THREAD) == []  # reads are not blocked
    finally:
        holder.execute("ROLLBACK")
        holder.close()


async def test_appends_cancelled_at_any_point_leave_the_store_writable(tmp_path):
    import asyncio

    async with open_store(f"sqlite:///{tmp_path / 'events.db'}") as store:
        cancelled = 0
        for round_ in range(40):
            task = asyncio.create_task(store.put_batch([event(content=[round_, i]) for i in range(3)]))
            # Let the append get a varying distance in before it is cancelled.
            for _ in range(round_ % 8):
                await asyncio.sleep(0)
            if task.cancel():
                cancelled += 1
            await asyncio.gather(task, return_exceptions=True)
            stored = await store.put_batch([event(content=["after", round_])])
            assert stored[0].seq == await store.last_seq(THREAD)
        assert cancelled > 0
        seqs = [e.seq for e in await store.list_messages(THREAD, limit=1000)]
        assert seqs == list(range(1, len(seqs) + 1))


def _version_1_file(path: Path) -> None:
    """A journal as version 1 left it (see `version_1_journal`)."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        for statement in version_1_statements(MIGRATIONS, SqliteRunEventStore.tables):
            conn.execute(statement)
        conn.execute("INSERT INTO journal_schema (version) VALUES (1)")
        conn.executemany(
            "INSERT INTO journal_events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (V1_THREAD, seq, run, etype, cat, content, "{}", CREATED_AT, key)
                for seq, run, etype, cat, content, key in ROWS
            ],
        )
        conn.execute(
            "INSERT INTO journal_threads VALUES (?, 5, 5, ?, 1)", (V1_THREAD, CREATED_AT)
        )
    conn.close()


async def test_a_version_1_file_is_upgraded_and_keeps_its_records(tmp_path):
    path = tmp_path / "events.db"
    _version_1_file(path)
    async with open_store(f"sqlite:///{path}") as store:
        await check_upgraded(store)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM journal_schema").fetchall() == [
            (SCHEMA_VERSION,)
        ]
    conn.close()


async def test_an_upgraded_file_opens_again_without_changes(tmp_path):
    path = tmp_path / "events.db"
    _version_1_file(path)
    async with open_store(f"sqlite:///{path}"):
        pass
    async with open_store(f"sqlite:///{path}") as store:
        assert await store.count_messages(V1_THREAD) == 3
        assert await store.last_seq(V1_THREAD) == 5


async def test_the_journal_caches_a_bounded_number_of_pages_as_the_file_grows(tmp_path, sqlite_heap):
    # Left at SQLite's default, each of the store's two connections keeps
    # about 2 MiB of pages once the file is larger: here the writer touches
    # every thread's index leaves and the reader every thread's pages.
    heap = sqlite_heap
    path = tmp_path / "events.db"
    async with open_store(f"sqlite:///{path}") as store:
        await store.put_batch([event()])
        before = heap()
        threads = [f"grown-{n}" for n in range(300)]
        for turn in range(6):
            await store.put_batch(
                [event(thread_id=t, run_id=f"run-{turn}", content="x" * 2000, source_key=f"{t}:{turn}") for t in threads]
            )
        for t in threads:
            assert len(await store.list_messages(t, limit=10)) == 6
        grown = heap() - before
        size = sum(f.stat().st_size for f in tmp_path.glob("events.db*"))
    assert size > 4 * 2**20
    assert grown < 1.25 * 2**20, f"SQLite holds {grown / 2**20:.2f} MiB more for a {size / 2**20:.1f} MiB journal"


async def test_markers_of_a_version_2_file_get_the_fields_of_deerflows_design(tmp_path):
    path = tmp_path / "events.db"
    await write_old_markers(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE journal_schema SET version = 2")
    conn.close()
    async with open_store(f"sqlite:///{path}") as store:
        await check_markers_upgraded(store)
