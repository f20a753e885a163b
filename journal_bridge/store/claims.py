"""Reader claims on a file: one reader per run among the processes sharing a SQLite journal.

A claim is a POSIX record lock on one byte of `<journal>-claims`, at an offset
derived from the run id. The kernel drops a process's record locks when it
dies, so a crashed reader's runs can be claimed by the next process that asks.
Record locks belong to the process, not to a file descriptor: a process opens
the claims file once (closing any descriptor of it would drop every lock) and
keeps, per run, which store object holds the claim, so two store objects of
one process do not both win it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from pathlib import Path

__all__ = ["FileClaims", "claims_for"]


def _offset(run_id: str) -> int:
    # 62 bits: a nonnegative off_t; two live runs sharing a byte is out of reach.
    return int.from_bytes(hashlib.blake2b(run_id.encode(), digest_size=8).digest(), "big") >> 2


class FileClaims:
    """The claims of this process on one claims file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._holders: dict[str, object] = {}  # run_id -> the store object holding it
        self._lock = threading.Lock()

    def claim(self, holder: object, run_id: str) -> bool:
        with self._lock:
            current = self._holders.get(run_id)
            if current is not None:
                return current is holder
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _offset(run_id))
            except OSError:
                return False
            self._holders[run_id] = holder
            return True

    def release(self, holder: object, run_id: str) -> None:
        with self._lock:
            if self._holders.get(run_id) is not holder:
                return
            del self._holders[run_id]
            assert self._fd is not None
            fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, _offset(run_id))

    def release_all(self, holder: object) -> None:
        for run_id in [r for r, h in list(self._holders.items()) if h is holder]:
            self.release(holder, run_id)


_FILES: dict[str, FileClaims] = {}
_FILES_LOCK = threading.Lock()


def claims_for(journal: str | Path) -> FileClaims:
    """This process's claims on the journal file `journal` (its `-claims` file next to it)."""
    path = Path(str(journal) + "-claims").resolve()
    with _FILES_LOCK:
        return _FILES.setdefault(str(path), FileClaims(path))
