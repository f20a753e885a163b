"""A benchmark server's full garbage collections, seen and triggered from outside.

The server's processes load `benchmarks/gc_probe/sitecustomize.py` (see there):
each writes its count of full collections and the CPU they took to a file of
this object's directory, and runs one on `SIGUSR1`.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PROBE = Path(__file__).resolve().with_name("gc_probe")


@dataclass(frozen=True)
class Collections:
    """Full collections so far, over a server's processes: how many, and their CPU seconds."""

    full: int = 0
    seconds: float = 0.0

    def __sub__(self, other: Collections) -> Collections:
        return Collections(self.full - other.full, self.seconds - other.seconds)

    def __add__(self, other: Collections) -> Collections:
        return Collections(self.full + other.full, self.seconds + other.seconds)


class FullCollections:
    """One server's probe: the environment to start it with, and what its processes report."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="journal-bridge-bench-gc-"))

    @property
    def env(self) -> dict[str, str]:
        path = [str(PROBE), *filter(None, [os.environ.get("PYTHONPATH")])]
        return {"PYTHONPATH": os.pathsep.join(path), "JOURNAL_BRIDGE_BENCH_GC_DIR": str(self.directory)}

    def _reports(self) -> dict[int, Collections]:
        reports = {}
        for path in self.directory.glob("*.json"):
            try:
                data = json.loads(path.read_text())
                reports[int(path.stem)] = Collections(int(data["full"]), float(data["seconds"]))
            except (OSError, ValueError, KeyError):
                continue  # replaced while read: the next reading has it
        return reports

    def totals(self) -> Collections:
        total = Collections()
        for report in self._reports().values():
            total += report
        return total

    def collect(self, timeout: float = 10.0) -> Collections:
        """One full collection in each of the server's processes, waited for; what they took."""
        before = self._reports()
        signalled = []
        for pid in before:
            try:
                os.kill(pid, signal.SIGUSR1)
                signalled.append(pid)
            except ProcessLookupError:
                continue
        deadline = time.monotonic() + timeout
        while True:
            now = self._reports()
            if all(now.get(pid, Collections()).full > before[pid].full for pid in signalled):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"no full collection reported in {timeout:.0f} s by {self.directory}")
            time.sleep(0.01)
        total = Collections()
        for pid in signalled:
            total += now[pid] - before[pid]
        return total
