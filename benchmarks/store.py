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
from pathlib import Path
from typing import Any

from journal_bridge.store import RunEventStore, open_store
from tests.harness.bench.store_workload import (
    ROUNDS,
    RUN_APPENDS,
    RawPostgres,
    RawPostgresCopy,
    RawSqlite,
    batches,
    conversation,
    one_run,
    raw_rows,
    sqlite_run_appends,
)

BATCH_SIZES = {1: 900, 20: 6_000, 500: 30_000}  # batch size -> events appended
SMALL_THREAD, LARGE_THREAD = 1_000, 100_000
PAGE, CALLS = 50, 200

# Rows of the figures: appends `(backend, raw driver, batch, store, raw, raw+enc)`, pages
# `(backend, query, small ms, large ms)`.
Rows = list[tuple[Any, ...]]


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


async def sqlite_figures() -> tuple[Rows, Rows, list[tuple[str, float, float]]]:
    """Appends and pages on a SQLite file beside the raw driver, and a run's append cost."""
    with tempfile.TemporaryDirectory(prefix="journal-bench-") as tmp:
        store_path, raw_path = Path(tmp) / "store.db", Path(tmp) / "raw.db"
        async with open_store(f"sqlite:///{raw_path}"):
            pass  # the same table shape for the raw driver
        appends, pages = await bench_backend(
            "sqlite", f"sqlite:///{store_path}", {}, {"executemany": lambda: RawSqlite(str(raw_path))}
        )
        return appends, pages, await sqlite_run_appends(store_path, raw_path)


async def postgres_figures(pg_url: str) -> tuple[Rows, Rows]:
    """Appends and pages in a fresh schema beside the raw driver (`executemany` and `COPY`); the schemas dropped."""
    import psycopg

    store_schema = f"journal_bench_{uuid.uuid4().hex[:8]}"
    raw_schema = f"{store_schema}_raw"
    try:
        async with open_store(pg_url, schema=raw_schema):
            pass
        return await bench_backend(
            "postgres",
            pg_url,
            {"schema": store_schema},
            {
                "executemany": lambda: RawPostgres(pg_url, raw_schema),
                "copy": lambda: RawPostgresCopy(pg_url, raw_schema),
            },
        )
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for schema in (store_schema, raw_schema):
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def print_appends(appends: Rows) -> None:
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


def print_run_costs(run_costs: list[tuple[str, float, float]]) -> None:
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


def print_pages(pages: Rows) -> None:
    print(
        f"\nPage latency, p50 of {CALLS} calls, page of {PAGE}:"
        f" thread of {SMALL_THREAD:,} vs {LARGE_THREAD:,} events"
    )
    print(f"{'backend':<10}{'query':<24}{'1k ms':>9}{'100k ms':>10}{'100k/1k':>10}")
    for name, query, small_ms, large_ms in sorted(pages, key=lambda row: (row[1] != "count_messages", row[1], row[0])):
        print(f"{name:<10}{query:<24}{small_ms:9.3f}{large_ms:10.3f}{large_ms / small_ms:9.2f}x")
    print("  target: 100k/1k <= 1.50x")


async def main() -> int:
    started = time.perf_counter()
    appends, pages, run_costs = await sqlite_figures()
    pg_url = os.environ.get("JOURNAL_BRIDGE_BENCH_POSTGRES_URL") or os.environ.get("JOURNAL_BRIDGE_TEST_POSTGRES_URL")
    if pg_url:
        more_appends, more_pages = await postgres_figures(pg_url)
        appends, pages = appends + more_appends, pages + more_pages
    memory_appends, memory_pages = await bench_backend("memory", "memory://", {}, {})
    print_appends(appends + memory_appends)
    print_run_costs(run_costs)
    print_pages(pages + memory_pages)
    if not pg_url:
        print("postgres: skipped (set JOURNAL_BRIDGE_BENCH_POSTGRES_URL or JOURNAL_BRIDGE_TEST_POSTGRES_URL)")
    print(f"\ntotal {time.perf_counter() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
