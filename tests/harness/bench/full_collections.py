"""A benchmark server's full garbage collections, seen from outside.

The server's processes load `tests/harness/bench/server_probe/sitecustomize.py` (see there):
each writes its count of full collections and the CPU they took to a file of
this object's directory.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

PROBE = Path(__file__).resolve().with_name("server_probe")


@dataclass(frozen=True)
class Collections:
    """Full collections so far, over a server's processes: how many, and their CPU
    seconds; the collections of the middle generation; and the objects moved into
    the oldest generation (counted only when the probe was asked to, else 0)."""

    full: int = 0
    seconds: float = 0.0
    promoted: int = 0
    middle: int = 0

    def __sub__(self, other: Collections) -> Collections:
        return Collections(self.full - other.full, self.seconds - other.seconds, self.promoted - other.promoted,
                           self.middle - other.middle)

    def __add__(self, other: Collections) -> Collections:
        return Collections(self.full + other.full, self.seconds + other.seconds, self.promoted + other.promoted,
                           self.middle + other.middle)


class ProbeDirectory:
    """Where one part of a server's probe reports: the environment to start the
    server with (the probe first on `PYTHONPATH`, `VARIABLE` naming a directory
    of this object's own), and that directory."""

    VARIABLE = ""
    PREFIX = "journal-bridge-bench-"

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix=self.PREFIX))

    @property
    def env(self) -> dict[str, str]:
        path = [str(PROBE), *filter(None, [os.environ.get("PYTHONPATH")])]
        return {"PYTHONPATH": os.pathsep.join(path), self.VARIABLE: str(self.directory)}

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


class FullCollections(ProbeDirectory):
    """One server's probe of its full collections, and what its processes report."""

    VARIABLE = "JOURNAL_BRIDGE_BENCH_GC_DIR"
    PREFIX = "journal-bridge-bench-gc-"

    def __init__(self, *, promoted: bool = False) -> None:
        super().__init__()
        # Whether the probe also counts the objects moved into the oldest generation.
        self.promoted = promoted

    @property
    def env(self) -> dict[str, str]:
        return {**super().env, **({"JOURNAL_BRIDGE_BENCH_GC_PROMOTED": "1"} if self.promoted else {})}

    def _reports(self) -> dict[int, Collections]:
        reports = {}
        for path in self.directory.glob("*.json"):
            try:
                data = json.loads(path.read_text())
                reports[int(path.stem)] = Collections(
                    int(data["full"]), float(data["seconds"]), int(data.get("promoted", 0)), int(data.get("middle", 0))
                )
            except (OSError, ValueError, KeyError):
                continue  # unreadable now (reports are written whole, then renamed): the next reading has it
        return reports

    def totals(self) -> Collections:
        """As last written: a collection a few milliseconds old may not be in it yet."""
        total = Collections()
        for report in self._reports().values():
            total += report
        return total
