"""deer-flow's `run_events` rows, shared by the stores that keep the journal in
that table (`?layout=deerflow` on PostgreSQL and on SQLite).

A row is deer-flow's `RunEventRow`: `id, thread_id, run_id, user_id,
event_type, category, content text, event_metadata json, seq, created_at`,
unique `(thread_id, seq)`. journal-bridge adds a nullable `source_key` column
(its idempotency key; deer-flow never sets it) and its own `journal_bridge_*`
tables, which deer-flow does not know.

Content is stored the way deer-flow stores it: a str as the text itself, any
other value as its JSON text with `content_is_json` (and `content_is_dict` for
an object) set in the metadata. Those two keys are taken back out when a record
is read, so they are not available to callers as metadata of their own.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from journal_bridge.model.envelope import RunEvent, dumps
from journal_bridge.store import base

__all__ = ["COLUMNS", "TABLES", "decode_row", "encode_row", "run_events_statements"]

# Metadata keys deer-flow uses to mark content stored as JSON text.
_JSON_FLAGS = ("content_is_json", "content_is_dict")

# Selected and inserted in the order of `plan_append` rows.
COLUMNS = (
    "thread_id, seq, run_id, event_type, category, content, event_metadata, created_at,"
    " source_key, user_id"
)

# deer-flow's events table, and journal-bridge's own tables beside it.
TABLES = {
    "events": "run_events",
    "threads": "journal_bridge_threads",
    "version": "journal_bridge_schema",
}


def run_events_statements(*, id_type: str, json_type: str, time_type: str) -> tuple[str, ...]:
    """deer-flow's table and indexes as deer-flow creates them (with the
    dialect's types for its id, JSON and timestamp columns), then journal-bridge's
    `source_key` column and its unique index. `{events}` is the table's name."""
    return (
        f"""CREATE TABLE IF NOT EXISTS {{events}} (
            id {id_type} NOT NULL,
            thread_id VARCHAR(64) NOT NULL,
            run_id VARCHAR(64) NOT NULL,
            user_id VARCHAR(64),
            event_type VARCHAR(32) NOT NULL,
            category VARCHAR(16) NOT NULL,
            content TEXT NOT NULL,
            event_metadata {json_type} NOT NULL,
            seq INTEGER NOT NULL,
            created_at {time_type} NOT NULL,
            PRIMARY KEY (id),
            CONSTRAINT uq_events_thread_seq UNIQUE (thread_id, seq)
        )""",
        "CREATE INDEX IF NOT EXISTS ix_events_run ON {events} (thread_id, run_id, seq)",
        (
            "CREATE INDEX IF NOT EXISTS ix_events_thread_cat_seq"
            " ON {events} (thread_id, category, seq)"
        ),
        "CREATE INDEX IF NOT EXISTS ix_run_events_user_id ON {events} (user_id)",
        "ALTER TABLE {events} ADD COLUMN IF NOT EXISTS source_key TEXT",
        (
            "CREATE UNIQUE INDEX IF NOT EXISTS journal_bridge_run_events_source_key"
            " ON {events} (thread_id, source_key) WHERE source_key IS NOT NULL"
        ),
    )


def encode_row(row: tuple[Any, ...]) -> tuple[object, ...]:
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


def decode_row(
    row: tuple[Any, ...], metadata: dict[str, object], created_at: datetime
) -> RunEvent:
    """A row of `COLUMNS` as a record, given its metadata (a dict the caller
    owns) and its time, as the driver reads them."""
    content = row[5]
    flags = [metadata.pop(flag, None) for flag in _JSON_FLAGS]
    if any(flags):
        try:
            content = json.loads(content)
        except ValueError:
            pass  # not JSON after all: the text is the content
    return base.event_from_row(row, content=content, metadata=metadata, created_at=created_at)
