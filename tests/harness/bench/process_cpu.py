"""Server CPU time, read from outside the server, to the nanosecond.

`/proc/<pid>/stat` (what `psutil.Process.cpu_times` reads) counts a process's
CPU in clock ticks of 10 ms, per process and per reading: a cell round of a
few hundred milliseconds on a server of two processes carries up to +-20 ms
of rounding on each side, several percent of the figure the benchmark
divides. Linux also offers every process's CPU clock to the same user
(`clock_getcpuclockid`, the scheduler's own count, all threads including
those that have exited): that is what is read here, with the ticks as the
fallback where the clock cannot be read.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

# The kernel's encoding of a process-wide CPU clock: (~pid << 3) | CPUCLOCK_SCHED.
_CPUCLOCK_SCHED = 2


def _clock_seconds(pid: int) -> float | None:
    try:
        return time.clock_gettime(((~pid) << 3) | _CPUCLOCK_SCHED)
    except (OSError, OverflowError, AttributeError):
        return None


def process_seconds(process: psutil.Process) -> float:
    """One process's CPU seconds so far (user + system, all its threads)."""
    seconds = _clock_seconds(process.pid)
    if seconds is not None:
        return seconds
    times = process.cpu_times()
    return times.user + times.system


def tree(pid: int) -> list[psutil.Process]:
    """A process and its live descendants."""
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def tree_seconds(pid: int) -> float:
    """CPU seconds so far of a process and its live descendants."""
    total = 0.0
    for process in tree(pid):
        try:
            total += process_seconds(process)
        except psutil.NoSuchProcess:
            pass
    return total


def thread_seconds(pid: int, tid: int) -> float | None:
    """CPU seconds so far of one thread of another process (`tid` = `pid`: its
    main thread), from the scheduler's count in nanoseconds
    (`/proc/<pid>/task/<tid>/schedstat`); None where the kernel does not keep it
    (a kernel without scheduler statistics) or the thread is gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat") as stat:
            return int(stat.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def _thread_ids(pid: int) -> list[int]:
    """The kernel ids of another process's live threads (none once it is gone)."""
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        return []


def threads_seconds(pid: int) -> dict[int, float]:
    """CPU seconds so far of each live thread of another process, by kernel
    thread id (empty where the kernel keeps no scheduler statistics)."""
    readings = ((tid, thread_seconds(pid, tid)) for tid in _thread_ids(pid))
    return {tid: seconds for tid, seconds in readings if seconds is not None}


@dataclass(frozen=True)
class Scheduling:
    """How often the kernel took a process tree's threads off their CPU (they
    slept: `voluntary`; they were preempted: `involuntary`) and moved them to
    another CPU (`migrations`), summed over its live threads."""

    voluntary: int = 0
    involuntary: int = 0
    migrations: int = 0

    def __sub__(self, other: Scheduling) -> Scheduling:
        return Scheduling(self.voluntary - other.voluntary, self.involuntary - other.involuntary,
                          self.migrations - other.migrations)

    def __add__(self, other: Scheduling) -> Scheduling:
        return Scheduling(self.voluntary + other.voluntary, self.involuntary + other.involuntary,
                          self.migrations + other.migrations)


def _thread_scheduling(pid: int, tid: int) -> Scheduling:
    counts = {"voluntary_ctxt_switches": 0, "nonvoluntary_ctxt_switches": 0, "se.nr_migrations": 0}
    for name in ("status", "sched"):  # `sched` only on kernels keeping scheduler statistics
        try:
            with open(f"/proc/{pid}/task/{tid}/{name}") as lines:
                for line in lines:
                    key, _, value = line.partition(":")
                    key = key.strip()
                    if key in counts:
                        counts[key] = int(value.split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return Scheduling(counts["voluntary_ctxt_switches"], counts["nonvoluntary_ctxt_switches"],
                      counts["se.nr_migrations"])


def tree_scheduling(pid: int) -> Scheduling:
    """Context switches and CPU migrations so far of a process's and its live
    descendants' live threads (a thread that has exited takes its counts along)."""
    total = Scheduling()
    try:
        processes = tree(pid)
    except psutil.NoSuchProcess:
        return total
    for process in processes:
        for tid in _thread_ids(process.pid):
            total += _thread_scheduling(process.pid, tid)
    return total


# The probe's fixed work: about 0.7 s of CPU on the machine this was written on.
_PROBE_STEPS = 10_000_000


def probe_seconds() -> float:
    """CPU seconds this process takes for a fixed pure-Python loop: how fast the
    machine runs Python right now. Ratios measured side by side hold on a slower
    machine; the milliseconds per run do not, and this says by how much."""
    began = time.process_time()
    total = 0
    for step in range(_PROBE_STEPS):
        total += step & 7
    return time.process_time() - began
