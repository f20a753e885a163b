"""The store benchmark's workload: records shaped like real runs, and the raw drivers beside the store.

`conversation` makes records as runs write them (mostly messages, run records,
a marker now and then); `RawSqlite`, `RawPostgres` and `RawPostgresCopy` write
the same rows into a table of the store's shape with the driver alone, the
least any store could cost; `sqlite_run_appends` clocks one short run's
append on the writer connection's thread, the store's against the driver's.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Self

from journal_bridge.model.envelope import (
    LLM_AI_RESPONSE,
    LLM_HUMAN_INPUT,
    LLM_TOOL_RESULT,
    MIDDLEWARE_SUMMARIZE,
    RUN_END,
    RUN_START,
    RunEvent,
    dumps,
    make_event,
)
from journal_bridge.store import open_store
from journal_bridge.store.sqlite import SqliteRunEventStore, run_in_connection_thread

RUN_APPENDS = 600  # runs appended per round of the run-append figure
ROUNDS = 3

_COLUMNS = "thread_id, seq, run_id, event_type, category, content, metadata, created_at, source_key"


def conversation(thread_id: str, count: int, tag: str = "") -> list[RunEvent]:
    """`count` events shaped like real runs: mostly messages, run records, a marker now and then."""
    out: list[RunEvent] = []
    i = 0
    while len(out) < count:
        run_id = f"run-{tag}{i // 20}"
        step = i % 20
        if step == 0:
            kind, content = RUN_START, {"input": {"messages": 1}}
        elif step == 19:
            kind, content = RUN_END, {"status": "success"}
        elif step == 10 and (i // 20) % 5 == 4:
            kind, content = (
                MIDDLEWARE_SUMMARIZE,
                {
                    "name": "summarization",
                    "action": "summarize",
                    "changes": {
                        "replaced_count": 40,
                        "summary": "The user asked ... " * 5,
                    },
                },
            )
        else:
            kind = (LLM_HUMAN_INPUT, LLM_AI_RESPONSE, LLM_TOOL_RESULT)[step % 3]
            content = {
                "type": "ai",
                "id": f"msg-{tag}{i}",
                "content": "Here is a reasonably sized answer about the question. " * 4,
                "tool_calls": [],
                "response_metadata": {"model": "offline", "finish_reason": "stop"},
            }
        out.append(
            make_event(
                thread_id=thread_id,
                run_id=run_id,
                event_type=kind,
                content=content,
                metadata={"caller": "agent"} if kind == LLM_AI_RESPONSE else {},
                source_key=f"{tag}{i}",
            )
        )
        i += 1
    return out


def raw_rows(
    events: list[RunEvent],
    start: int = 1,
    encode_time: Callable[[Any], Any] | None = None,
) -> list[tuple[Any, ...]]:
    """The rows a store would write for `events`, seqs from `start`."""
    return [
        (
            e.thread_id,
            seq,
            e.run_id,
            e.event_type,
            e.category,
            dumps(e.content),
            dumps(e.metadata),
            e.created_at if encode_time is None else encode_time(e.created_at),
            e.source_key,
        )
        for seq, e in enumerate(events, start=start)
    ]


def batches(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


# -- raw drivers ---------------------------------------------------------------


class RawSqlite:
    def __init__(self, path: str) -> None:
        self.path = path

    async def __aenter__(self) -> Self:
        import aiosqlite

        self.conn = await aiosqlite.connect(self.path, isolation_level=None)
        await self.conn.execute("PRAGMA journal_mode = WAL")
        await self.conn.execute("PRAGMA synchronous = NORMAL")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.conn.close()

    encode_time = staticmethod(datetime.isoformat)
    INSERT = f"INSERT INTO journal_events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"

    async def insert_in_thread(self, rows: list[tuple[Any, ...]]) -> None:
        """`insert`, the transaction in one call to the connection's thread (as the store's is)."""

        def transaction(raw: Any) -> None:
            raw.execute("BEGIN")
            raw.executemany(self.INSERT, rows)
            raw.execute("COMMIT")

        await run_in_connection_thread(self.conn, transaction)

    async def insert(self, rows: list[tuple[Any, ...]]) -> None:
        await self.conn.execute("BEGIN")
        await self.conn.executemany(self.INSERT, rows)
        await self.conn.execute("COMMIT")


class RawPostgres:
    encode_time = None

    def __init__(self, url: str, schema: str) -> None:
        self.url, self.schema = url, schema

    async def __aenter__(self) -> Self:
        import psycopg

        self.conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.conn.close()

    async def insert(self, rows: list[tuple[Any, ...]]) -> None:
        async with self.conn.transaction(), self.conn.cursor() as cursor:
            await cursor.executemany(
                f'INSERT INTO "{self.schema}".journal_events ({_COLUMNS})'
                " VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s)",
                rows,
            )


class RawPostgresCopy(RawPostgres):
    """The same rows through `COPY ... FROM STDIN`, one transaction per batch."""

    async def insert(self, rows: list[tuple[Any, ...]]) -> None:
        async with self.conn.transaction(), self.conn.cursor() as cursor:
            async with cursor.copy(
                f'COPY "{self.schema}".journal_events ({_COLUMNS}) FROM STDIN'
            ) as copy:
                for row in rows:
                    await copy.write_row(row)


def one_run(thread_id: str) -> list[RunEvent]:
    """A short run's records (start, messages, end), as a run nobody streams writes them at once."""
    events = conversation(thread_id, 5, tag=f"{thread_id}-")
    end = make_event(
        thread_id=thread_id,
        run_id=events[0].run_id,
        event_type=RUN_END,
        content={"status": "success"},
        source_key=f"{thread_id}-end",
    )
    return [*events, end]


async def _thread_cpu(conn: Any) -> float:
    """CPU seconds an aiosqlite connection's own thread has used so far."""
    return await run_in_connection_thread(conn, lambda _raw: time.thread_time())


async def run_appends(writer: Any, append: Callable[[list[RunEvent]], Awaitable[Any]]) -> tuple[float, float]:
    """Append `RUN_APPENDS` runs, each on a new thread: the writer thread's and the process's CPU ms per run."""
    runs = [one_run(f"run-append-{uuid.uuid4().hex[:12]}") for _ in range(RUN_APPENDS)]
    thread_before, process_before = await _thread_cpu(writer), time.process_time()
    for events in runs:
        await append(events)
    thread_after, process_after = await _thread_cpu(writer), time.process_time()
    return (thread_after - thread_before) * 1000 / RUN_APPENDS, (process_after - process_before) * 1000 / RUN_APPENDS


async def sqlite_run_appends(store_path: Path, raw_path: Path) -> list[tuple[str, float, float]]:
    """`(writer, thread ms, process ms)` per run for the store and the raw driver: of alternating
    rounds, each one's round whose writer thread took the least."""
    best: dict[str, tuple[float, float]] = {}
    async with open_store(f"sqlite:///{store_path}") as store, RawSqlite(str(raw_path)) as raw:
        assert isinstance(store, SqliteRunEventStore)

        async def raw_append(events: list[RunEvent]) -> None:
            await raw.insert_in_thread(raw_rows(events, encode_time=raw.encode_time))

        for _ in range(ROUNDS):
            for name, writer, append in (
                ("store", store._writer, store.put_batch),  # noqa: SLF001 - the thread to clock
                ("raw", raw.conn, raw_append),
            ):
                figures = await run_appends(writer, append)
                best[name] = min(best.get(name, figures), figures)
    return [(name, *figures) for name, figures in best.items()]
