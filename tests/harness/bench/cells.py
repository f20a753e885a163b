"""A cell: one kind of client against one server, with the figures of its rounds.

A benchmark drives its cells round by round; each round's wall times, the
server's CPU (in all, on its event-loop thread, by thread and by task) and its
full collections are kept per cell, overall and per round (`Cell.rounds`, at
the positions `WALL`, `CPU`, `CPU_BESIDE_COLLECTIONS`, `COLLECTIONS`).
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections import Counter

from tests.harness.bench.clients import Run, control_request, sdk_client
from tests.harness.bench.full_collections import Collections, FullCollections
from tests.harness.bench.process_cpu import (
    Scheduling,
    thread_seconds,
    threads_seconds,
    tree_scheduling,
    tree_seconds,
)
from tests.harness.bench.server_threads import ThreadNames, split
from tests.harness.bench.task_clock import SETTLED, TaskClock
from tests.harness.conversation import EARLY_SUMMARIZATION, TURNS, wait_journal_idle
from tests.harness.langgraph_server import LanggraphDevServer

# `Cell.rounds` positions of the pooled figures: the round's median wall, the
# server's CPU, and that CPU less the full collections in the round; then the
# collections of the middle and oldest generations in the round (each full
# collection is in place of a middle one), all per run.
WALL, CPU, CPU_BESIDE_COLLECTIONS, COLLECTIONS = 0, 1, 2, 3


# How long after a full collection its probe's report is surely written.
_REPORTED = 0.05


class Cell:
    """One client kind against one server: durations and CPU of its runs, overall and per round."""

    def __init__(
        self,
        server: LanggraphDevServer,
        run: Run,
        journaled: bool,
        collections: FullCollections | None = None,
        clock: TaskClock | None = None,
        thread_names: ThreadNames | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.server = server
        # Sent with every request of the cell (the paired benchmark's floor cells carry one).
        self.headers = headers
        self.collections = collections
        # The server's thread names, and its CPU seconds during the measured
        # rounds per group of threads (`tests/harness/bench/server_threads.py`).
        self.thread_names = thread_names
        self.by_thread: Counter[str] = Counter()
        # With `--tasks`: the server's task clock, and the CPU seconds of its
        # event loop's tasks during the measured rounds, per kind of task.
        self.clock = clock
        self.tasks: Counter[str] = Counter()
        # The server's full garbage collections during the measured rounds.
        self.during = Collections()
        self.client = sdk_client(server.url, headers)
        self.run = run
        self.journaled = journaled
        self.assistant_id = ""
        self.threads: list[str] = []
        self.durations: list[float] = []
        self.cpu = 0.0
        # The benchmark's own CPU while the cell's runs ran: its clients' (the
        # cells of a round run one after another).
        self.client_cpu = 0.0
        # The server's context switches and CPU migrations during the measured rounds.
        self.scheduling = Scheduling()
        # CPU of the server's main thread, its event loop: where requests are served
        # and the journal's reader maps and queues (NaN where it cannot be read).
        self.loop_cpu = 0.0
        self.turn = 0
        # Per measured round: (median wall s, server CPU s per run, the same
        # without the server's full collections in the round, its middle and
        # full collections per run); see `WALL` and the positions after it.
        self.rounds: list[tuple[float, ...]] = []

    async def serve(self, server: LanggraphDevServer) -> None:
        """Drive `server` from now on: another process of the same setting (`setup` again)."""
        if server is self.server:
            return
        await self.client.aclose()
        self.server = server
        self.client = sdk_client(server.url, self.headers)

    async def setup(self, threads: int) -> None:
        assistant = await self.client.assistants.create("agent", config={"configurable": EARLY_SUMMARIZATION})
        self.assistant_id = assistant["assistant_id"]
        self.threads = [(await self.client.threads.create())["thread_id"] for _ in range(threads)]

    async def round(self, runs: int, *, measured: bool = True) -> None:
        per_thread = [runs // len(self.threads) + (i < runs % len(self.threads)) for i in range(len(self.threads))]
        start = self.turn
        self.turn += max(per_thread)
        tasks_before = await self._task_totals()
        pid = self.server.process.pid
        threads_before = threads_seconds(pid) if self.thread_names else {}
        before = tree_seconds(pid)
        loop_before = _loop_seconds(self.server)
        collected = self.collections.totals() if self.collections else None
        scheduled = tree_scheduling(pid)
        durations: list[float] = []

        async def drive(thread_id: str, count: int) -> None:
            for k in range(count):
                began = time.perf_counter()
                await self.run(self.client, thread_id, self.assistant_id, TURNS[(start + k) % len(TURNS)])
                durations.append(time.perf_counter() - began)

        client_before = time.process_time()
        await asyncio.gather(*(drive(t, n) for t, n in zip(self.threads, per_thread, strict=True)))
        client_cpu = time.process_time() - client_before
        if self.journaled:
            await wait_journal_idle(self.server.url, timeout=300)
        else:
            await control_request(self.server.url)
        cpu = tree_seconds(pid) - before
        scheduling = tree_scheduling(pid) - scheduled
        loop_cpu = _loop_seconds(self.server) - loop_before
        threads_after = threads_seconds(pid) if self.thread_names else {}
        tasks_after = await self._task_totals()
        if not measured:
            return
        if self.thread_names is not None and threads_after:
            self.by_thread.update(split(pid, threads_before, threads_after, self.thread_names.names(pid), cpu))
        if tasks_before is not None and tasks_after is not None:
            self.tasks.update(tasks_after - tasks_before)
        during = Collections()
        if self.collections is not None and collected is not None:
            # A probe writes a collection's report a moment after it ends.
            await asyncio.sleep(_REPORTED)
            during = self.collections.totals() - collected
            self.during += during
        self.durations.extend(durations)
        self.cpu += cpu
        self.client_cpu += client_cpu
        self.scheduling += scheduling
        self.loop_cpu += loop_cpu
        self.rounds.append((
            statistics.median(durations), cpu / len(durations), (cpu - during.seconds) / len(durations),
            (during.middle + during.full) / len(durations),
        ))

    async def _task_totals(self) -> Counter[str] | None:
        """The task clock's sums once what ran before is surely in them (None without one)."""
        if self.clock is None:
            return None
        await asyncio.sleep(SETTLED)
        return self.clock.totals()

    @property
    def wall(self) -> float:
        return statistics.median(self.durations)

    @property
    def cpu_per_run(self) -> float:
        return self.cpu / len(self.durations)

    @property
    def loop_cpu_per_run(self) -> float:
        return self.loop_cpu / len(self.durations)


def _loop_seconds(server: LanggraphDevServer) -> float:
    """CPU seconds so far of the server's event-loop thread (its process's main thread)."""
    pid = server.process.pid
    seconds = thread_seconds(pid, pid)
    return math.nan if seconds is None else seconds
