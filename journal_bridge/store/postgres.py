"""PostgreSQL run event store for deployments: psycopg 3 async with a connection pool.

Appends take a transaction-scoped advisory lock per thread before reading the
thread's counter row, so writers in several processes (or servers) serialise
per thread while different threads append in parallel. Threads of one batch are
locked in sorted order, so two batches cannot deadlock. Reads run in autocommit
and see only committed batches.

`content` and `metadata` are jsonb; a str content is a jsonb string, so it reads
back as a str. jsonb keeps values exactly but not the key order of objects.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from datetime import UTC
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from journal_bridge.events import MESSAGE, InvalidEvent, PreparedEvent, RunEvent
from journal_bridge.store.base import (
    SCHEMA_VERSION,
    RunEventStore,
    StoreError,
    StoreUnavailable,
    page_query,
    plan_append,
)

__all__ = ["PostgresRunEventStore"]

_COLUMNS = "thread_id, seq, run_id, event_type, category, content, metadata, created_at, source_key"


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _row_to_event(row: tuple[Any, ...]) -> RunEvent:
    return RunEvent(
        thread_id=row[0],
        seq=row[1],
        run_id=row[2],
        event_type=row[3],
        category=row[4],
        content=row[5],
        metadata=row[6],
        created_at=row[7],
        source_key=row[8],
    )


def _translate(exc: psycopg.Error, what: str) -> Exception:
    if isinstance(exc, psycopg.OperationalError):
        # Connection lost or refused, pool exhausted, deadlock, serialisation
        # failure, server shutting down: all worth a retry.
        return StoreUnavailable(f"PostgreSQL {what} failed: {exc}")
    if isinstance(exc, psycopg.DataError):
        return InvalidEvent(
            f"event: PostgreSQL cannot store a value of it ({what}): {exc}"
        )
    return StoreError(f"PostgreSQL {what} failed: {exc}")


class PostgresRunEventStore(RunEventStore):
    """A `RunEventStore` in PostgreSQL (`postgresql://...`).

    `schema`: the schema holding the tables (created if missing); default: the
    connection's search_path. Pool sizes and `connect_timeout` (seconds) tune
    the connection pool.
    """

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
        self._events = f"{prefix}journal_events"
        self._threads = f"{prefix}journal_threads"
        self._version = f"{prefix}journal_schema"
        self._writes = f"{prefix}journal_thread_writes"
        # Advisory lock namespace: per schema, so unrelated journals do not contend.
        self._lock_space = zlib.crc32(f"journal-bridge:{schema or ''}".encode()) - 2**31
        self._select = f"SELECT {_COLUMNS} FROM {self._events}"

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
            for statement in (
                f"CREATE TABLE IF NOT EXISTS {self._version} (version integer NOT NULL)",
                f"""CREATE TABLE IF NOT EXISTS {self._events} (
                    thread_id text NOT NULL,
                    seq bigint NOT NULL,
                    run_id text NOT NULL,
                    event_type varchar(32) NOT NULL,
                    category varchar(16) NOT NULL,
                    content jsonb NOT NULL,
                    metadata jsonb NOT NULL,
                    created_at timestamptz NOT NULL,
                    source_key text,
                    PRIMARY KEY (thread_id, seq)
                )""",
                (
                    f"CREATE INDEX IF NOT EXISTS journal_events_category"
                    f" ON {self._events} (thread_id, category, seq)"
                ),
                (
                    f"CREATE INDEX IF NOT EXISTS journal_events_run"
                    f" ON {self._events} (thread_id, run_id, seq)"
                ),
                (
                    f"CREATE UNIQUE INDEX IF NOT EXISTS journal_events_source_key"
                    f" ON {self._events} (thread_id, source_key) WHERE source_key IS NOT NULL"
                ),
                # The seq counter (never reused while the thread exists) and what
                # the thread index needs without scanning events.
                f"""CREATE TABLE IF NOT EXISTS {self._threads} (
                    thread_id text PRIMARY KEY,
                    last_seq bigint NOT NULL,
                    event_count bigint NOT NULL,
                    updated_at timestamptz NOT NULL,
                    write_order bigint NOT NULL
                )""",
                (
                    f"CREATE INDEX IF NOT EXISTS journal_threads_write_order"
                    f" ON {self._threads} (write_order)"
                ),
                f"CREATE SEQUENCE IF NOT EXISTS {self._writes}",
            ):
                await conn.execute(statement)
            cursor = await conn.execute(f"SELECT version FROM {self._version}")
            row = await cursor.fetchone()
            if row is None:
                await conn.execute(
                    f"INSERT INTO {self._version} (version) VALUES (%s)",
                    (SCHEMA_VERSION,),
                )
            elif row[0] > SCHEMA_VERSION:
                raise StoreError(
                    f"PostgreSQL journal has schema version {row[0]}, newer than this"
                    f" journal-bridge supports ({SCHEMA_VERSION})"
                )

    async def close(self) -> None:
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

    async def _fetch(self, sql: str, params: Iterable[Any]) -> list[tuple[Any, ...]]:
        try:
            async with self._get_pool().connection() as conn:
                cursor = await conn.execute(sql, tuple(params))
                return await cursor.fetchall()
        except psycopg.Error as exc:
            raise _translate(exc, "read") from exc

    async def ping(self) -> None:
        await self._fetch("SELECT 1", ())

    async def _lock_threads(
        self, conn: psycopg.AsyncConnection, thread_ids: Iterable[str]
    ) -> None:
        for thread_id in sorted(thread_ids):
            await conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                (self._lock_space, thread_id),
            )

    # -- writing -----------------------------------------------------------------

    async def _append(
        self, groups: dict[str, list[PreparedEvent]]
    ) -> dict[str, list[RunEvent]]:
        # Source keys are nearly always new: insert assuming so, and only when the
        # unique index objects redo the append looking the keys up first.
        try:
            return await self._append_once(groups, look_up_keys=False)
        except psycopg.errors.UniqueViolation:
            pass
        except psycopg.Error as exc:
            raise _translate(exc, "append") from exc
        try:
            return await self._append_once(groups, look_up_keys=True)
        except psycopg.Error as exc:
            raise _translate(exc, "append") from exc

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
                last_seqs = dict(await cursor.fetchall())
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
                            row[8]: _row_to_event(row)
                            for row in await cursor.fetchall()
                        }
            result, rows, counters = plan_append(groups, last_seqs, existing)
            if rows:
                async with conn.cursor() as cursor:
                    await cursor.executemany(
                        f"INSERT INTO {self._events} ({_COLUMNS})"
                        " VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s)",
                        rows,
                    )
                    await cursor.executemany(
                        f"INSERT INTO {self._threads}"
                        " (thread_id, last_seq, event_count, updated_at, write_order)"
                        f" VALUES (%s, %s, %s, clock_timestamp(), nextval('{self._writes}'))"
                        " ON CONFLICT (thread_id) DO UPDATE SET"
                        " last_seq = EXCLUDED.last_seq,"
                        f" event_count = {self._threads}.event_count + EXCLUDED.event_count,"
                        " updated_at = EXCLUDED.updated_at,"
                        " write_order = EXCLUDED.write_order",
                        counters,
                    )
        return result

    # -- reading -----------------------------------------------------------------

    async def _page(
        self,
        thread_id: str,
        categories: tuple[str, ...],
        limit: int,
        before_seq: int | None,
        after_seq: int | None,
    ) -> list[RunEvent]:
        sql, params, descending = page_query(
            self._select, thread_id, categories, limit, before_seq, after_seq, mark="%s"
        )
        events = [_row_to_event(row) for row in await self._fetch(sql, params)]
        if descending:
            events.reverse()
        return events

    async def _list_events(
        self,
        thread_id: str,
        run_id: str,
        event_types: tuple[str, ...] | None,
        limit: int,
        after_seq: int | None,
    ) -> list[RunEvent]:
        sql = f"{self._select} WHERE thread_id = %s AND run_id = %s"
        params: list[Any] = [thread_id, run_id]
        if after_seq is not None:
            sql += " AND seq > %s"
            params.append(after_seq)
        if event_types is not None:
            sql += " AND event_type = ANY(%s)"
            params.append(list(event_types))
        sql += " ORDER BY seq LIMIT %s"
        params.append(limit)
        return [_row_to_event(row) for row in await self._fetch(sql, params)]

    async def count_messages(self, thread_id: str) -> int:
        rows = await self._fetch(
            f"SELECT COUNT(*) FROM {self._events} WHERE thread_id = %s AND category = %s",
            (thread_id, MESSAGE),
        )
        return rows[0][0]

    async def last_seq(self, thread_id: str) -> int:
        rows = await self._fetch(
            f"SELECT last_seq FROM {self._threads} WHERE thread_id = %s", (thread_id,)
        )
        return rows[0][0] if rows else 0

    async def has_thread(self, thread_id: str) -> bool:
        rows = await self._fetch(
            f"SELECT 1 FROM {self._threads} WHERE thread_id = %s AND event_count > 0",
            (thread_id,),
        )
        return bool(rows)

    async def _list_threads(self, limit: int) -> list[dict[str, Any]]:
        rows = await self._fetch(
            f"SELECT thread_id, last_seq, event_count, updated_at FROM {self._threads}"
            " WHERE event_count > 0 ORDER BY write_order DESC LIMIT %s",
            (limit,),
        )
        return [
            {
                "thread_id": r[0],
                "last_seq": r[1],
                "event_count": r[2],
                "updated_at": r[3].astimezone(UTC).isoformat(timespec="microseconds"),
            }
            for r in rows
        ]

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

    async def _delete(
        self, thread_id: str, statements: list[tuple[str, tuple[Any, ...]]]
    ) -> int:
        """Run `statements` under the thread's lock; return the first one's rowcount."""
        try:
            async with self._get_pool().connection() as conn, conn.transaction():
                await self._lock_threads(conn, [thread_id])
                counts = []
                for sql, params in statements:
                    cursor = await conn.execute(sql, params)
                    counts.append(cursor.rowcount)
        except psycopg.Error as exc:
            raise _translate(exc, "delete") from exc
        return counts[0]

    async def delete_by_thread(self, thread_id: str) -> int:
        return await self._delete(
            thread_id,
            [
                (f"DELETE FROM {self._events} WHERE thread_id = %s", (thread_id,)),
                (f"DELETE FROM {self._threads} WHERE thread_id = %s", (thread_id,)),
            ],
        )

    async def delete_by_run(self, thread_id: str, run_id: str) -> int:
        return await self._delete(
            thread_id,
            [
                (
                    f"DELETE FROM {self._events} WHERE thread_id = %s AND run_id = %s",
                    (thread_id, run_id),
                ),
                (
                    (
                        f"UPDATE {self._threads} SET event_count = (SELECT COUNT(*)"
                        f" FROM {self._events} WHERE thread_id = %s) WHERE thread_id = %s"
                    ),
                    (thread_id, thread_id),
                ),
            ],
        )
