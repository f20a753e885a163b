"""The reconciler's settled runs across restarts: an append-only file beside its state.

Each line is a JSON array: `[run_id, how]` when the reconciler settled a run,
`[run_id, null]` when a settled run ran again. A save appends only what changed
since the last one, so its cost follows the runs of the pass, not the number
remembered; once the file holds twice `keep` lines it is rewritten with the
newest `keep` runs (written beside it, then renamed over it). A line cut short
by a kill is skipped when the file is read.
"""

from __future__ import annotations

import json
import logging
import os
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path

logger = logging.getLogger(__name__)

__all__ = ["SettledLog"]


class SettledLog:
    """Appends settled runs to `path`, and reads them back, oldest first."""

    def __init__(self, path: Path, keep: int = 10_000) -> None:
        self.path = path
        self.keep = keep
        self._lines = 0
        # The file ends inside a line (cut short by a kill): the next append starts a new one.
        self._torn = False

    def read(self, into: OrderedDict[str, str]) -> None:
        """Apply the file's lines to `into`, in the order they were written; the newest `keep` stay."""
        try:
            with self.path.open(encoding="utf-8") as lines:
                for line in lines:
                    self._lines += 1
                    self._torn = not line.endswith("\n")
                    try:
                        run_id, how = json.loads(line)
                    except (ValueError, TypeError):
                        continue  # cut short by a kill, or not ours
                    into.pop(str(run_id), None)
                    if how is not None:
                        into[str(run_id)] = str(how)
        except FileNotFoundError:
            return
        except OSError as exc:
            logger.warning("journal-bridge: settled runs %s unreadable (%s); starting afresh", self.path, exc)
        while len(into) > self.keep:
            into.popitem(last=False)

    def compaction_due(self, adding: int) -> bool:
        """Whether appending `adding` lines would pass twice `keep`: `write` then wants the runs to keep."""
        return self._lines + adding > 2 * self.keep

    def write(self, changes: Iterable[tuple[str, str | None]], kept: list[tuple[str, str]] | None = None) -> None:
        """Append `changes`; or, given `kept` (every settled run, oldest first, as
        `compaction_due` asked), replace the file with the newest `keep` of them.
        The file's directory exists (the reconciler's state is written there first)."""
        if kept is not None:
            tmp = self.path.with_name(self.path.name + ".tmp")
            kept = kept[-self.keep :]
            tmp.write_text("".join(json.dumps(entry) + "\n" for entry in kept), encoding="utf-8")
            os.replace(tmp, self.path)
            self._lines = len(kept)
            self._torn = False
            return
        text = "".join(json.dumps(list(change)) + "\n" for change in changes)
        if not text:
            return
        with self.path.open("a", encoding="utf-8") as out:
            out.write("\n" + text if self._torn else text)
        self._lines += text.count("\n")
        self._torn = False
