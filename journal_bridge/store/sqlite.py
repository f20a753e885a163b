"""SQLite run event store: the embedded default, one file, WAL mode, aiosqlite.

Appends run in `BEGIN IMMEDIATE` transactions, so several processes can share
one file: the write lock is taken before the thread's counter row is read, and
the busy timeout makes a writer wait for it instead of failing. Reads use a
separate connection and only ever see committed batches (WAL snapshots).

`content` and `metadata` are JSON text; a str content is stored as a JSON string,
so it reads back as a str and never as the JSON it might look like.
"""

from __future__ import annotations

import asyncio
import functools
import contextlib
import json
import re
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import parse_qs, urlsplit

import aiosqlite

from journal_bridge.model.envelope import MESSAGE, PreparedEvent, RunEvent
from journal_bridge.model.errors import InvalidStoreUrl
from journal_bridge.model.shapes import StoredThread
from journal_bridge.store.base import (
    MIDDLEWARE_CALLER_PREFIX,
    SCHEMA_VERSION,
    VISIBLE_AI_EVENT_TYPES,
    StoreError,
    StoreUnavailable,
    _check_limit,
    event_from_row,
    plan_append,
    take_layout,
)
from journal_bridge.store.claims import FileClaims, claims_for
from journal_bridge.store.journal_tables import COLUMNS, TABLES, ColumnTypes, migrations
from journal_bridge.store.marker_fields import sqlite_step
from journal_bridge.store.sql import SqlRunEventStore

__all__ = ["LAYOUTS", "SqliteRunEventStore", "from_url", "sqlite_path_from_url"]

# Parameters per IN (...) list; far below SQLite's host parameter limit.
_CHUNK = 500

# See `journal_tables.migrations`; `journal_schema` records how many steps have run.
# The last step gives markers written before them the fields
# `journal_bridge.store.marker_fields` describes.
MIGRATIONS: list[tuple[str, ...]] = [
    *migrations(
        ColumnTypes(
            integer="INTEGER",
            counter="INTEGER",
            text="TEXT",
            event_type="TEXT",
            category="TEXT",
            json="TEXT",
            time="TEXT",
        )
    ),
    sqlite_step(metadata="metadata", flagged=False),
]
assert len(MIGRATIONS) == SCHEMA_VERSION

# `ALTER TABLE t ADD COLUMN IF NOT EXISTS c ...` in a migration: SQLite has no
# such clause, so the migration runs it only when the column is missing.
_ADD_COLUMN_IF_MISSING = re.compile(
    r"ALTER TABLE (\S+) ADD COLUMN IF NOT EXISTS (\S+) ", re.IGNORECASE
)


def _like_pattern(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _encode_time(value: datetime) -> str:
    return value.isoformat()


# Page cache per connection, in KiB (SQLite's default is about 2 MiB each, in
# malloc memory a server keeps once the journal outgrows it). The writer only
# touches the counters, the right edge of the events table and one leaf per
# index of the threads it appends to: measured on a journal of 48,000 records,
# an append costs the same down to 128 KiB and more below. The reader holds the
# pages of the history and overview reads.
WRITER_CACHE_KIB = 256
READER_CACHE_KIB = 512

# "no such table": the journal's tables vanished under a running store (file
# replaced or wiped) -- an outage of the journal, not a bug in the call.
_UNAVAILABLE_HINTS = (
    "locked",
    "busy",
    "unable to open",
    "disk i/o",
    "readonly",
    "no such table",
)


def sqlite_path_from_url(url: str) -> str:
    """`sqlite:///relative.db` -> `relative.db`; `sqlite:////abs/events.db` -> `/abs/events.db`."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        raise InvalidStoreUrl(
            f"SQLite URL must look like sqlite:///relative.db or sqlite:////absolute/path.db,"
            f" got {url!r}"
        )
    path = url[len(prefix) :].split("?", 1)[0]
    if path == ":memory:":
        raise InvalidStoreUrl("an in-memory SQLite journal cannot be shared; use memory://")
    return path


def _decode_time(text: str) -> datetime:
    """A stored time; one without an offset is UTC."""
    value = datetime.fromisoformat(text)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _url_options(url: str) -> dict[str, object]:
    """`?busy_timeout=SECONDS`: how long a write waits for another writer's lock
    (`layout` is taken out before)."""
    query = parse_qs(urlsplit(url).query)
    options: dict[str, Any] = {}
    for name, values in query.items():
        if name != "busy_timeout":
            raise InvalidStoreUrl(
                f"unsupported SQLite URL option {name!r}:"
                " only busy_timeout and layout are known"
            )
        try:
            options["busy_timeout"] = float(values[-1])
        except ValueError as exc:
            raise InvalidStoreUrl(
                f"busy_timeout: expected seconds, got {values[-1]!r}"
            ) from exc
    return options


# `?layout=NAME` of a SQLite URL: which tables hold the journal.
LAYOUTS = {
    # journal-bridge's own tables (`journal_events`, ...)
    "journal": "journal_bridge.store.sqlite:SqliteRunEventStore",
    # deer-flow's `run_events`, shared with deer-flow's Gateway
    "deerflow": "journal_bridge.store.sqlite_deerflow:DeerflowSqliteRunEventStore",
}


def from_url(url: str, **options: object) -> SqliteRunEventStore:
    """The store for `sqlite:///path.db[?busy_timeout=SECONDS][&layout=journal|deerflow]`;
    `options` win over the URL's."""
    url, store_class = take_layout(url, LAYOUTS, "SQLite")
    return store_class(sqlite_path_from_url(url), **{**_url_options(url), **options})


def _row_to_event(row: tuple[Any, ...]) -> RunEvent:
    return event_from_row(
        row,
        content=json.loads(row[5]),
        metadata=json.loads(row[6]),
        created_at=_decode_time(row[7]),
    )


def _translate(exc: Exception, what: str) -> StoreError:
    message = f"SQLite {what} failed: {exc}"
    if isinstance(exc, sqlite3.OperationalError) and any(
        hint in str(exc).lower() for hint in _UNAVAILABLE_HINTS
    ):
        return StoreUnavailable(message)
    return StoreError(message)


def _not_open() -> StoreUnavailable:
    return StoreUnavailable(
        "SQLite journal is closed or not open yet; use `async with` or `await open()`"
    )


async def _begin(conn: aiosqlite.Connection) -> None:
    """Start a write transaction on the store's one writer connection.

    A caller cancelled while its BEGIN was on the way leaves the transaction
    open on the connection (the statement still runs in the driver's thread);
    it must not poison every later write, so it is rolled back here first.
    """
    if conn.in_transaction:
        await _rollback(conn)
    await conn.execute("BEGIN IMMEDIATE")


_T = TypeVar("_T")


async def run_in_connection_thread(conn: aiosqlite.Connection, fn: Callable[..., _T], *args: object) -> _T:
    """`fn(sqlite3_connection, *args)` on `conn`'s own thread, as one of its operations.

    aiosqlite 0.20-0.22 run every operation through `Connection._execute`
    and keep the sqlite3 connection at `_conn`; both are private, so they
    are used here only.
    """
    return await conn._execute(fn, conn._conn, *args)  # noqa: SLF001


def _transaction(raw: sqlite3.Connection, work: Callable[[sqlite3.Connection], _T]) -> _T:
    if raw.in_transaction:
        raw.execute("ROLLBACK")
    raw.execute("BEGIN IMMEDIATE")
    try:
        result = work(raw)
        raw.execute("COMMIT")
    except BaseException:
        if raw.in_transaction:
            try:
                raw.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        raise
    return result


async def _rollback(conn: aiosqlite.Connection) -> None:
    # SQLite may already have rolled back (e.g. on a full disk); the original
    # error is the one worth raising.
    try:
        await conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass


class SqliteRunEventStore(SqlRunEventStore):
    """A `RunEventStore` in one SQLite file (`sqlite:///path.db`).

    The class attributes and the hooks after them describe the table layout; a
    subclass with other tables overrides them and shares everything else.
    """

    tables = TABLES
    migrations = MIGRATIONS
    columns = COLUMNS
    # The column holding the metadata as JSON text.
    metadata_column = "metadata"
    # An expression: the text of the message record `e`, NULL when it has none
    # (a str content as is, a list of blocks as its JSON text).
    message_text = (
        "CASE json_type(e.content)"
        " WHEN 'object' THEN json_extract(e.content, '$.content')"
        " WHEN 'text' THEN json_extract(e.content, '$') END"
    )
    mark = "?"
    driver_error = sqlite3.Error
    duplicate_key = sqlite3.IntegrityError
    _translate = staticmethod(_translate)

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout: float = 30.0,
        synchronous: str = "NORMAL",
        max_content_bytes: int | None = None,
    ) -> None:
        super().__init__(max_content_bytes=max_content_bytes)
        self.path = str(path)
        self.busy_timeout = busy_timeout
        self.synchronous = synchronous
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        # One writer connection: its transactions must not interleave between tasks.
        self._write_lock = asyncio.Lock()
        self._open_lock = asyncio.Lock()
        self._events = self.tables["events"]
        self._threads = self.tables["threads"]
        self._version = self.tables["version"]
        self._select = f"SELECT {self.columns} FROM {self._events}"
        self._insert_sql = (
            f"INSERT INTO {self._events} ({self.columns})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        # A metadata["caller"] marking a middleware's own model call; GLOB is
        # case-sensitive, as the prefix test of the other backends is.
        self._not_middleware_caller = (
            f"COALESCE(json_extract({self.metadata_column}, '$.caller'), '')"
            f" NOT GLOB '{MIDDLEWARE_CALLER_PREFIX}*'"
        )
        # A JSON number never equals the text parameter: only strings match.
        self.task_id_match = f"json_extract({self.metadata_column}, '$.task_id') = ?"

    async def _connect(self, cache_kib: int) -> aiosqlite.Connection:
        parent = Path(self.path).parent
        if not parent.is_dir():
            raise StoreUnavailable(
                f"cannot open SQLite journal at {self.path!r}: directory {str(parent)!r}"
                " does not exist"
            )
        conn = aiosqlite.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None
        )
        try:
            await conn
        except sqlite3.Error as exc:
            # aiosqlite stops its worker thread on a failed connect; wait for it so
            # it does not outlive the event loop.
            thread = getattr(conn, "_thread", None)
            if thread is not None:
                await asyncio.to_thread(thread.join, 5)
            raise StoreUnavailable(
                f"cannot open SQLite journal at {self.path!r}: {exc}"
            ) from exc
        try:
            await conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            await conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            await conn.execute(f"PRAGMA cache_size = -{cache_kib}")
        except sqlite3.Error as exc:
            await conn.close()
            raise _translate(exc, f"setup of {self.path!r}") from exc
        return conn

    async def open(self) -> None:
        async with self._open_lock:
            if self._writer is not None:
                return
            writer = await self._connect(WRITER_CACHE_KIB)
            try:
                await self._create_schema(writer)
                reader = await self._connect(READER_CACHE_KIB)
            except BaseException:
                await writer.close()
                raise
            self._writer, self._reader = writer, reader

    async def _schema_version(self, conn: aiosqlite.Connection) -> int | None:
        try:
            rows = list(
                await conn.execute_fetchall(f"SELECT version FROM {self._version}")
            )
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None
            raise
        return rows[0][0] if rows else None

    async def _create_schema(self, conn: aiosqlite.Connection) -> None:
        try:
            mode = await conn.execute_fetchall("PRAGMA journal_mode")
            if next(iter(mode))[0].lower() == "wal":
                # Set up already: no write lock needed, so opening never waits
                # for another process's append.
                if await self._schema_is_current(conn):
                    return
            else:
                mode = await conn.execute_fetchall("PRAGMA journal_mode = WAL")
                if next(iter(mode))[0].lower() != "wal":
                    raise StoreError(
                        f"SQLite journal at {self.path!r} cannot use WAL mode"
                    )
            await conn.execute("BEGIN IMMEDIATE")
            try:
                await self._migrate(conn)
                await conn.execute("COMMIT")
            except BaseException:
                await _rollback(conn)
                raise
        except sqlite3.Error as exc:
            raise _translate(exc, f"schema setup of {self.path!r}") from exc

    async def _schema_is_current(self, conn: aiosqlite.Connection) -> bool:
        """Whether opening needs no migration (read without the write lock)."""
        return await self._schema_version(conn) == len(self.migrations)

    async def _migrate(self, conn: aiosqlite.Connection) -> None:
        """Bring the schema to the latest version; inside the write transaction."""
        version = await self._schema_version(conn) or 0
        await self._migrate_from(conn, version, f"SQLite journal at {self.path!r}", self.tables)

    @staticmethod
    async def _run_migration_statement(conn: aiosqlite.Connection, statement: str) -> None:
        added = _ADD_COLUMN_IF_MISSING.match(statement)
        if added is not None:
            table, column = added.groups()
            present = await conn.execute_fetchall(
                "SELECT 1 FROM pragma_table_info(?) WHERE name = ?", (table, column)
            )
            if list(present):
                return
            statement = statement.replace(" IF NOT EXISTS", "", 1)
        await conn.execute(statement)

    async def close(self) -> None:
        self._claims.release_all(self)
        writer, reader = self._writer, self._reader
        self._writer = self._reader = None
        for conn in (writer, reader):
            if conn is not None:
                await conn.close()

    # -- reader claims: record locks on `<path>-claims` (`journal_bridge.store.claims`)
    # Taken and dropped in the event loop: a lock that is not free is refused at once
    # (never waited for), so a thread hop per run would cost more than the call.

    @functools.cached_property
    def _claims(self) -> FileClaims:
        # Looked up once: the path is resolved on the file system, and every run claims.
        return claims_for(self.path)

    async def claim_run(self, run_id: str) -> bool:
        return self._claims.claim(self, str(run_id))

    async def release_run(self, run_id: str) -> None:
        self._claims.release(self, str(run_id))

    def _read_conn(self) -> aiosqlite.Connection:
        if self._reader is None:
            raise _not_open()
        return self._reader

    def _writing(self, thread_ids: Iterable[str]) -> contextlib.AbstractAsyncContextManager[object]:
        # One writer connection: its lock covers every thread.
        return self._write()

    @contextlib.asynccontextmanager
    async def _write(self) -> AsyncIterator[aiosqlite.Connection]:
        """The writer connection in a write transaction of its own: committed when
        the block ends, rolled back when it raises. Driver errors pass through
        untranslated, so a caller can tell a unique key's objection apart."""
        if self._writer is None:
            raise _not_open()
        conn = self._writer
        async with self._write_lock:
            try:
                await _begin(conn)
                yield conn
                await conn.execute("COMMIT")
            except BaseException:
                await _rollback(conn)
                raise

    async def _fetch(self, sql: str, params: Iterable[object]) -> list[tuple[Any, ...]]:
        try:
            # The connection's rows are plain tuples (no row factory is set).
            return cast(list[tuple[Any, ...]], list(await self._read_conn().execute_fetchall(sql, tuple(params))))
        except sqlite3.Error as exc:
            raise _translate(exc, "read") from exc

    # -- layout hooks ------------------------------------------------------------

    def _decode(self, row: tuple[object, ...]) -> RunEvent:
        """A row of `columns` as a record."""
        return _row_to_event(row)

    def _insert_rows(self, raw: sqlite3.Connection, rows: list[tuple[object, ...]]) -> None:
        """Insert the event rows `plan_append` made (times as `_encode_time` wrote them)."""
        raw.executemany(self._insert_sql, rows)

    @staticmethod
    def _encode_time(value: datetime) -> str:
        """`created_at` as stored."""
        return _encode_time(value)

    def _count_appended(self, raw: sqlite3.Connection, counters: list[tuple[str, int, int, int]]) -> None:
        """Add `(thread_id, last_seq, added, messages_added)` to the thread counters."""
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        raw.executemany(
            self._add_to_counters(
                "?, ?, ?, ?, ?,"
                f" (SELECT COALESCE(MAX(write_order), 0) + 1 FROM {self._threads})"
            ),
            [(*counter, now) for counter in counters],
        )

    # -- writing -----------------------------------------------------------------

    async def _in_transaction(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run `work` in one write transaction on the writer connection's own thread.

        One hand-over to that thread for the whole transaction, instead of one
        per statement: each costs a thread switch both ways, which made an
        append's statements cost several times their SQLite work. The
        transaction is begun and ended in that thread too, so a caller
        cancelled meanwhile never leaves it open. Driver errors pass through
        untranslated.
        """
        if self._writer is None:
            raise _not_open()
        async with self._write_lock:
            return await run_in_connection_thread(self._writer, _transaction, work)

    async def _append_once(
        self, groups: dict[str, list[PreparedEvent]], *, look_up_keys: bool
    ) -> dict[str, list[RunEvent]]:
        return await self._in_transaction(lambda raw: self._append_in(raw, groups, look_up_keys=look_up_keys))

    def _append_in(
        self,
        raw: sqlite3.Connection,
        groups: dict[str, list[PreparedEvent]],
        *,
        look_up_keys: bool,
    ) -> dict[str, list[RunEvent]]:
        """The append inside the caller's write transaction."""
        thread_ids = list(groups)
        marks = ", ".join("?" * len(thread_ids))
        last_seqs = dict(
            raw.execute(
                f"SELECT thread_id, last_seq FROM {self._threads} WHERE thread_id IN ({marks})",
                thread_ids,
            ).fetchall()
        )
        existing = {}
        if look_up_keys:
            for thread_id, items in groups.items():
                existing[thread_id] = self._existing(raw, thread_id, items)
        result, rows, counters = plan_append(groups, last_seqs, existing, self._encode_time)
        if rows:
            self._insert_rows(raw, rows)
            self._count_appended(raw, counters)
        return result

    async def _put_if_absent(self, item: PreparedEvent) -> tuple[RunEvent, bool]:
        event = item.event

        def put(raw: sqlite3.Connection) -> tuple[RunEvent, bool]:
            row = raw.execute(
                f"{self._select} WHERE thread_id = ? AND run_id = ? AND event_type = ? ORDER BY seq LIMIT 1",
                (event.thread_id, event.run_id, event.event_type),
            ).fetchone()
            if row is not None:
                return self._decode(row), False
            stored = self._append_in(raw, {event.thread_id: [item]}, look_up_keys=False)
            return stored[event.thread_id][0], True

        try:
            return await self._in_transaction(put)
        except sqlite3.Error as exc:
            raise _translate(exc, "append") from exc

    def _existing(
        self, raw: sqlite3.Connection, thread_id: str, items: list[PreparedEvent]
    ) -> dict[str, RunEvent]:
        keys = [item.event.source_key for item in items if item.event.source_key is not None]
        found: dict[str, RunEvent] = {}
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            for row in raw.execute(
                f"{self._select} WHERE thread_id = ? AND source_key IN ({marks})",
                (thread_id, *chunk),
            ):
                found[row[8]] = self._decode(row)
        return found

    # -- reading -----------------------------------------------------------------

    @staticmethod
    def _one_of(column: str, values: tuple[str, ...]) -> tuple[str, list[object]]:
        return f"{column} IN ({', '.join('?' * len(values))})", list(values)

    async def _last_visible_ai_seqs(
        self, thread_id: str, run_ids: tuple[str, ...], user_id: str | None
    ) -> dict[str, int]:
        found: dict[str, int] = {}
        types = ", ".join("?" * len(VISIBLE_AI_EVENT_TYPES))
        for start in range(0, len(run_ids), _CHUNK):
            chunk = run_ids[start : start + _CHUNK]
            sql = (
                f"SELECT run_id, MAX(seq) FROM {self._events} WHERE thread_id = ?"
                f" AND run_id IN ({', '.join('?' * len(chunk))})"
                f" AND category = ? AND event_type IN ({types})"
                f" AND {self._not_middleware_caller}"
            )
            params: list[Any] = [thread_id, *chunk, MESSAGE, *VISIBLE_AI_EVENT_TYPES]
            if user_id is not None:
                sql += " AND user_id = ?"
                params.append(user_id)
            rows = await self._fetch(sql + " GROUP BY run_id", params)
            found.update((run_id, seq) for run_id, seq in rows)
        return found

    async def search_threads(self, text: str, *, limit: int = 50) -> list[StoredThread]:
        _check_limit(limit)
        # Matched against the message's text as stored: a string content as is, a
        # list of blocks as its JSON text (where the text is JSON-escaped).
        raw = _like_pattern(text)
        escaped = _like_pattern(json.dumps(text, ensure_ascii=False)[1:-1])
        rows = await self._fetch(
            f"SELECT thread_id, last_seq, event_count, updated_at FROM {self._threads} t"
            " WHERE event_count > 0 AND EXISTS (SELECT 1 FROM ("
            f"SELECT {self.message_text} AS text"
            f" FROM {self._events} e WHERE e.thread_id = t.thread_id AND e.category = ?)"
            " WHERE text LIKE ? ESCAPE '\\' OR text LIKE ? ESCAPE '\\')"
            " ORDER BY write_order DESC LIMIT ?",
            (MESSAGE, raw, escaped, limit),
        )
        return self._thread_entries(rows)

    async def has_source_keys(self, thread_id: str, keys: Iterable[str]) -> set[str]:
        wanted = list(dict.fromkeys(keys))
        found: set[str] = set()
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            rows = await self._fetch(
                f"SELECT source_key FROM {self._events} WHERE thread_id = ?"
                f" AND source_key IN ({', '.join('?' * len(chunk))})",
                (thread_id, *chunk),
            )
            found.update(row[0] for row in rows)
        return found

    # -- deleting ----------------------------------------------------------------

    async def _delete(self, thread_id: str, where: str, params: tuple[object, ...]) -> int:
        try:
            async with self._write() as conn:
                # Counted through the same index the delete uses, so the cost
                # is that of the deleted records, not of the thread.
                rows = list(
                    await conn.execute_fetchall(
                        "SELECT COUNT(*), COALESCE(SUM(category = ?), 0)"
                        f" FROM {self._events} WHERE {where}",
                        (MESSAGE, *params),
                    )
                )
                deleted, messages = rows[0]
                if deleted:
                    await conn.execute(f"DELETE FROM {self._events} WHERE {where}", params)
                    await self._count_deleted(conn, thread_id, deleted, messages)
        except sqlite3.Error as exc:
            raise _translate(exc, "delete") from exc
        return deleted
