"""The spool: a delivery queue's records on local disk until the store holds them.

One SQLite file per queue, in WAL mode: `append` commits before it returns,
so an accepted record survives a process stop or a `kill -9` (not an operating
system crash: commits are not fsynced one by one). The records of a file are
delivered oldest first and removed once the store has them; what a stopped or
killed process left behind is delivered by the next process that opens the
file.

A process holds its file exclusively (SQLite's exclusive locking mode; the
lock goes with the process). A second process of the same queue takes the next
free slot (`tee.spool`, `tee-2.spool`, ...) and adopts the records of every
slot whose owner is gone, appending them to its own.

Each file belongs to one store: its name carries a digest of the store's URL
(without credentials or query), so records are never delivered into another
journal. `spool_path` says where a queue's file lives.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import logging
import re
import sqlite3
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

import aiosqlite

from journal_bridge.model.envelope import RunEvent, dumps, prepare_event

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_SPOOL_DIR", "Spool", "SpooledRecord", "redact_url", "encode", "spool_path"]

DEFAULT_SPOOL_DIR = ".journal-bridge-spool"
_MAX_SLOTS = 32
_ROWS_PER_INSERT = 300  # 3 parameters each, well below SQLite's limit per statement
_MIRROR_SIZE = 10_000
_CACHE_KIB = 64
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS spool ("
    " id INTEGER PRIMARY KEY, spooled_at REAL NOT NULL, record TEXT NOT NULL)"
)

SpooledRecord = tuple[int, RunEvent]


def redact_url(url: str) -> str:
    """The store URL without credentials: no user info, no query string."""
    without_query = url.split("?", 1)[0].split("#", 1)[0]
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@", r"\1", without_query)


def spool_path(store_url: str, queue: str, directory: str | Path | None = None) -> Path | None:
    """Where queue `queue` spools the records bound for `store_url`.

    In `directory` (the setting `JOURNAL_BRIDGE_SPOOL_DIR`), else
    `.journal-bridge-spool/` next to a SQLite store's file or in the working
    directory. None for a
    `memory://` store, which does not outlive the process either.
    """
    if store_url.split(":", 1)[0].lower() == "memory":
        return None
    if directory is None:
        if store_url.lower().startswith("sqlite:"):
            from journal_bridge.store.sqlite import sqlite_path_from_url

            directory = Path(sqlite_path_from_url(store_url)).resolve().parent / DEFAULT_SPOOL_DIR
        else:
            directory = Path.cwd() / DEFAULT_SPOOL_DIR
    digest = hashlib.sha256(redact_url(store_url).encode()).hexdigest()[:12]
    return Path(directory) / f"{queue}-{digest}.spool"


def _slot(path: Path, n: int) -> Path:
    return path if n == 1 else path.with_name(f"{path.stem}-{n}{path.suffix}")


def encode(record: RunEvent) -> str:
    """The spooled form of `record`: its content and metadata as the store would
    encode them (coerced, not truncated). Raises `InvalidEvent` like the store."""
    prepared = prepare_event(record, sys.maxsize)
    event = prepared.event
    head = dumps(
        [event.thread_id, event.run_id, event.event_type, event.category,
         event.created_at.isoformat(), event.source_key]
    )
    return f"[{head},{prepared.content_json},{prepared.metadata_json}]"


def _decode(text: str) -> RunEvent:
    (thread_id, run_id, event_type, category, created_at, source_key), content, metadata = json.loads(text)
    return RunEvent(
        thread_id, run_id, event_type, category, content, metadata,
        datetime.fromisoformat(created_at), None, source_key,
    )


class Spool:
    """Records waiting for the store, oldest first. `path=None` keeps them in memory only.

    `clock` (wall-clock seconds) stamps each record when spooled, for its age.

    Not safe for concurrent `remove`: one delivery writer owns the head.
    """

    def __init__(self, path: str | Path | None, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.requested_path = Path(path) if path is not None else None
        self.path: Path | None = None
        self._conn: aiosqlite.Connection | None = None
        self._next_id = 1
        self._committed_through = 0
        self._append_lock = asyncio.Lock()
        # The oldest waiting records as objects, so that delivery reads no file while it keeps up.
        self._mirror: deque[tuple[int, float, RunEvent]] = deque()
        self.size = 0
        self.recovered = 0
        self.head_spooled_at: float | None = None

    async def open(self) -> None:
        """Open (or create) the file and take its lock; then adopt orphaned slots.

        A file that cannot be opened leaves the spool in memory, with an error
        logged: delivery goes on, without surviving a restart.
        """
        if self._conn is not None:
            return
        if self.requested_path is not None:
            try:
                await self._open_slot(self.requested_path)
            except (OSError, sqlite3.Error) as exc:
                logger.error(
                    "journal-bridge: cannot use spool %s (%s); records stay in memory only",
                    self.requested_path,
                    exc,
                )
        if self._conn is None:
            self._conn = await self._connect(":memory:")
        await self._load_state()
        self.recovered = self.size
        if self.path is not None:
            await self._adopt_orphans(self.requested_path)  # type: ignore[arg-type]
        if self.size:
            logger.info("journal-bridge: %d spooled records from before to deliver (%s)", self.size, self.path)

    async def _connect(self, target: str) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(target, isolation_level=None, timeout=0)
        try:
            # Exclusive locking: the lock is taken by the first write and held
            # until close or process death, so two processes never share a slot.
            await conn.execute("PRAGMA locking_mode = EXCLUSIVE")
            await conn.execute("PRAGMA journal_mode = WAL")
            await conn.execute("PRAGMA synchronous = NORMAL")
            # Records are appended at the end and delivered from the front: a
            # few pages are all it rereads (SQLite's default keeps about 2 MiB).
            await conn.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
            await conn.execute("BEGIN EXCLUSIVE")
            await conn.execute(_SCHEMA)
            await conn.execute("COMMIT")
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _open_slot(self, base: Path) -> None:
        # Only the spool directory itself: creating a store's missing directory
        # would change what the store sees.
        base.parent.mkdir(exist_ok=True)
        for n in range(1, _MAX_SLOTS + 1):
            candidate = _slot(base, n)
            try:
                self._conn = await self._connect(str(candidate))
            except sqlite3.OperationalError as exc:
                if "locked" in str(exc):
                    continue  # another live process owns this slot
                raise
            self.path = candidate
            return
        raise OSError(f"all {_MAX_SLOTS} spool slots of {base} are in use")

    async def _load_state(self) -> None:
        assert self._conn is not None
        rows = await self._conn.execute_fetchall("SELECT COUNT(*), MAX(id) FROM spool")
        count, last = next(iter(rows))
        self.size = int(count)
        self._next_id = int(last or 0) + 1
        self._committed_through = self._next_id - 1
        self._mirror.clear()
        first = await self._conn.execute_fetchall("SELECT spooled_at FROM spool ORDER BY id LIMIT 1")
        self.head_spooled_at = next((row[0] for row in first), None)

    async def _adopt_orphans(self, base: Path) -> None:
        """Move the records of slots whose process is gone into this one, in their order."""
        for n in range(1, _MAX_SLOTS + 1):
            other = _slot(base, n)
            if other == self.path or not other.exists():
                continue
            try:
                conn = await self._connect(str(other))
            except sqlite3.Error:
                continue  # owned by a live process, or not a spool we can read
            try:
                rows = list(await conn.execute_fetchall("SELECT spooled_at, record FROM spool ORDER BY id"))
                if rows:
                    await self._insert([(at, text) for at, text in rows], None)
                    self.recovered += len(rows)
                    await conn.execute("DELETE FROM spool")
                    logger.info("journal-bridge: adopted %d spooled records from %s", len(rows), other)
            finally:
                await conn.close()

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def append(self, records: Sequence[RunEvent], encoded: Sequence[str]) -> None:
        """Spool `records` (and their `encode`d form) after everything spooled before;
        returns once committed. Cancelling the caller does not cancel the commit."""
        if records:
            now = self._clock()
            await self._insert([(now, text) for text in encoded], list(records))

    async def _insert(self, rows: list[tuple[float, str]], records: list[RunEvent] | None) -> None:
        assert self._conn is not None, "spool is not open"
        conn = self._conn
        first = self._next_id
        self._next_id += len(rows)

        async def commit() -> None:
            async with self._append_lock:
                for start in range(0, len(rows), _ROWS_PER_INSERT):
                    chunk = rows[start : start + _ROWS_PER_INSERT]
                    values = ",".join(["(?, ?, ?)"] * len(chunk))
                    params = [v for i, (at, text) in enumerate(chunk, first + start) for v in (i, at, text)]
                    await conn.execute(f"INSERT INTO spool (id, spooled_at, record) VALUES {values}", params)
                # The mirror stays a prefix of what waits: it takes records only while it holds all of them.
                if records is not None and len(self._mirror) == self.size and self.size + len(rows) <= _MIRROR_SIZE:
                    self._mirror.extend(
                        (first + i, at, record) for i, ((at, _), record) in enumerate(zip(rows, records, strict=True))
                    )
                if self.size == 0:
                    self.head_spooled_at = rows[0][0]
                self.size += len(rows)
                self._committed_through = first + len(rows) - 1

        await asyncio.shield(asyncio.ensure_future(commit()))

    @property
    def last_id(self) -> int:
        """The id of the last record appended so far (0: none yet)."""
        return self._next_id - 1

    async def head(self, limit: int) -> list[SpooledRecord]:
        """The oldest `limit` records, with their ids."""
        assert self._conn is not None, "spool is not open"
        if self._mirror:
            self.head_spooled_at = self._mirror[0][1]
            return [(row_id, record) for row_id, _, record in itertools.islice(self._mirror, limit)]
        if not self.size:
            return []
        rows = await self._conn.execute_fetchall(
            "SELECT id, spooled_at, record FROM spool WHERE id <= ? ORDER BY id LIMIT ?",
            (self._committed_through, limit),
        )
        out: list[SpooledRecord] = []
        for row_id, spooled_at, text in rows:
            if not out:
                self.head_spooled_at = spooled_at
            out.append((row_id, _decode(text)))
        return out

    async def remove_thread(self, thread_id: str) -> int:
        """Forget every waiting record of `thread_id` (its thread was deleted); how many.

        The caller holds off delivery meanwhile (the queue's store lock)."""
        assert self._conn is not None, "spool is not open"
        conn = self._conn

        async def delete() -> int:
            async with self._append_lock:
                cursor = await conn.execute(
                    "DELETE FROM spool WHERE json_extract(record, '$[0][0]') = ?", (thread_id,)
                )
                removed = max(cursor.rowcount, 0)
                self._mirror = deque(entry for entry in self._mirror if entry[2].thread_id != thread_id)
                self.size = max(0, self.size - removed)
                if self._mirror:
                    self.head_spooled_at = self._mirror[0][1]
                elif self.size == 0:
                    self.head_spooled_at = None
                return removed

        return await asyncio.shield(asyncio.ensure_future(delete()))

    async def remove_through(self, last_id: int) -> None:
        """Forget every record up to and including `last_id` (delivered or dropped).
        Cancelling the caller does not cancel the removal."""
        assert self._conn is not None, "spool is not open"
        conn = self._conn

        async def delete() -> None:
            cursor = await conn.execute("DELETE FROM spool WHERE id <= ?", (last_id,))
            while self._mirror and self._mirror[0][0] <= last_id:
                self._mirror.popleft()
            self.size = max(0, self.size - max(cursor.rowcount, 0))
            if self._mirror:
                self.head_spooled_at = self._mirror[0][1]
            elif self.size == 0:
                self.head_spooled_at = None

        await asyncio.shield(asyncio.ensure_future(delete()))
