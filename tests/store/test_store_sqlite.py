"""The conformance suite against a real SQLite file, plus what only SQLite has."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from journal_bridge.store import StoreError, StoreUnavailable, open_store
from journal_bridge.store.base import SCHEMA_VERSION
from journal_bridge.store.conformance import THREAD, SharedStorageConformance, event


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


# The tables as journal-bridge created them at schema version 1, written out
# here so the upgrade is tested against the old layout, not today's first step.
_VERSION_1_SCHEMA = [
    "CREATE TABLE journal_schema (version INTEGER NOT NULL)",
    """CREATE TABLE journal_events (
        thread_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        run_id TEXT NOT NULL,
        event_type TEXT NOT NULL,
        category TEXT NOT NULL,
        content TEXT NOT NULL,
        metadata TEXT NOT NULL,
        created_at TEXT NOT NULL,
        source_key TEXT,
        PRIMARY KEY (thread_id, seq)
    )""",
    "CREATE INDEX journal_events_category ON journal_events (thread_id, category, seq)",
    "CREATE INDEX journal_events_run ON journal_events (thread_id, run_id, seq)",
    (
        "CREATE UNIQUE INDEX journal_events_source_key"
        " ON journal_events (thread_id, source_key) WHERE source_key IS NOT NULL"
    ),
    """CREATE TABLE journal_threads (
        thread_id TEXT PRIMARY KEY,
        last_seq INTEGER NOT NULL,
        event_count INTEGER NOT NULL,
        updated_at TEXT NOT NULL,
        write_order INTEGER NOT NULL
    )""",
    "CREATE INDEX journal_threads_write_order ON journal_threads (write_order)",
]


def _version_1_file(path: Path) -> None:
    """A journal as version 1 left it: thread `t` with 3 messages among 5 events."""
    rows = [
        (1, "r1", "run.start", "trace", '{"run":1}', None),
        (2, "r1", "llm.human.input", "message", '"hi"', "human-1"),
        (3, "r1", "llm.ai.response", "message", '"hello"', "ai-1"),
        (4, "r2", "llm.ai.response", "message", '"again"', None),
        (5, "r2", "run.end", "outputs", "null", None),
    ]
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        for statement in _VERSION_1_SCHEMA:
            conn.execute(statement)
        conn.execute("INSERT INTO journal_schema (version) VALUES (1)")
        conn.executemany(
            "INSERT INTO journal_events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                ("t", seq, run, etype, cat, content, "{}", "2025-01-01T00:00:00+00:00", key)
                for seq, run, etype, cat, content, key in rows
            ],
        )
        conn.execute(
            "INSERT INTO journal_threads VALUES ('t', 5, 5, '2025-01-01T00:00:00+00:00', 1)"
        )
    conn.close()


async def test_a_version_1_file_is_upgraded_and_keeps_its_records(tmp_path):
    path = tmp_path / "events.db"
    _version_1_file(path)
    async with open_store(f"sqlite:///{path}") as store:
        assert await store.count_messages("t") == 3
        assert [r["content"] for r in await store.list_messages("t")] == [
            "hi",
            "hello",
            "again",
        ]
        assert all("user_id" not in r for r in await store.list_events("t", "r1"))
        assert await store.get_last_visible_ai_seq_by_run("t", {"r1", "r2"}) == {
            "r1": 3,
            "r2": 4,
        }
        # appends continue the old sequence and keep the new counter
        (again,) = await store.put_batch([event(thread_id="t", source_key="ai-1")])
        assert again.seq == 3
        (new,) = await store.put_batch([event(thread_id="t", user_id="u")])
        assert new.seq == 6
        assert await store.count_messages("t") == 4
        assert await store.delete_by_run("t", "r1") == 3
        assert await store.count_messages("t") == 2
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
        assert await store.count_messages("t") == 3
        assert await store.last_seq("t") == 5
