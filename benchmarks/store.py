"""Run event store benchmark: the store next to its raw driver, side by side.

    python3 tasks.py bench store

Per backend (sqlite; postgres when JOURNAL_BRIDGE_BENCH_POSTGRES_URL or
JOURNAL_BRIDGE_TEST_POSTGRES_URL is set; memory):

* append throughput at batch sizes 1, 20 and 500, next to the raw driver
  inserting the same rows (`executemany` in one transaction per batch, into a
  table of the same shape; on Postgres also `COPY`, the fastest the driver
  can write). Target at batch 500: store >= 0.7x raw.
* a run's append on SQLite: one run's records (a new thread each, one
  transaction) cost the writer connection's thread, in CPU per run, next to
  the raw driver inserting the same rows in one transaction from its own
  thread; and the process's CPU per run, the caller's side included (what a
  server pays per journaled run for storing it).
* p50 latency of `count_messages` and of a 50-record page (`list_messages`,
  `list_timeline`; the newest page and a page in the middle) in a thread of
  1,000 events vs one of 100,000 events. Target: ratio <= 1.5 (a count must
  not scan the thread; a page costs the page, not the thread).

Nothing is asserted; the numbers are printed.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
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
from journal_bridge.store import RunEventStore, open_store
from journal_bridge.store.sqlite import SqliteRunEventStore, run_in_connection_thread

BATCH_SIZES = {1: 900, 20: 6_000, 500: 30_000}  # batch size -> events appended
RUN_APPENDS = 600  # runs appended per round of the run-append figure
ROUNDS = 3
SMALL_THREAD, LARGE_THREAD = 1_000, 100_000
PAGE, CALLS = 50, 200

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


# -- measurements --------------------------------------------------------------


async def store_throughput(store: RunEventStore, size: int, total: int) -> float:
    events = conversation(f"append-{size}-{uuid.uuid4().hex[:6]}", total)
    started = time.perf_counter()
    for batch in batches(events, size):
        await store.put_batch(batch)
    return total / (time.perf_counter() - started)


async def raw_throughput(
    raw: Any, size: int, total: int, *, encode: bool = False
) -> float:
    """The driver alone; with `encode`, turning events into rows is timed too."""
    events = conversation(f"raw-{size}-{uuid.uuid4().hex[:6]}", total)
    if not encode:
        rows = raw_rows(events, encode_time=raw.encode_time)
        started = time.perf_counter()
        for batch in batches(rows, size):
            await raw.insert(batch)
        return total / (time.perf_counter() - started)
    started = time.perf_counter()
    for start in range(0, total, size):
        await raw.insert(
            raw_rows(events[start : start + size], start + 1, raw.encode_time)
        )
    return total / (time.perf_counter() - started)


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


async def p50_ms(call: Callable[[], Awaitable[Any]]) -> float:
    for _ in range(10):  # warm caches and prepared statements
        await call()
    samples = []
    for _ in range(CALLS):
        started = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


async def fill(store: RunEventStore, thread_id: str, count: int) -> None:
    for batch in batches(conversation(thread_id, count), 500):
        await store.put_batch(batch)


async def page_latencies(store: RunEventStore) -> list[tuple[str, float, float]]:
    small, large = f"small-{uuid.uuid4().hex[:6]}", f"large-{uuid.uuid4().hex[:6]}"
    await fill(store, small, SMALL_THREAD)
    await fill(store, large, LARGE_THREAD)
    results = []
    for name, query in (
        ("count_messages", lambda t, n: store.count_messages(t)),
        ("list_messages newest", lambda t, n: store.list_messages(t, limit=PAGE)),
        (
            "list_messages middle",
            lambda t, n: store.list_messages(t, limit=PAGE, before_seq=n // 2),
        ),
        ("list_timeline newest", lambda t, n: store.list_timeline(t, limit=PAGE)),
        (
            "list_timeline middle",
            lambda t, n: store.list_timeline(t, limit=PAGE, after_seq=n // 2),
        ),
    ):
        first = await query(small, SMALL_THREAD)
        assert first > 0 if isinstance(first, int) else len(first) == PAGE
        small_ms = await p50_ms(lambda q=query: q(small, SMALL_THREAD))
        large_ms = await p50_ms(lambda q=query: q(large, LARGE_THREAD))
        results.append((name, small_ms, large_ms))
    return results


async def bench_backend(
    name: str,
    store_url: str,
    options: dict[str, Any],
    raws: dict[str, Callable[[], Any]],
) -> tuple[list[tuple], list[tuple]]:
    """Append rows `(backend, raw driver, batch, store, raw, raw+enc)` and page rows."""
    appends = []
    async with open_store(store_url, **options) as store:
        for size, total in BATCH_SIZES.items():
            # Alternate store and raw rounds and keep each one's best, so that
            # noise from other processes does not favour whichever ran first.
            store_rates: list[float] = []
            raw_rates: dict[str, list[float]] = {raw: [] for raw in raws}
            encoded_rates: dict[str, list[float]] = {raw: [] for raw in raws}
            for _ in range(ROUNDS):
                store_rates.append(await store_throughput(store, size, total // ROUNDS))
                for raw_name, factory in raws.items():
                    async with factory() as raw:
                        raw_rates[raw_name].append(await raw_throughput(raw, size, total // ROUNDS))
                        encoded_rates[raw_name].append(
                            await raw_throughput(raw, size, total // ROUNDS, encode=True)
                        )
            if not raws:
                appends.append((name, "-", size, max(store_rates), None, None))
            for raw_name in raws:
                appends.append(
                    (name, raw_name, size, max(store_rates), max(raw_rates[raw_name]), max(encoded_rates[raw_name]))
                )
        pages = [(name, *row) for row in await page_latencies(store)]
    return appends, pages


async def main() -> int:
    started = time.perf_counter()
    appends: list[tuple] = []
    pages: list[tuple] = []
    notes: list[str] = []

    with tempfile.TemporaryDirectory(prefix="journal-bench-") as tmp:
        store_path, raw_path = Path(tmp) / "store.db", Path(tmp) / "raw.db"
        async with open_store(f"sqlite:///{raw_path}"):
            pass  # the same table shape for the raw driver
        a, p = await bench_backend(
            "sqlite", f"sqlite:///{store_path}", {}, {"executemany": lambda: RawSqlite(str(raw_path))}
        )
        appends += a
        pages += p
        run_costs = await sqlite_run_appends(store_path, raw_path)

    pg_url = os.environ.get("JOURNAL_BRIDGE_BENCH_POSTGRES_URL") or os.environ.get(
        "JOURNAL_BRIDGE_TEST_POSTGRES_URL"
    )
    if pg_url:
        import psycopg

        store_schema = f"journal_bench_{uuid.uuid4().hex[:8]}"
        raw_schema = f"{store_schema}_raw"
        try:
            async with open_store(pg_url, schema=raw_schema):
                pass
            a, p = await bench_backend(
                "postgres",
                pg_url,
                {"schema": store_schema},
                {
                    "executemany": lambda: RawPostgres(pg_url, raw_schema),
                    "copy": lambda: RawPostgresCopy(pg_url, raw_schema),
                },
            )
            appends += a
            pages += p
        finally:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                for schema in (store_schema, raw_schema):
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    else:
        notes.append(
            "postgres: skipped (set JOURNAL_BRIDGE_BENCH_POSTGRES_URL or"
            " JOURNAL_BRIDGE_TEST_POSTGRES_URL)"
        )

    a, p = await bench_backend("memory", "memory://", {}, {})
    appends += a
    pages += p

    print(
        f"\nAppend throughput (events/s, best of {ROUNDS} alternating rounds)."
        "\n  raw: the driver writing the same rows (executemany, or COPY), already"
        " encoded, one transaction per batch\n  raw+enc: the same, with JSON/timestamp"
        " encoding of the events timed too (what any caller of the driver must do)"
    )
    print(
        f"{'backend':<9}{'driver':<12}{'batch':>6}{'store':>10}{'raw':>10}{'store/raw':>11}"
        f"{'raw+enc':>10}{'store/raw+enc':>15}"
    )
    for name, driver, size, store_rate, raw_rate, encoded_rate in appends:
        if raw_rate:
            tail = (
                f"{raw_rate:10,.0f}{store_rate / raw_rate:10.2f}x"
                f"{encoded_rate:10,.0f}{store_rate / encoded_rate:14.2f}x"
            )
        else:
            tail = f"{'-':>10}{'-':>11}{'-':>10}{'-':>15}"
        print(f"{name:<9}{driver:<12}{size:>6}{store_rate:10,.0f}{tail}")
    print("  target: store/raw+enc >= 0.70x at batch 500")

    print(
        f"\nA run's append on SQLite ({len(one_run('x'))} records, a new thread, one transaction; CPU ms per run,"
        f" best of {ROUNDS} alternating rounds of {RUN_APPENDS} runs)"
        "\n  writer thread: the connection's own thread; process: the whole process, the caller's side included"
    )
    print(f"{'writer':<10}{'thread ms':>11}{'process ms':>12}")
    for name, thread_ms, process_ms in run_costs:
        print(f"{name:<10}{thread_ms:11.3f}{process_ms:12.3f}")
    (_, store_thread, store_process), (_, raw_thread, raw_process) = run_costs
    print(f"{'store/raw':<10}{store_thread / raw_thread:10.2f}x{store_process / raw_process:11.2f}x")

    print(
        f"\nPage latency, p50 of {CALLS} calls, page of {PAGE}:"
        f" thread of {SMALL_THREAD:,} vs {LARGE_THREAD:,} events"
    )
    print(f"{'backend':<10}{'query':<24}{'1k ms':>9}{'100k ms':>10}{'100k/1k':>10}")
    pages.sort(key=lambda row: (row[1] != "count_messages", row[1], row[0]))
    for name, query, small_ms, large_ms in pages:
        print(
            f"{name:<10}{query:<24}{small_ms:9.3f}{large_ms:10.3f}{large_ms / small_ms:9.2f}x"
        )
    print("  target: 100k/1k <= 1.50x")

    for note in notes:
        print(note)
    print(f"\ntotal {time.perf_counter() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
