"""The SQLite store in deer-flow's own `run_events` table (`?layout=deerflow`).

The events live in a table that is deer-flow's `run_events` as deer-flow
creates it on SQLite (see `journal_bridge.store.deerflow` for the row and how
content is stored), so a deer-flow Gateway on the same file reads what
journal-bridge journals, and journal-bridge reads what deer-flow writes. If
deer-flow created the table already, it is kept as it is.

`created_at` is written as deer-flow writes it on SQLite: the UTC time without
an offset (`2025-01-01 12:00:00.000000`); a time without an offset reads as UTC.

The per-thread counters are kept by triggers on `run_events`, so rows deer-flow
inserts or deletes count too.

journal-bridge appends in `BEGIN IMMEDIATE` transactions and takes the next seq
above every seq the thread has held. deer-flow reads the highest stored seq
before it takes the write lock, so when both append to one thread at once,
deer-flow's insert may meet the unique `(thread_id, seq)` constraint; records
are never lost or reordered. After a delete deer-flow may reuse seqs ours would not.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from typing import Any


from journal_bridge.model.envelope import RunEvent
from journal_bridge.store.deerflow import (
    COLUMNS,
    TABLES,
    decode_row,
    encode_row,
    run_events_statements,
)
from journal_bridge.store.marker_fields import sqlite_step
from journal_bridge.store.sqlite import SqliteRunEventStore, _decode_time

__all__ = ["DeerflowSqliteRunEventStore"]

# The ISO-8601 UTC time of `value` (a SQLite time value), to microseconds.
_ISO_UTC = "strftime('%Y-%m-%dT%H:%M:%f000+00:00', {value})"

# Position i brings a version-i schema to version i + 1 (see sqlite.MIGRATIONS).
MIGRATIONS: list[tuple[str, ...]] = [
    (
        "CREATE TABLE IF NOT EXISTS {version} (version INTEGER NOT NULL)",
        # deer-flow's RunEventRow as SQLAlchemy creates it on SQLite.
        *run_events_statements(id_type="INTEGER", json_type="JSON", time_type="DATETIME"),
        """CREATE TABLE IF NOT EXISTS {threads} (
            thread_id TEXT PRIMARY KEY,
            last_seq INTEGER NOT NULL,
            event_count INTEGER NOT NULL,
            message_count INTEGER NOT NULL,
            updated_at TEXT NOT NULL,
            write_order INTEGER NOT NULL
        )""",
        (
            "CREATE INDEX IF NOT EXISTS journal_bridge_threads_write_order"
            " ON {threads} (write_order)"
        ),
        # Threads deer-flow journaled before: counted once here, by the triggers after.
        f"""INSERT OR IGNORE INTO {{threads}}
            (thread_id, last_seq, event_count, message_count, updated_at, write_order)
            SELECT thread_id, MAX(seq), COUNT(*), SUM(category = 'message'),
                COALESCE({_ISO_UTC.format(value="MAX(created_at)")},
                    {_ISO_UTC.format(value="'now'")}),
                ROW_NUMBER() OVER (ORDER BY MAX(created_at))
            FROM {{events}} GROUP BY thread_id""",
        "DROP TRIGGER IF EXISTS journal_bridge_count_insert",
        f"""CREATE TRIGGER journal_bridge_count_insert AFTER INSERT ON {{events}}
        BEGIN
            INSERT INTO {{threads}}
                (thread_id, last_seq, event_count, message_count, updated_at, write_order)
            VALUES (NEW.thread_id, NEW.seq, 1, NEW.category = 'message',
                {_ISO_UTC.format(value="'now'")},
                (SELECT COALESCE(MAX(write_order), 0) + 1 FROM {{threads}}))
            ON CONFLICT (thread_id) DO UPDATE SET
                last_seq = MAX(last_seq, excluded.last_seq),
                event_count = event_count + 1,
                message_count = message_count + excluded.message_count,
                updated_at = excluded.updated_at,
                write_order = excluded.write_order;
        END""",
        "DROP TRIGGER IF EXISTS journal_bridge_count_delete",
        """CREATE TRIGGER journal_bridge_count_delete AFTER DELETE ON {events}
        BEGIN
            UPDATE {threads} SET event_count = event_count - 1,
                message_count = message_count - (OLD.category = 'message')
            WHERE thread_id = OLD.thread_id;
        END""",
    ),
    # Markers written before them get the fields `store.marker_fields` describes.
    sqlite_step(metadata="event_metadata", flagged=True),
]


class DeerflowSqliteRunEventStore(SqliteRunEventStore):
    """A `SqliteRunEventStore` in deer-flow's `run_events` table
    (`sqlite:///path.db?layout=deerflow`)."""

    tables = TABLES
    migrations = MIGRATIONS
    columns = COLUMNS
    metadata_column = "event_metadata"
    # A str content is the text itself; a dict's text is its `content`.
    message_text = (
        "CASE WHEN json_extract(e.event_metadata, '$.content_is_dict')"
        " THEN CASE WHEN json_valid(e.content) THEN json_extract(e.content, '$.content') END"
        " WHEN json_extract(e.event_metadata, '$.content_is_json') THEN NULL"
        " ELSE e.content END"
    )

    def _decode(self, row: tuple[Any, ...]) -> RunEvent:
        return decode_row(row, json.loads(row[6]) or {}, _decode_time(row[7]))

    def _insert_rows(self, raw: sqlite3.Connection, rows: list[tuple[object, ...]]) -> None:
        raw.executemany(self._insert_sql, (encode_row(row) for row in rows))

    @staticmethod
    def _encode_time(value: datetime) -> str:
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")

    def _count_appended(self, raw: object, counters: object) -> None:
        pass  # the trigger on run_events counts every insert

    async def _count_deleted(self, conn: object, thread_id: str, deleted: int, messages: int) -> None:
        pass  # the trigger on run_events counts every delete
