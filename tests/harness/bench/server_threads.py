"""A benchmark server's CPU split by thread, each thread named by what it is.

The kernel counts each thread's CPU (`/proc/<pid>/task/<tid>/schedstat`, read
by `tests.harness.bench.process_cpu.threads_seconds`) but names every thread of a
Python process after the process. The server's probe
(`tests/harness/bench/server_probe/sitecustomize.py`, `JOURNAL_BRIDGE_BENCH_THREADS_DIR`)
writes each thread's Python name; this module reads the names and sums the
CPU per group: the event loop (the main thread), the SQLite connections'
threads (aiosqlite runs each connection on a thread of its own: the journal's
store and spool), the executor pool (`asyncio.to_thread`, `run_in_executor`),
the probe's own threads, and any other thread by its name. What no live
thread of the server's process holds at the end of a reading -- threads that
exited meanwhile, child processes -- is the remainder, `elsewhere`.
"""

from __future__ import annotations

import json
import re
from collections import Counter

from tests.harness.bench.full_collections import ProbeDirectory

LOOP = "event loop"
SQLITE = "SQLite connections"
EXECUTOR = "executor pool"
PROBE = "benchmark probe"
UNNAMED = "unnamed"
REMAINDER = "elsewhere"  # threads that exited meanwhile, child processes

# aiosqlite 0.20-0.22 start each connection's thread with this target:
# Python names the thread `Thread-<n> (_connection_worker_thread)`.
_SQLITE_TARGET = "(_connection_worker_thread)"
# The default executor's threads: uvloop's and asyncio's prefixes, and a bare pool's.
_EXECUTOR_PREFIXES = ("uvloop", "asyncio", "ThreadPoolExecutor")
_NUMBERS = re.compile(r"[-_]?\d+")


class ThreadNames(ProbeDirectory):
    """One server's thread-name probe, and the names its processes report."""

    VARIABLE = "JOURNAL_BRIDGE_BENCH_THREADS_DIR"
    PREFIX = "journal-bridge-bench-threads-"

    def names(self, pid: int) -> dict[int, str]:
        """The Python name of each live thread of process `pid`, by kernel id, as last written."""
        try:
            report = json.loads((self.directory / f"{pid}-threads.json").read_text())
        except (OSError, ValueError):
            return {}  # not written yet, or being replaced: the thread then counts as unnamed
        return {int(tid): str(name) for tid, name in report.items()}


def thread_group(name: str | None) -> str:
    """The group a thread's CPU is summed in, from its Python name."""
    if name is None:
        return UNNAMED
    if name.endswith(_SQLITE_TARGET):
        return SQLITE
    if name.startswith(_EXECUTOR_PREFIXES):
        return EXECUTOR
    if name.startswith("bench-"):
        return PROBE
    return _NUMBERS.sub("", name) or UNNAMED


def split(
    pid: int, before: dict[int, float], after: dict[int, float], names: dict[int, str], total: float
) -> Counter[str]:
    """CPU seconds per group between two readings of the threads of process `pid`
    (`before`, `after`: seconds per kernel thread id); `total` is the server's CPU
    over the same span, all its threads and processes, and what the live threads
    do not account for is `REMAINDER`."""
    groups: Counter[str] = Counter()
    for tid, seconds in after.items():
        spent = seconds - before.get(tid, 0.0)
        groups[LOOP if tid == pid else thread_group(names.get(tid))] += spent
    groups[REMAINDER] += total - sum(groups.values())
    return groups
