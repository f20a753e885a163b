"""journal-bridge's own tables (`?layout=journal`), described once for the SQL
stores (PostgreSQL and SQLite), which differ only in their column types.

`journal_events` holds the records, one row each, unique `(thread_id, seq)` and
unique `(thread_id, source_key)` where a source key is set. `journal_threads`
holds one row per thread: the seq counter (never reused while the thread
exists) and what the thread index needs without scanning events.
`journal_schema` records how many migration steps have run.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["COLUMNS", "TABLES", "ColumnTypes", "migrations"]

# Selected and inserted in the order of `plan_append` rows.
COLUMNS = (
    "thread_id, seq, run_id, event_type, category, content, metadata, created_at,"
    " source_key, user_id"
)

# The tables' names, the `{name}` placeholders of `migrations`.
TABLES = {
    "events": "journal_events",
    "threads": "journal_threads",
    "version": "journal_schema",
}


@dataclass(frozen=True)
class ColumnTypes:
    """A dialect's types for the journal's columns."""

    # The schema version.
    integer: str
    # Seqs and counters.
    counter: str
    # Ids and keys.
    text: str
    # At most 32 characters (checked before a write).
    event_type: str
    # At most 16 characters (checked before a write).
    category: str
    json: str
    # A timezone-aware time.
    time: str


def migrations(types: ColumnTypes) -> list[tuple[str, ...]]:
    """The statements of each schema version in the dialect of `types`.

    Position i holds the statements that bring a version-i database to version
    i + 1. Table names are filled in per store (`{events}`, `{threads}`,
    `{version}`). Never edit a released step: append a new one.
    """
    t = types
    return [
        (
            f"CREATE TABLE IF NOT EXISTS {{version}} (version {t.integer} NOT NULL)",
            f"""CREATE TABLE IF NOT EXISTS {{events}} (
            thread_id {t.text} NOT NULL,
            seq {t.counter} NOT NULL,
            run_id {t.text} NOT NULL,
            event_type {t.event_type} NOT NULL,
            category {t.category} NOT NULL,
            content {t.json} NOT NULL,
            metadata {t.json} NOT NULL,
            created_at {t.time} NOT NULL,
            source_key {t.text},
            PRIMARY KEY (thread_id, seq)
        )""",
            (
                "CREATE INDEX IF NOT EXISTS journal_events_category"
                " ON {events} (thread_id, category, seq)"
            ),
            "CREATE INDEX IF NOT EXISTS journal_events_run ON {events} (thread_id, run_id, seq)",
            (
                "CREATE UNIQUE INDEX IF NOT EXISTS journal_events_source_key"
                " ON {events} (thread_id, source_key) WHERE source_key IS NOT NULL"
            ),
            f"""CREATE TABLE IF NOT EXISTS {{threads}} (
            thread_id {t.text} PRIMARY KEY,
            last_seq {t.counter} NOT NULL,
            event_count {t.counter} NOT NULL,
            updated_at {t.time} NOT NULL,
            write_order {t.counter} NOT NULL
        )""",
            "CREATE INDEX IF NOT EXISTS journal_threads_write_order ON {threads} (write_order)",
        ),
        (
            # Who wrote a record, for user-scoped reads and deletes.
            f"ALTER TABLE {{events}} ADD COLUMN IF NOT EXISTS user_id {t.text}",
            # count_messages reads a counter instead of scanning the thread.
            (
                "ALTER TABLE {threads} ADD COLUMN IF NOT EXISTS"
                f" message_count {t.counter} NOT NULL DEFAULT 0"
            ),
            """UPDATE {threads} SET message_count = (
            SELECT COUNT(*) FROM {events}
            WHERE {events}.thread_id = {threads}.thread_id
            AND {events}.category = 'message'
        )""",
        ),
    ]
