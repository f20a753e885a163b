"""PostgreSQL run event store for deployments: psycopg 3 async with a connection pool.

Appends take a transaction-scoped advisory lock per thread before reading the
thread's counter row, so writers in several processes (or servers) serialise
per thread while different threads append in parallel. Threads of one batch are
locked in sorted order, so two batches cannot deadlock. Reads run in autocommit
and see only committed batches.

Reader claims (`claim_run`) are session-level advisory locks in a namespace of
their own, all held on one connection per store kept apart from the pool: a
process holds every claim it has on that one connection, and a process that
dies takes its claims with its connection.

`content` and `metadata` are jsonb; a str content is a jsonb string, so it reads
back as a str. jsonb keeps values exactly but not the key order of objects.
"""

from __future__ import annotations

import asyncio
import contextlib
import zlib
from collections.abc import AsyncIterator, Iterable
from datetime import UTC
from typing import Any, ClassVar

import psycopg
from psycopg_pool import AsyncConnectionPool

from journal_bridge.model.envelope import MESSAGE, InvalidEvent, PreparedEvent, RunEvent
from journal_bridge.store.base import (
    MIDDLEWARE_CALLER_PREFIX,
    SCHEMA_VERSION,
    VISIBLE_AI_EVENT_TYPES,
    StoreError,
    StoreUnavailable,
    event_from_row,
    plan_append,
    take_layout,
)
from journal_bridge.store.journal_tables import COLUMNS, TABLES, ColumnTypes, migrations
from journal_bridge.store.marker_fields import postgres_step
from journal_bridge.store.sql import SqlRunEventStore

__all__ = ["LAYOUTS", "PostgresRunEventStore", "from_url"]

_STEPS = migrations(
    ColumnTypes(
        integer="integer",
        counter="bigint",
        text="text",
        event_type="varchar(32)",
        category="varchar(16)",
        json="jsonb",
        time="timestamptz",
    )
)
# See `journal_tables.migrations`; `journal_schema` records how many steps have
# run. The first step also creates the sequence that numbers the threads'
# writes (`{writes}`): PostgreSQL's writers to different threads run in
# parallel, so none can take MAX(write_order) + 1 as SQLite's do.
# The last step gives markers written before them the fields
# `journal_bridge.store.marker_fields` describes.
MIGRATIONS: list[tuple[str, ...]] = [
    (*_STEPS[0], "CREATE SEQUENCE IF NOT EXISTS {writes}"),
    *_STEPS[1:],
    postgres_step(metadata="metadata", in_text=False),
]
assert len(MIGRATIONS) == SCHEMA_VERSION


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _row_to_event(row: tuple[Any, ...]) -> RunEvent:
    return event_from_row(row, content=row[5], metadata=row[6], created_at=row[7])


def _translate(exc: Exception, what: str) -> Exception:
    if isinstance(exc, psycopg.OperationalError):
        # Connection lost or refused, pool exhausted, deadlock, serialisation
        # failure, server shutting down: all worth a retry.
        return StoreUnavailable(f"PostgreSQL {what} failed: {exc}")
    if isinstance(exc, psycopg.DataError):
        return InvalidEvent(
            f"event: PostgreSQL cannot store a value of it ({what}): {exc}"
        )
    return StoreError(f"PostgreSQL {what} failed: {exc}")


async def _copy_rows(
    cursor: psycopg.AsyncCursor[object], table: str, columns: str, rows: Iterable[tuple[object, ...]]
) -> None:
    """Write `rows` with COPY: one round trip for the batch, parsed once by the server.
    A duplicate key fails the statement as an INSERT would (`UniqueViolation`)."""
    async with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for row in rows:
            await copy.write_row(row)


class PostgresRunEventStore(SqlRunEventStore):
    """A `RunEventStore` in PostgreSQL (`postgresql://...`).

    `schema`: the schema holding the tables (created if missing); default: the
    connection's search_path. Pool sizes and `connect_timeout` (seconds) tune
    the connection pool.

    The class attributes and the hooks after them describe the table layout; a
    subclass with other tables overrides them and shares everything else.
    """

    tables: ClassVar[dict[str, str]] = {**TABLES, "writes": "journal_thread_writes"}
    migrations = MIGRATIONS
    columns = COLUMNS
    # Compared as JSON: only a string task_id matches.
    task_id_match = "metadata -> 'task_id' = to_jsonb(%s::text)"
    # An expression: `metadata["caller"]` as text, NULL when absent.
    caller_text = "metadata ->> 'caller'"
    mark = "%s"
    driver_error = psycopg.Error
    duplicate_key = psycopg.errors.UniqueViolation
    _translate = staticmethod(_translate)

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 10.0,
        max_content_bytes: int | None = None,
    ) -> None:
        super().__init__(max_content_bytes=max_content_bytes)
        self.url = url
        self.schema = schema
        self.min_size = min_size
        self.max_size = max_size
        self.connect_timeout = connect_timeout
        self._pool: AsyncConnectionPool | None = None
        prefix = f"{_quote(schema)}." if schema else ""
        self._names = {key: f"{prefix}{name}" for key, name in self.tables.items()}
        self._events = self._names["events"]
        self._threads = self._names["threads"]
        self._version = self._names["version"]
        self._writes = self._names["writes"]
        # Advisory lock namespace: per schema, so unrelated journals do not contend.
        self._lock_space = zlib.crc32(f"journal-bridge:{schema or ''}".encode()) - 2**31
        self._select = f"SELECT {self.columns} FROM {self._events}"
        # Reader claims: a namespace apart from the thread write locks, so a claim
        # never holds up an append whose thread's key happens to match.
        self._claim_space = zlib.crc32(f"journal-bridge-reader:{schema or ''}".encode()) - 2**31
        self._claims_conn: psycopg.AsyncConnection | None = None
        self._claims_lock = asyncio.Lock()
        self._claimed: set[str] = set()

    @property
    def _redacted_url(self) -> str:
        try:
            info = psycopg.conninfo.conninfo_to_dict(self.url)
        except psycopg.Error:
            return "<invalid url>"
        host, port, db = (
            info.get("host", ""),
            info.get("port", ""),
            info.get("dbname", ""),
        )
        return f"{host}:{port}/{db}"

    async def open(self) -> None:
        if self._pool is not None:
            return
        timeout = max(2, int(self.connect_timeout))
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=timeout
            )
        except psycopg.Error as exc:
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL at {self._redacted_url}: {exc}"
            ) from exc
        try:
            await self._create_schema(conn)
        except psycopg.Error as exc:
            raise _translate(exc, "schema setup") from exc
        finally:
            await conn.close()
        pool = AsyncConnectionPool(
            self.url,
            min_size=self.min_size,
            max_size=self.max_size,
            kwargs={"autocommit": True, "connect_timeout": timeout},
            timeout=self.connect_timeout,
            open=False,
            name="journal-bridge",
        )
        await pool.open(wait=False)
        self._pool = pool

    async def _create_schema(self, conn: psycopg.AsyncConnection) -> None:
        async with conn.transaction():
            # Serialise first-use setup between processes: concurrent
            # CREATE ... IF NOT EXISTS can still collide in the catalog.
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_space,))
            if self.schema:
                await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(self.schema)}")
            version = 0
            cursor = await conn.execute(
                "SELECT to_regclass(%s) IS NOT NULL", (self._version,)
            )
            if (await cursor.fetchone())[0]:  # type: ignore[index]
                cursor = await conn.execute(f"SELECT version FROM {self._version}")
                row = await cursor.fetchone()
                version = row[0] if row else 0
            await self._migrate_from(conn, version, "PostgreSQL journal", self._names)

    async def close(self) -> None:
        async with self._claims_lock:
            if self._claims_conn is not None and self._claimed:
                # At once: the server ends a closed connection's session a moment later.
                with contextlib.suppress(psycopg.Error):
                    await self._claims_conn.execute("SELECT pg_advisory_unlock_all()")
            await self._drop_claims()
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def _get_pool(self) -> AsyncConnectionPool:
        if self._pool is None:
            raise StoreUnavailable(
                "PostgreSQL journal is closed or not open yet;"
                " use `async with` or `await open()`"
            )
        return self._pool

    async def _fetch(self, sql: str, params: Iterable[object]) -> list[tuple[Any, ...]]:
        try:
            async with self._get_pool().connection() as conn:
                cursor = await conn.execute(sql, tuple(params))
                return await cursor.fetchall()
        except psycopg.Error as exc:
            raise _translate(exc, "read") from exc

    # -- reader claims -------------------------------------------------------------

    async def claim_run(self, run_id: str) -> bool:
        run_id = str(run_id)
        async with self._claims_lock:
            if run_id in self._claimed:
                return True
            try:
                conn = await self._claims_connection()
                cursor = await conn.execute(
                    "SELECT pg_try_advisory_lock(%s, hashtext(%s))", (self._claim_space, run_id)
                )
                won = bool((await cursor.fetchone())[0])  # type: ignore[index]
            except psycopg.Error as exc:
                await self._drop_claims()
                raise _translate(exc, "claim") from exc
            if won:
                self._claimed.add(run_id)
            return won

    async def release_run(self, run_id: str) -> None:
        run_id = str(run_id)
        async with self._claims_lock:
            if run_id not in self._claimed or self._claims_conn is None:
                return
            self._claimed.discard(run_id)
            try:
                await self._claims_conn.execute(
                    "SELECT pg_advisory_unlock(%s, hashtext(%s))", (self._claim_space, run_id)
                )
            except psycopg.Error as exc:
                await self._drop_claims()
                raise _translate(exc, "release of a claim") from exc

    async def _claims_connection(self) -> psycopg.AsyncConnection:
        """The connection holding this store's claims, connected on first use."""
        self._get_pool()  # a closed store claims nothing
        if self._claims_conn is None or self._claims_conn.closed:
            # Its claims went with the old connection (if any): forget them.
            self._claimed.clear()
            self._claims_conn = await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=max(2, int(self.connect_timeout))
            )
        return self._claims_conn

    async def _drop_claims(self) -> None:
        """Close the claims connection: the server releases every claim it held."""
        conn, self._claims_conn = self._claims_conn, None
        self._claimed.clear()
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                await conn.close()

    # -- layout hooks ------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _writing(self, thread_ids: Iterable[str]) -> AsyncIterator[psycopg.AsyncConnection]:
        async with self._get_pool().connection() as conn, conn.transaction():
            await self._lock_threads(conn, thread_ids)
            yield conn

    async def _lock_threads(
        self, conn: psycopg.AsyncConnection, thread_ids: Iterable[str]
    ) -> None:
        """Take the per-thread write locks every writer of these tables takes."""
        for thread_id in sorted(thread_ids):
            await conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                (self._lock_space, thread_id),
            )

    def _decode(self, row: tuple[object, ...]) -> RunEvent:
        """A row of `columns` as a record."""
        return _row_to_event(row)

    async def _insert_rows(
        self, cursor: psycopg.AsyncCursor[object], rows: list[tuple[object, ...]]
    ) -> None:
        """Insert the event rows `plan_append` made."""
        await _copy_rows(cursor, self._events, COLUMNS, rows)

    async def _count_appended(
        self, cursor: psycopg.AsyncCursor[object], counters: list[tuple[str, int, int, int]]
    ) -> None:
        """Add `(thread_id, last_seq, added, messages_added)` to the thread counters."""
        await cursor.executemany(
            self._add_to_counters(
                f"%s, %s, %s, %s, clock_timestamp(), nextval('{self._writes}')"
            ),
            counters,
        )

    # -- writing -----------------------------------------------------------------

    async def _append_once(
        self, groups: dict[str, list[PreparedEvent]], *, look_up_keys: bool
    ) -> dict[str, list[RunEvent]]:
        async with self._get_pool().connection() as conn, conn.transaction():
            async with conn.pipeline():
                # Queued together: the counter query starts after the locks are
                # held, so its snapshot sees every earlier append to these threads.
                await self._lock_threads(conn, groups)
                cursor = await conn.execute(
                    f"SELECT thread_id, last_seq FROM {self._threads}"
                    " WHERE thread_id = ANY(%s)",
                    (list(groups),),
                )
                last_seqs: dict[str, int] = dict(await cursor.fetchall())
            existing: dict[str, dict[str, RunEvent]] = {}
            if look_up_keys:
                for thread_id, items in groups.items():
                    keys = [
                        i.event.source_key
                        for i in items
                        if i.event.source_key is not None
                    ]
                    if keys:
                        cursor = await conn.execute(
                            f"{self._select} WHERE thread_id = %s AND source_key = ANY(%s)",
                            (thread_id, keys),
                        )
                        existing[thread_id] = {
                            row[8]: self._decode(row)
                            for row in await cursor.fetchall()
                        }
            return await self._insert(conn, groups, last_seqs, existing)

    async def _insert(
        self,
        conn: psycopg.AsyncConnection,
        groups: dict[str, list[PreparedEvent]],
        last_seqs: dict[str, int],
        existing: dict[str, dict[str, RunEvent]],
    ) -> dict[str, list[RunEvent]]:
        """Write an append planned under the threads' locks, in the caller's transaction."""
        result, rows, counters = plan_append(groups, last_seqs, existing)
        if rows:
            async with conn.cursor() as cursor:
                await self._insert_rows(cursor, rows)
                await self._count_appended(cursor, counters)
        return result

    async def _put_if_absent(self, item: PreparedEvent) -> tuple[RunEvent, bool]:
        event = item.event
        try:
            async with self._writing([event.thread_id]) as conn:
                cursor = await conn.execute(
                    f"{self._select} WHERE thread_id = %s AND run_id = %s"
                    " AND event_type = %s ORDER BY seq LIMIT 1",
                    (event.thread_id, event.run_id, event.event_type),
                )
                row = await cursor.fetchone()
                if row is not None:
                    return self._decode(row), False
                cursor = await conn.execute(
                    f"SELECT last_seq FROM {self._threads} WHERE thread_id = %s",
                    (event.thread_id,),
                )
                row = await cursor.fetchone()
                last_seqs = {event.thread_id: row[0]} if row else {}
                stored = await self._insert(
                    conn, {event.thread_id: [item]}, last_seqs, {}
                )
        except psycopg.Error as exc:
            raise _translate(exc, "append") from exc
        return stored[event.thread_id][0], True

    # -- reading -----------------------------------------------------------------

    @staticmethod
    def _one_of(column: str, values: tuple[str, ...]) -> tuple[str, list[object]]:
        return f"{column} = ANY(%s)", [list(values)]

    async def _last_visible_ai_seqs(
        self, thread_id: str, run_ids: tuple[str, ...], user_id: str | None
    ) -> dict[str, int]:
        sql = (
            f"SELECT run_id, MAX(seq) FROM {self._events} WHERE thread_id = %s"
            " AND run_id = ANY(%s) AND category = %s AND event_type = ANY(%s)"
            f" AND COALESCE({self.caller_text}, '') NOT LIKE %s"
        )
        params: list[Any] = [
            thread_id,
            list(run_ids),
            MESSAGE,
            list(VISIBLE_AI_EVENT_TYPES),
            f"{MIDDLEWARE_CALLER_PREFIX}%",
        ]
        if user_id is not None:
            sql += " AND user_id = %s"
            params.append(user_id)
        rows = await self._fetch(sql + " GROUP BY run_id", params)
        return {run_id: seq for run_id, seq in rows}

    @staticmethod
    def _thread_time(value: Any) -> str:
        return value.astimezone(UTC).isoformat(timespec="microseconds")

    async def has_source_keys(self, thread_id: str, keys: Iterable[str]) -> set[str]:
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return set()
        rows = await self._fetch(
            f"SELECT source_key FROM {self._events}"
            " WHERE thread_id = %s AND source_key = ANY(%s)",
            (thread_id, wanted),
        )
        return {row[0] for row in rows}

    # -- deleting ----------------------------------------------------------------

    async def _delete(self, thread_id: str, where: str, params: tuple[object, ...]) -> int:
        # Under the thread's lock, as appends are.
        try:
            async with self._writing([thread_id]) as conn:
                cursor = await conn.execute(
                    f"WITH gone AS (DELETE FROM {self._events} WHERE {where}"
                    " RETURNING category)"
                    " SELECT COUNT(*), COUNT(*) FILTER (WHERE category = %s) FROM gone",
                    (*params, MESSAGE),
                )
                deleted, messages = await cursor.fetchone()  # type: ignore[misc]
                if deleted:
                    await self._count_deleted(conn, thread_id, deleted, messages)
        except psycopg.Error as exc:
            raise _translate(exc, "delete") from exc
        return deleted


# `?layout=NAME` of a PostgreSQL URL: which tables hold the journal.
LAYOUTS = {
    # journal-bridge's own tables (`journal_events`, ...)
    "journal": "journal_bridge.store.postgres:PostgresRunEventStore",
    # deer-flow's `run_events`, shared with deer-flow's Gateway
    "deerflow": "journal_bridge.store.postgres_deerflow:DeerflowPostgresRunEventStore",
}


def from_url(url: str, **options: object) -> PostgresRunEventStore:
    """The store for `postgresql://...[?layout=journal|deerflow]` (or `postgres://`).

    The driver never sees `layout`: it is taken out of the URL the store connects to.
    """
    url, store_class = take_layout(url, LAYOUTS, "PostgreSQL")
    return store_class(url, **options)
