"""The PostgreSQL store in deer-flow's own `run_events` table (`?layout=deerflow`).

The events live in a table that is deer-flow's `run_events` column for column
(`id, thread_id, run_id, user_id, event_type, category, content text,
event_metadata json, seq, created_at`, unique `(thread_id, seq)`), so deer-flow's
Gateway reads what journal-bridge journals, and journal-bridge reads what
deer-flow writes. If deer-flow created the table already, it is kept as it is.

What journal-bridge adds is invisible to deer-flow: a nullable `source_key`
column (the idempotency key; deer-flow never sets it) and its own tables named
`journal_bridge_*` (schema version, per-thread counters). The counters are kept
by a trigger on `run_events`, so rows deer-flow inserts or deletes count too.

Both write under deer-flow's per-thread advisory lock and take the next seq
above every seq the thread has held. deer-flow assigns seq from the highest seq
still stored, so after a delete its own writers may reuse seqs ours would not.

Content is stored the way deer-flow stores it: a str as the text itself, any
other value as its JSON text with `content_is_json` (and `content_is_dict` for
an object) set in the metadata. Those two keys are taken back out when a record
is read, so they are not available to callers as metadata of their own.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import psycopg

from journal_bridge.events import RunEvent, dumps
from journal_bridge.store.postgres import PostgresRunEventStore, _copy_rows

__all__ = ["DeerflowPostgresRunEventStore"]

# Metadata keys deer-flow uses to mark content stored as JSON text.
_JSON_FLAGS = ("content_is_json", "content_is_dict")

_COLUMNS = (
    "thread_id, seq, run_id, event_type, category, content, event_metadata, created_at,"
    " source_key, user_id"
)

# Position i brings a version-i schema to version i + 1 (see postgres.MIGRATIONS).
MIGRATIONS: list[tuple[str, ...]] = [
    (
        "CREATE TABLE IF NOT EXISTS {version} (version integer NOT NULL)",
        """CREATE TABLE IF NOT EXISTS {events} (
            id serial NOT NULL,
            thread_id varchar(64) NOT NULL,
            run_id varchar(64) NOT NULL,
            user_id varchar(64),
            event_type varchar(32) NOT NULL,
            category varchar(16) NOT NULL,
            content text NOT NULL,
            event_metadata json NOT NULL,
            seq integer NOT NULL,
            created_at timestamp with time zone NOT NULL,
            PRIMARY KEY (id),
            CONSTRAINT uq_events_thread_seq UNIQUE (thread_id, seq)
        )""",
        "CREATE INDEX IF NOT EXISTS ix_events_run ON {events} (thread_id, run_id, seq)",
        (
            "CREATE INDEX IF NOT EXISTS ix_events_thread_cat_seq"
            " ON {events} (thread_id, category, seq)"
        ),
        "CREATE INDEX IF NOT EXISTS ix_run_events_user_id ON {events} (user_id)",
        "ALTER TABLE {events} ADD COLUMN IF NOT EXISTS source_key text",
        (
            "CREATE UNIQUE INDEX IF NOT EXISTS journal_bridge_run_events_source_key"
            " ON {events} (thread_id, source_key) WHERE source_key IS NOT NULL"
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
]


def _encode_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A `plan_append` row with its content and metadata as deer-flow stores them."""
    content_json, metadata_json = row[5], row[6]
    # The JSON text of a str, and only of a str, starts with a quote.
    if content_json.startswith('"'):
        content = json.loads(content_json)
    else:
        content = content_json
        metadata = json.loads(metadata_json)
        metadata["content_is_json"] = True
        if content_json.startswith("{"):
            metadata["content_is_dict"] = True
        metadata_json = dumps(metadata)
    return (*row[:5], content, metadata_json, *row[7:])


class DeerflowPostgresRunEventStore(PostgresRunEventStore):
    """A `PostgresRunEventStore` in deer-flow's `run_events` table
    (`postgresql://...?layout=deerflow`)."""

    tables: ClassVar[dict[str, str]] = {
        "events": "run_events",
        "threads": "journal_bridge_threads",
        "version": "journal_bridge_schema",
        "writes": "journal_bridge_thread_writes",
        "count_function": "journal_bridge_count_run_events",
    }
    migrations: ClassVar[list[tuple[str, ...]]] = MIGRATIONS
    columns = _COLUMNS
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
        content, metadata = row[5], dict(row[6] or {})
        flags = [metadata.pop(flag, None) for flag in _JSON_FLAGS]
        if any(flags):
            try:
                content = json.loads(content)
            except ValueError:
                pass  # not JSON after all: the text is the content
        return RunEvent(
            thread_id=row[0],
            seq=row[1],
            run_id=row[2],
            event_type=row[3],
            category=row[4],
            content=content,
            metadata=metadata,
            created_at=row[7],
            source_key=row[8],
            user_id=row[9],
        )

    async def _insert_rows(
        self, cursor: psycopg.AsyncCursor[Any], rows: list[tuple[Any, ...]]
    ) -> None:
        await _copy_rows(cursor, self._events, _COLUMNS, (_encode_row(row) for row in rows))

    async def _count_appended(self, cursor: Any, counters: Any) -> None:
        pass  # the trigger on run_events counts every insert

    async def _count_deleted(self, conn: Any, thread_id: str, deleted: int, messages: int) -> None:
        pass  # the trigger on run_events counts every delete
