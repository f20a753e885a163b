"""Journaling in a distributed LangGraph Server: 1 vs 2 vs 3 server processes.

For each size, a fresh deployment of langgraph-runtime-pg (`langhost serve`,
the plugin in every process) on the same PostgreSQL and Redis, with one
PostgreSQL journal. The same workload runs against each: `--threads`
conversations in parallel, `--turns` turns each, every turn sent through the
next process in turn (runs execute wherever the queue hands them). Prints, side
by side:

- journal throughput: records written by all processes per second of workload
  (from the first request until every process's journal is idle)
- lag from a compaction (its `summarization` custom frame reaching the client)
  to its marker row being readable in the journal (p50, p99)
- reads per run: how many times the processes together read each run's stream
  (their `runs_read` counters, `runs_observed` where a plugin has none; 1.0 is
  one reader per run), and how many times runs were handed over to them
- server CPU per run: user + system CPU seconds of every server process (and
  its children, from psutil) over the workload and the reconcilers' passes
  after it, divided by the number of runs

With `--kills N` (sizes of 2 or more), each deployment then goes through N
rounds of kills: `--threads` fresh threads each stream a turn through the first
process while the others execute; once every run has answered in part, the
process executing most of them is killed with SIGKILL and started again on its
working directory, and the runtime executes its runs again. Printed per size:
runs executed again, client streams that saw a second attempt, the journal's
attempt forks, threads whose history is exactly their branch of checkpoints
(one attempt per run), messages shown twice, and messages a client saw that
the thread kept but the history lacks.

Needs PostgreSQL and Redis: `JOURNAL_BRIDGE_TEST_POSTGRES_URL` /
`JOURNAL_BRIDGE_TEST_REDIS_URL`, or Debian's packages installed (started here).
Run: `python3 tasks.py bench distributed [--threads 4] [--turns 6] [--sizes 1,2,3] [--settle 8]
[--seconds-per-token 0.05] [--kills 0]` (the offline model's pace: a run that ends before another process's
reconciler looks is read once whatever the processes do).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import psutil
from langgraph_sdk import get_client

from journal_bridge.store import open_store
from tests.harness.bench.compaction_lag import turn_compaction_lags
from tests.harness.bench.process_cpu import process_seconds, tree
from tests.harness.conversation import EARLY_SUMMARIZATION, TURNS, wait_journal_idle
from tests.harness.kills import (
    ClientView,
    attempt_forks,
    executed_again,
    running_on,
    stream_viewed,
    until_history_is_branch,
)
from tests.harness.langhost_server import LanghostServer, ensure_pg_runtime_venv
from tests.harness.services import create_database, postgres_server, redis_server


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def cpu_seconds(servers: list[LanghostServer]) -> dict[int, float]:
    """CPU seconds so far of each server process and of each of its children, by pid."""
    seconds: dict[int, float] = {}
    for server in servers:
        assert server.process is not None
        for process in tree(server.process.pid):
            try:
                seconds[process.pid] = process_seconds(process)
            except psutil.NoSuchProcess:
                continue
    return seconds


async def health(url: str) -> dict:
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        return (await http.get("/journal/health")).json()


async def all_runs(client, thread_ids: list[str]) -> list[dict]:
    return [run for thread_id in thread_ids for run in await client.runs.list(thread_id)]


async def kill_rounds(servers: list[LanghostServer], assistant_id: str, threads: int, rounds: int) -> dict[str, float]:
    """`rounds` kills of the process executing most runs (never the first, which the
    clients stream through), each while `threads` streamed runs are answering."""
    client = get_client(url=servers[0].url)
    thread_ids = [(await client.threads.create())["thread_id"] for _ in range(threads)]
    await asyncio.gather(*(client.runs.wait(t, assistant_id, input={"messages": [{"role": "user", "content": TURNS[0]}]})
                           for t in thread_ids))
    views: list[ClientView] = []
    for round_ in range(rounds):
        text = TURNS[1 + round_ % (len(TURNS) - 1)]
        round_views = [ClientView() for _ in thread_ids]
        views += round_views
        streams = [asyncio.create_task(stream_viewed(client, t, assistant_id, text, v))
                   for t, v in zip(thread_ids, round_views)]
        while not all(view.messages >= 4 or view.error or task.done() for view, task in zip(round_views, streams)):
            await asyncio.sleep(0.05)
        victim = max(servers[1:], key=lambda s: len(running_on(s)))
        victim.kill()
        victim.start()
        await asyncio.gather(*streams)
        while any(r["status"] in ("pending", "running") for r in await all_runs(client, thread_ids)):
            await asyncio.sleep(0.2)
    for server in servers:
        await wait_journal_idle(server.url, timeout=300)
    found = await until_history_is_branch(servers[0].url, client, thread_ids, timeout=120)
    branch = duplicates = missing = forks = 0
    for thread_id, (shown_items, expected, items) in found.items():
        branch += shown_items == expected
        ids = [item["id"] for item in items if item.get("id")]
        duplicates += len(ids) - len(set(ids))
        runs = {r["run_id"] for r in await client.runs.list(thread_id)}
        for view in views:
            if view.run_id in runs:
                missing += len(set(view.message_ids) & set(expected) - set(ids))
        forks += len(await attempt_forks(servers[0].url, thread_id))
    return {"kills": rounds, "runs": len(views), "again": len(await executed_again(client, thread_ids)),
            "second_attempts_seen": sum(1 for v in views if max(v.attempts or [1]) > 1), "forks": forks,
            "branch": branch, "threads": threads, "duplicates": duplicates, "missing": missing}


async def run_size(
    size: int, postgres_url: str, redis_url: str, threads: int, turns: int, settle: float, per_token: float,
    kills: int = 0,
) -> dict[str, float]:
    name = uuid.uuid4().hex[:8]
    database = create_database(postgres_url, f"bench_runtime_{name}")
    journal = create_database(postgres_url, f"bench_journal_{name}")
    bin_dir = ensure_pg_runtime_venv()
    root = Path(tempfile.mkdtemp(prefix=f"journal-bridge-bench-{size}-"))
    servers = []
    try:
        for index in range(size):
            server = LanghostServer(bin_dir, root / f"server-{index}", database_url=database,
                                    redis_url=redis_url, store_url=journal, n_jobs=2,
                                    env={"JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN": str(per_token),
                                         # A killed process's runs are executed again within seconds.
                                         **({"LG_BG_JOB_HEARTBEAT": "1"} if kills else {})})
            servers.append(server.start())
        clients = [get_client(url=server.url) for server in servers]
        assistant = await clients[0].assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
        lags: list[float] = []

        async with open_store(journal) as store:
            async def conversation(offset: int) -> None:
                thread_id = (await clients[offset % size].threads.create())["thread_id"]
                for turn in range(turns):
                    client = clients[(offset + turn) % size]
                    lags.extend(await turn_compaction_lags(client, store, thread_id, assistant["assistant_id"],
                                                           TURNS[turn % len(TURNS)], ["custom"], poll=0.005))

            cpu_before = cpu_seconds(servers)
            started = time.perf_counter()
            await asyncio.gather(*(conversation(i) for i in range(threads)))
            written = 0
            for server in servers:
                written += (await wait_journal_idle(server.url, timeout=300))["records_written"]
            elapsed = time.perf_counter() - started
            # The reconcilers' passes after the last run (joins, backfills, takeovers) count too.
            await asyncio.sleep(settle)
            for server in servers:
                await wait_journal_idle(server.url, timeout=300)
            cpu_after = cpu_seconds(servers)
            reports = [await health(server.url) for server in servers]
        runs = threads * turns
        killed = await kill_rounds(servers, assistant["assistant_id"], threads, kills) if kills and size > 1 else None
        cpu = sum(after - cpu_before.get(pid, 0.0) for pid, after in cpu_after.items())
        reads = sum(r.get("runs_read", r["runs_observed"]) for r in reports)
        handed = sum(r["runs_observed"] for r in reports)
        return {"records": written, "seconds": elapsed, "rate": written / elapsed,
                "p50": pct(lags, 0.5), "p99": pct(lags, 0.99), "compactions": len(lags),
                "reads_per_run": reads / runs, "handed_per_run": handed / runs, "cpu_per_run": cpu / runs,
                "killed": killed}
    finally:
        for server in servers:
            server.stop()


async def main(sizes: list[int], threads: int, turns: int, settle: float, per_token: float, kills: int = 0) -> None:
    with postgres_server() as postgres_url, redis_server() as redis_url:
        results = {size: await run_size(size, postgres_url, redis_url, threads, turns, settle, per_token, kills)
                   for size in sizes}
    print(f"\n{threads} conversations x {turns} turns, every turn through the next process,"
          f" {per_token} s per model token\n")
    print(f"{'processes':>9} | {'records':>7} | {'seconds':>7} | {'records/s':>9} | "
          f"{'compactions':>11} | {'lag p50 ms':>10} | {'lag p99 ms':>10} | "
          f"{'reads/run':>9} | {'handed/run':>10} | {'CPU s/run':>9}")
    for size, r in results.items():
        print(f"{size:>9} | {r['records']:>7} | {r['seconds']:>7.1f} | {r['rate']:>9.1f} | "
              f"{r['compactions']:>11} | {r['p50'] * 1000:>10.1f} | {r['p99'] * 1000:>10.1f} | "
              f"{r['reads_per_run']:>9.2f} | {r['handed_per_run']:>10.2f} | {r['cpu_per_run']:>9.3f}")
    killed = {size: r["killed"] for size, r in results.items() if r["killed"]}
    if killed:
        print(f"\nkills: {kills} rounds of {threads} streamed runs each, the process executing most of them"
              " killed with SIGKILL and started again\n")
        print(f"{'processes':>9} | {'runs':>4} | {'executed again':>14} | {'saw attempt 2':>13} | "
              f"{'attempt forks':>13} | {'history = branch':>16} | {'shown twice':>11} | {'seen, missing':>13}")
        for size, k in killed.items():
            print(f"{size:>9} | {k['runs']:>4} | {k['again']:>14} | {k['second_attempts_seen']:>13} | "
                  f"{k['forks']:>13} | {str(k['branch']) + ' of ' + str(k['threads']):>16} | "
                  f"{k['duplicates']:>11} | {k['missing']:>13}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--sizes", default="1,2,3")
    parser.add_argument("--settle", type=float, default=8.0,
                        help="seconds the reconcilers get after the last run before CPU and reads are counted")
    parser.add_argument("--seconds-per-token", type=float, default=0.05,
                        help="the offline model's pace: runs last long enough for other processes to see them running")
    parser.add_argument("--kills", type=int, default=0,
                        help="rounds of kills after the workload, on deployments of 2 processes or more")
    args = parser.parse_args()
    asyncio.run(main([int(s) for s in args.sizes.split(",")], args.threads, args.turns, args.settle,
                     args.seconds_per_token, args.kills))
