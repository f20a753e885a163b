"""Servers on one CPU, the benchmark's clients on the others: `--pin`.

On a machine of two CPUs a server's event loop and the benchmark's clients
share them. The scheduler then decides how often the loop sleeps while its
client works and on which CPU it wakes: part of a server's CPU per run is the
clients' doing. Pinned apart, it is not. Unpinned, `busy_process` keeps a CPU
busy beside one cell's clients, so that it leaves the servers as little room
as another cell whose clients work harder.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

import psutil

from tests.harness.bench.process_cpu import tree

__all__ = ["CpuSplit", "busy_process"]


class CpuSplit:
    """The CPUs this benchmark may use, split once: the last for the servers,
    the others for the benchmark itself (its clients). Taken when made, so
    servers started after a first pinning (another set, another part of the
    benchmark) go to the same CPU although the benchmark no longer runs there."""

    def __init__(self) -> None:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            raise SystemExit(f"--pin needs two CPUs; this benchmark may use {len(cpus)}")
        self.server_cpu = cpus[-1]
        self.client_cpus = set(cpus[:-1])

    def pin(self, pids: list[int]) -> str:
        """Every thread of the processes `pids` and of their descendants (whose
        CPU a server's figure counts, `process_cpu.tree`) on the servers' CPU,
        the benchmark itself on the others; what it did, as printed.

        On a small machine the servers' event loop and the clients share the
        CPUs: a loop that waits for its client sleeps, wakes on another CPU
        with cold caches, and the same server code then costs more CPU per run
        the more often it wakes. Pinned, that cost is the same in every cell;
        unpinned, it is part of each cell's figure. A thread a server starts
        later inherits the CPU of the thread that starts it."""
        for process in (process for pid in pids for process in tree(pid)):
            try:
                tids = [thread.id for thread in process.threads()]
            except psutil.NoSuchProcess:
                continue  # a process that ended meanwhile
            for tid in tids:
                try:
                    os.sched_setaffinity(tid, {self.server_cpu})
                except ProcessLookupError:
                    pass  # a thread that ended meanwhile
        os.sched_setaffinity(0, self.client_cpus)
        clients = ", ".join(map(str, sorted(self.client_cpus)))
        return f"servers pinned to CPU {self.server_cpu}, clients to CPU {clients}"

    def release(self) -> None:
        """The benchmark back on every CPU it had: what it starts next is not pinned."""
        os.sched_setaffinity(0, self.client_cpus | {self.server_cpu})


@contextlib.contextmanager
def busy_process(on: bool = True) -> Iterator[None]:
    """With `on`, a process spinning on a CPU while the block runs (stopped after it):
    unpinned, the room one cell's clients leave the servers made the same as another's."""
    if not on:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()
