"""What the SQL stores (PostgreSQL and SQLite, in either layout) ask in the
same words: the reads of pages, runs and the thread index, the deletes'
arguments, and when an append looks its source keys up. The dialects differ
only in the driver's placeholder and exceptions here; what they do differently
(transactions, locking, JSON access) stays with each backend.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from journal_bridge.model.envelope import MESSAGE, PreparedEvent, RunEvent
from journal_bridge.model.errors import InvalidArgument
from journal_bridge.model.shapes import StoredThread
from journal_bridge.store.base import (
    Page,
    RunEventsQuery,
    RunEventStore,
    StoreError,
    page_query,
    run_events_query,
)

__all__ = ["SqlRunEventStore"]


class SqlRunEventStore(RunEventStore):
    """A `RunEventStore` in SQL tables.

    A subclass names the tables (`_events`, `_threads`) and the select of a
    record's columns (`_select`), runs a query (`_fetch`), decodes a row
    (`_decode`), appends in one transaction (`_append_once`), deletes
    (`_delete`), opens a write transaction (`_writing`) and names its driver's errors
    (`driver_error`, `duplicate_key`, `_translate`).
    """

    # Table names as `{name}` placeholders of `migrations`.
    tables: ClassVar[dict[str, str]]
    # Position i holds the statements that bring a version-i schema to version i + 1.
    migrations: ClassVar[list[tuple[str, ...]]]
    # Selected in this order by every read; `_decode` reads them by position.
    columns: ClassVar[str]
    # The driver's parameter placeholder.
    mark: ClassVar[str]
    # A WHERE term: `metadata["task_id"]` is the string parameter (a JSON
    # number never equals the text given).
    task_id_match: str
    # Every error the driver raises, and the one a unique index's objection raises.
    driver_error: ClassVar[type[Exception]]
    duplicate_key: ClassVar[type[Exception]]

    _events: str
    _threads: str
    _select: str
    _version: str

    @abc.abstractmethod
    async def _fetch(self, sql: str, params: Iterable[object]) -> list[tuple[Any, ...]]:
        """The rows of one read."""

    @staticmethod
    @abc.abstractmethod
    def _translate(exc: Exception, what: str) -> Exception:
        """The store's error for the driver's `exc` raised by `what` (e.g. "read")."""

    @abc.abstractmethod
    def _decode(self, row: tuple[object, ...]) -> RunEvent:
        """A row of `_select` as a record."""

    @abc.abstractmethod
    def _one_of(self, column: str, values: tuple[str, ...]) -> tuple[str, list[object]]:
        """A WHERE term: `column` is one of `values`; and its parameters."""

    @abc.abstractmethod
    async def _delete(self, thread_id: str, where: str, params: tuple[object, ...]) -> int:
        """Delete the thread's events matching `where` in one write transaction,
        keeping its counters right; return how many went."""

    @abc.abstractmethod
    def _writing(self, thread_ids: Iterable[str]) -> contextlib.AbstractAsyncContextManager[Any]:
        """A connection in a write transaction holding these threads' write locks:
        committed when the block ends, rolled back when it raises. Driver errors
        pass through untranslated."""

    async def _forget_thread(self, thread_id: str) -> int:
        """Delete the thread's events and its counters; return how many events went."""
        m = self.mark
        try:
            async with self._writing([thread_id]) as conn:
                cursor = await conn.execute(f"DELETE FROM {self._events} WHERE thread_id = {m}", (thread_id,))
                deleted = cursor.rowcount
                await conn.execute(f"DELETE FROM {self._threads} WHERE thread_id = {m}", (thread_id,))
        except self.driver_error as exc:
            raise self._translate(exc, "delete") from exc
        return deleted

    @staticmethod
    def _thread_time(value: Any) -> str:
        """A thread's stored `updated_at` as the thread index gives it."""
        return value

    def _thread_entries(self, rows: Iterable[tuple[Any, ...]]) -> list[StoredThread]:
        """Rows of `thread_id, last_seq, event_count, updated_at` as thread index entries."""
        return [
            {
                "thread_id": r[0],
                "last_seq": r[1],
                "event_count": r[2],
                "updated_at": self._thread_time(r[3]),
            }
            for r in rows
        ]

    async def ping(self) -> None:
        await self._fetch("SELECT 1", ())

    # -- thread counters ---------------------------------------------------------

    def _add_to_counters(self, values: str) -> str:
        """The statement that adds an append to its thread's counters, `values`
        being the dialect's terms for `thread_id, last_seq, event_count (added),
        message_count (added), updated_at, write_order`."""
        return (
            f"INSERT INTO {self._threads}"
            " (thread_id, last_seq, event_count, message_count, updated_at, write_order)"
            f" VALUES ({values})"
            " ON CONFLICT (thread_id) DO UPDATE SET"
            " last_seq = EXCLUDED.last_seq,"
            f" event_count = {self._threads}.event_count + EXCLUDED.event_count,"
            f" message_count = {self._threads}.message_count + EXCLUDED.message_count,"
            " updated_at = EXCLUDED.updated_at,"
            " write_order = EXCLUDED.write_order"
        )

    async def _count_deleted(
        self, conn: Any, thread_id: str, deleted: int, messages: int
    ) -> None:
        """Take deleted records off the thread counters, on the connection of
        the delete's transaction."""
        m = self.mark
        await conn.execute(
            f"UPDATE {self._threads} SET event_count = event_count - {m},"
            f" message_count = message_count - {m} WHERE thread_id = {m}",
            (deleted, messages, thread_id),
        )

    # -- schema ------------------------------------------------------------------

    async def _migrate_from(self, conn: Any, version: int, journal: str, names: Mapping[str, str]) -> None:
        """Bring `journal`'s version-`version` schema to the latest, in the caller's
        write transaction (`names`: the tables' names for the statements)."""
        latest = len(self.migrations)
        if version > latest:
            raise StoreError(
                f"{journal} has schema version {version}, newer than this journal-bridge supports ({latest})"
            )
        for statements in self.migrations[version:]:
            for statement in statements:
                await self._run_migration_statement(conn, statement.format(**names))
        m = self.mark
        if version == 0:
            await conn.execute(f"INSERT INTO {self._version} (version) VALUES ({m})", (latest,))
        elif version < latest:
            await conn.execute(f"UPDATE {self._version} SET version = {m}", (latest,))

    @staticmethod
    async def _run_migration_statement(conn: Any, statement: str) -> None:
        await conn.execute(statement)

    # -- writing -----------------------------------------------------------------

    @abc.abstractmethod
    async def _append_once(
        self, groups: dict[str, list[PreparedEvent]], *, look_up_keys: bool
    ) -> dict[str, list[RunEvent]]:
        """The append in one write transaction, under the threads' locks; with
        `look_up_keys`, stored source keys are read first and not written again."""

    async def _append(
        self, groups: dict[str, list[PreparedEvent]]
    ) -> dict[str, list[RunEvent]]:
        # Source keys are nearly always new: insert assuming so, and only when the
        # unique index objects redo the append looking the keys up first.
        try:
            return await self._append_once(groups, look_up_keys=False)
        except self.duplicate_key:
            pass
        except self.driver_error as exc:
            raise self._translate(exc, "append") from exc
        try:
            return await self._append_once(groups, look_up_keys=True)
        except self.driver_error as exc:
            raise self._translate(exc, "append") from exc

    # -- reading -----------------------------------------------------------------

    async def _page(self, page: Page) -> list[RunEvent]:
        sql, params, descending = page_query(self._select, page, mark=self.mark)
        rows = await self._fetch(sql, params)
        return [self._decode(row) for row in (reversed(rows) if descending else rows)]

    async def _list_events(self, query: RunEventsQuery) -> list[RunEvent]:
        sql, params = run_events_query(
            self._select,
            query,
            mark=self.mark,
            types=lambda types: self._one_of("event_type", types),
            task_id_match=self.task_id_match,
        )
        return [self._decode(row) for row in await self._fetch(sql, params)]

    async def count_messages(
        self, thread_id: str, *, user_id: str | None = None
    ) -> int:
        m = self.mark
        if user_id is not None:
            rows = await self._fetch(
                f"SELECT COUNT(*) FROM {self._events}"
                f" WHERE thread_id = {m} AND category = {m} AND user_id = {m}",
                (thread_id, MESSAGE, user_id),
            )
            return rows[0][0]
        rows = await self._fetch(
            f"SELECT message_count FROM {self._threads} WHERE thread_id = {m}",
            (thread_id,),
        )
        return rows[0][0] if rows else 0

    async def last_seq(self, thread_id: str) -> int:
        rows = await self._fetch(
            f"SELECT last_seq FROM {self._threads} WHERE thread_id = {self.mark}",
            (thread_id,),
        )
        return rows[0][0] if rows else 0

    async def has_thread(self, thread_id: str) -> bool:
        rows = await self._fetch(
            f"SELECT 1 FROM {self._threads} WHERE thread_id = {self.mark} AND event_count > 0",
            (thread_id,),
        )
        return bool(rows)

    async def _list_threads(self, limit: int) -> list[StoredThread]:
        rows = await self._fetch(
            f"SELECT thread_id, last_seq, event_count, updated_at FROM {self._threads}"
            f" WHERE event_count > 0 ORDER BY write_order DESC LIMIT {self.mark}",
            (limit,),
        )
        return self._thread_entries(rows)

    # -- deleting ----------------------------------------------------------------

    async def delete_by_thread(
        self, thread_id: str, *, user_id: str | None = None
    ) -> int:
        if user_id is None:
            return await self._forget_thread(thread_id)
        m = self.mark
        return await self._delete(
            thread_id, f"thread_id = {m} AND user_id = {m}", (thread_id, user_id)
        )

    async def fill_owner(self, thread_id: str, user_id: str) -> int:
        if not isinstance(user_id, str) or not user_id:
            raise InvalidArgument(f"user_id must be a non-empty str, got {user_id!r}")
        m = self.mark
        try:
            async with self._writing([thread_id]) as conn:
                cursor = await conn.execute(
                    f"UPDATE {self._events} SET user_id = {m} WHERE thread_id = {m} AND user_id IS NULL",
                    (user_id, thread_id),
                )
                return cursor.rowcount
        except self.driver_error as exc:
            raise self._translate(exc, "fill owners") from exc

    async def delete_by_run(
        self, thread_id: str, run_id: str, *, user_id: str | None = None
    ) -> int:
        m = self.mark
        params: tuple[str, ...]
        where, params = f"thread_id = {m} AND run_id = {m}", (thread_id, run_id)
        if user_id is not None:
            where, params = f"{where} AND user_id = {m}", (*params, user_id)
        return await self._delete(thread_id, where, params)
