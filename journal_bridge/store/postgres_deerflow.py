"""The PostgreSQL store in deer-flow's own `run_events` table (`?layout=deerflow`).

The events live in a table that is deer-flow's `run_events` column for column
(see `journal_bridge.store.deerflow` for the row and how content is stored), so
deer-flow's Gateway reads what journal-bridge journals, and journal-bridge
reads what deer-flow writes. If deer-flow created the table already, it is kept
as it is.

The per-thread counters are kept by a trigger on `run_events`, so rows
deer-flow inserts or deletes count too.

Both write under deer-flow's per-thread advisory lock and take the next seq
above every seq the thread has held. deer-flow assigns seq from the highest seq
still stored, so after a delete its own writers may reuse seqs ours would not.
"""

from __future__ import annotations

from typing import Any, ClassVar

import psycopg

from journal_bridge.model.envelope import RunEvent
from journal_bridge.store.deerflow import (
    COLUMNS,
    TABLES,
    decode_row,
    encode_row,
    run_events_statements,
)
from journal_bridge.store.marker_fields import postgres_step
from journal_bridge.store.postgres import PostgresRunEventStore, _copy_rows

__all__ = ["DeerflowPostgresRunEventStore"]

# Position i brings a version-i schema to version i + 1 (see postgres.MIGRATIONS).
MIGRATIONS: list[tuple[str, ...]] = [
    (
        "CREATE TABLE IF NOT EXISTS {version} (version integer NOT NULL)",
        *run_events_statements(
            id_type="serial", json_type="json", time_type="timestamp with time zone"
        ),
        """CREATE TABLE IF NOT EXISTS {threads} (
            thread_id text PRIMARY KEY,
            last_seq bigint NOT NULL,
            event_count bigint NOT NULL,
            message_count bigint NOT NULL,
            updated_at timestamptz NOT NULL,
            write_order bigint NOT NULL
        )""",
        (
            "CREATE INDEX IF NOT EXISTS journal_bridge_threads_write_order"
            " ON {threads} (write_order)"
        ),
        "CREATE SEQUENCE IF NOT EXISTS {writes}",
        # Threads deer-flow journaled before: counted once here, by the trigger after.
        """INSERT INTO {threads}
            (thread_id, last_seq, event_count, message_count, updated_at, write_order)
            SELECT thread_id, MAX(seq), COUNT(*),
                COUNT(*) FILTER (WHERE category = 'message'), MAX(created_at),
                nextval('{writes}')
            FROM {events} GROUP BY thread_id
            ON CONFLICT (thread_id) DO NOTHING""",
        """CREATE OR REPLACE FUNCTION {count_function}() RETURNS trigger
            LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                INSERT INTO {threads} AS t
                    (thread_id, last_seq, event_count, message_count, updated_at, write_order)
                VALUES (NEW.thread_id, NEW.seq, 1, (NEW.category = 'message')::int,
                    clock_timestamp(), nextval('{writes}'))
                ON CONFLICT (thread_id) DO UPDATE SET
                    last_seq = GREATEST(t.last_seq, EXCLUDED.last_seq),
                    event_count = t.event_count + 1,
                    message_count = t.message_count + EXCLUDED.message_count,
                    updated_at = EXCLUDED.updated_at,
                    write_order = EXCLUDED.write_order;
                RETURN NEW;
            END IF;
            UPDATE {threads} SET event_count = event_count - 1,
                message_count = message_count - (OLD.category = 'message')::int
            WHERE thread_id = OLD.thread_id;
            RETURN OLD;
        END
        $$""",
        "DROP TRIGGER IF EXISTS journal_bridge_counts ON {events}",
        (
            "CREATE TRIGGER journal_bridge_counts AFTER INSERT OR DELETE ON {events}"
            " FOR EACH ROW EXECUTE FUNCTION {count_function}()"
        ),
    ),
    # Markers written before them get the fields `store.marker_fields` describes.
    postgres_step(metadata="event_metadata", in_text=True),
]


class DeerflowPostgresRunEventStore(PostgresRunEventStore):
    """A `PostgresRunEventStore` in deer-flow's `run_events` table
    (`postgresql://...?layout=deerflow`)."""

    tables: ClassVar[dict[str, str]] = {
        **TABLES,
        "writes": "journal_bridge_thread_writes",
        "count_function": "journal_bridge_count_run_events",
    }
    migrations = MIGRATIONS
    columns = COLUMNS
    task_id_match = (
        "(json_typeof(event_metadata -> 'task_id') = 'string'"
        " AND event_metadata ->> 'task_id' = %s)"
    )
    caller_text = "event_metadata ->> 'caller'"

    async def _lock_threads(self, conn: psycopg.AsyncConnection, thread_ids: Any) -> None:
        # deer-flow's writers take exactly this lock before reading the thread's seq.
        for thread_id in sorted(thread_ids):
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s::text)::bigint)", (thread_id,)
            )

    def _decode(self, row: tuple[Any, ...]) -> RunEvent:
        return decode_row(row, dict(row[6] or {}), row[7])

    async def _insert_rows(
        self, cursor: psycopg.AsyncCursor[object], rows: list[tuple[object, ...]]
    ) -> None:
        await _copy_rows(cursor, self._events, COLUMNS, (encode_row(row) for row in rows))

    async def _count_appended(self, cursor: object, counters: object) -> None:
        pass  # the trigger on run_events counts every insert

    async def _count_deleted(self, conn: object, thread_id: str, deleted: int, messages: int) -> None:
        pass  # the trigger on run_events counts every delete
