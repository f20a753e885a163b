"""The CPU of a benchmark server's event-loop tasks, per kind of task, seen from the probe.

With `--tasks`, the bridge benchmark starts its servers with the task clock of
`tests/harness/bench/server_probe/sitecustomize.py` on (see there): each server process
writes, every `TASK_REPORT_SECONDS`, the CPU its main thread spent in the steps
of each kind of task (the coroutine's file and qualified name), and this
object reads the sums.
"""

from __future__ import annotations

import json
from collections import Counter

from tests.harness.bench.full_collections import ProbeDirectory

# As the probe writes them (a test holds the two equal); a reading waits SETTLED after the work it reads.
TASK_REPORT_SECONDS = 0.02
SETTLED = 3 * TASK_REPORT_SECONDS

JOURNAL = "journal_bridge/"
FLOOR = "tests/harness/bench/floor_app.py"


class TaskClock(ProbeDirectory):
    """One server's task clock, and what its processes report."""

    VARIABLE = "JOURNAL_BRIDGE_BENCH_TASKS_DIR"
    PREFIX = "journal-bridge-bench-tasks-"

    def totals(self) -> Counter[str]:
        """CPU seconds per kind of task so far, over the server's processes, as last written."""
        total: Counter[str] = Counter()
        for path in self.directory.glob("*-tasks.json"):
            try:
                report = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # written whole, then renamed: the next reading has it
            for kind, (_steps, nanoseconds) in report.items():
                total[kind] += nanoseconds / 1e9
        return total


def grouped(per_kind: Counter[str]) -> dict[str, float]:
    """The journal's tasks, the floor's, and the server's own, summed."""
    groups = {"journal": 0.0, "floor": 0.0, "server": 0.0}
    for kind, seconds in per_kind.items():
        group = "journal" if kind.startswith(JOURNAL) else "floor" if kind.startswith(FLOOR) else "server"
        groups[group] += seconds
    return groups
