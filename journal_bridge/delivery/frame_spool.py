"""The frame spool: what a streaming client saw, on local disk before it saw it.

The reader of a streamed run maps its frames a little after they pass and
gathers the records for a few tens of milliseconds before they are written
(`journal_bridge.mapping.reader`). A process killed meanwhile (`kill -9`)
loses those records, and when the run never reached a checkpoint the server
kept, nothing after the restart shows them: the client saw messages the
history does not have. With the frame spool on, every frame the journal maps
(`values`, `custom`, `error`, and of `events` the callbacks a record is made
of) is appended to a file of the run's before the middleware sends it on to
the client; the next start maps the frames of a process that is gone and
journals their records (the store keeps one record per key, so what was
written already is not written twice).

One directory per store (`frames-<digest>` beside the queue's spool file),
one directory in it per process, held with a lock that goes with the process.
A run takes a file of its process's directory (`slot-N.frames`) at its first
frame worth keeping, starting with a header frame that names the run; once
its records are in the store or the queue's spool (`done`), the file is
emptied and goes to the next run. A start adopts the directories whose lock
it can take: their owner is gone.

The write is a `writev` into the operating system's page cache, on the
response path, nothing waiting on the disk: it survives a killed process, not
an operating system crash (no fsync, as the queue's spool). A write that
fails stops the spooling of that run, logged; the client's stream never
depends on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson

from journal_bridge.host.compat import assistant_uuid
from journal_bridge.host.sse import Frame, SSEFrames
from journal_bridge.mapping.events_mapper import RunMapper
from journal_bridge.mapping.reader import owned
from journal_bridge.mapping.state_mapper import StateMapper
from journal_bridge.model.envelope import RunEvent

try:  # POSIX: the lock that goes with its process
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

__all__ = ["FrameSpool", "RecoveredRun", "SpooledFrames", "frame_spool_dir", "read_runs", "recover", "recover_records", "worth_spooling"]

_HEADER_EVENT = "journal-bridge.run"
_LOCK = "owner.lock"
_SLOT = re.compile(r"^slot-\d+\.frames$")
# The plain modes a mapper reads (a subgraph's `values|ns` it reads nothing of).
_PLAIN = frozenset({"values", "custom", "error"})
_EVENTS = "events"
# Of `events`, the callbacks a record is made of; a chain's start and end only the root's.
_KIND = re.compile(rb'\s*\{\s*"event"\s*:\s*"(on_[a-z_]+)"')
_KEPT_KINDS = frozenset({b"on_chat_model_end", b"on_tool_end", b"on_custom_event", b"on_chain_error"})
_ROOT_KINDS = frozenset({b"on_chain_start", b"on_chain_end"})
_PARENTS_KEY = b'"parent_ids"'
_NO_PARENTS = re.compile(rb'"parent_ids"\s*:\s*\[\s*\]')


def frame_spool_dir(queue_spool: Path | None) -> Path | None:
    """Where the frame spool of the queue whose spool file is `queue_spool` lives: beside it."""
    if queue_spool is None:
        return None
    return queue_spool.with_name(f"frames-{queue_spool.stem.rsplit('-', 1)[-1]}")


def worth_spooling(frame: Frame, modes: frozenset[str]) -> bool:
    """Whether the journal maps anything from `frame` of a run read from `modes`."""
    event = frame.event
    if event is None or frame.data is None or event not in modes:
        return False
    if event in _PLAIN:
        return True
    if event != _EVENTS:
        return False
    kind = _KIND.match(frame.data)
    if kind is None:
        return True  # not shaped like the server's events: the mapper decides
    name = kind.group(1)
    if name in _KEPT_KINDS:
        return True
    if name in _ROOT_KINDS:
        parents = frame.data.rfind(_PARENTS_KEY)
        return parents >= 0 and _NO_PARENTS.match(frame.data, parents) is not None
    return False


class _Frames(Protocol):
    def feed(self, frame: Frame) -> None: ...

    def close(self, *, complete: bool) -> None: ...


class SpooledFrames:
    """A run's reader of its client's frames that spools each frame worth keeping
    before the reader (and then the client) gets it."""

    def __init__(self, spool: FrameSpool, run_id: str, header: Mapping[str, Any], modes: frozenset[str],
                 inner: _Frames) -> None:
        self._spool = spool
        self._run_id = run_id
        self._header = header
        self._modes = modes
        self._inner = inner
        self._fd: int | None = None
        self._stopped = False  # done, or a write failed: nothing more is spooled

    def feed(self, frame: Frame) -> None:
        if not self._stopped and worth_spooling(frame, self._modes):
            self._write(frame)
        self._inner.feed(frame)

    def passes_over(self, body: bytes, start: int, end: int) -> bool:
        passes = getattr(self._inner, "passes_over", None)
        return bool(passes(body, start, end)) if passes is not None else False

    def close(self, *, complete: bool) -> None:
        self._inner.close(complete=complete)

    def _write(self, frame: Frame) -> None:
        parts: list[bytes | memoryview] = []
        try:
            if self._fd is None:
                self._fd = self._spool._take(self._run_id, self)
                parts.append(b"event: " + _HEADER_EVENT.encode() + b"\ndata: " + orjson.dumps(
                    self._header, default=str) + b"\n\n")
            parts += [frame.raw, frame.terminator or b"\n\n"]
            written = os.writev(self._fd, parts)
            if written != sum(len(p) for p in parts):
                raise OSError(f"wrote {written} bytes of {sum(len(p) for p in parts)}")
        except Exception as exc:  # noqa: BLE001 - the client's stream never depends on the spool
            self._stopped = True
            self._spool.failed += 1
            logger.warning("journal-bridge: stopped spooling the frames of run %s (%s)", self._run_id, exc)

    def _release(self) -> int | None:
        """Stop spooling; the file this run held, if any."""
        self._stopped = True
        fd, self._fd = self._fd, None
        return fd


@dataclass
class RecoveredRun:
    """A run's spooled frames, read back: its header and its frames, in order."""

    header: dict[str, Any]
    frames: list[Frame] = field(default_factory=list)

    @property
    def thread_id(self) -> str:
        return str(self.header["thread_id"])

    @property
    def run_id(self) -> str:
        return str(self.header["run_id"])


def read_runs(body: bytes) -> list[RecoveredRun]:
    """The runs a slot file holds (one; a file emptied in the middle of a run may
    hold the start of another after it): frames before any header are skipped."""
    runs: list[RecoveredRun] = []

    def on_frame(frame: Frame) -> None:
        if frame.event == _HEADER_EVENT and frame.data:
            with contextlib.suppress(orjson.JSONDecodeError):
                header = orjson.loads(frame.data)
                if isinstance(header, dict) and header.get("thread_id") and header.get("run_id"):
                    runs.append(RecoveredRun(header))
                    return
        if runs and frame.event is not None:
            runs[-1].frames.append(frame)

    SSEFrames(on_frame).feed(body, final=True)
    return runs


def recover_records(run: RecoveredRun) -> list[RunEvent]:
    """The records the journal maps from a recovered run's frames: those its
    client saw. Nothing of how the run ended: what the server later says of the
    run (the reconciler) writes that."""
    header = run.header
    mapper: RunMapper | StateMapper
    out: list[RunEvent] = []
    if header.get("path") == "events":
        mapper = RunMapper(run.thread_id, run.run_id)
    else:
        mapper = StateMapper(run.thread_id, run.run_id)
        assistant = header.get("assistant_id")
        out += mapper.start(None, assistant_uuid(str(assistant)) if assistant else None, header.get("run_input"))
    for frame in run.frames:
        try:
            data = orjson.loads(frame.data) if frame.data else None
        except orjson.JSONDecodeError:
            continue  # the last frame, cut short by the kill
        out += mapper.feed(frame.event or "", data)
    return out


class FrameSpool:
    """The frame spool of one process: see the module docstring.

    `open` takes this process's directory and returns the runs that processes
    gone left behind; `spooled` wraps a run's reader; `done` frees its file.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path: Path | None = None  # this process's own directory
        self._lock_fd: int | None = None
        self._free: list[int] = []
        self._slots = 0
        self._runs: dict[str, SpooledFrames] = {}
        self._held: dict[str, int] = {}
        self.spooled_runs = 0
        self.failed = 0
        self.recovered_runs = 0
        self.recovered_records = 0

    @property
    def active(self) -> bool:
        return self.path is not None

    async def open(self) -> list[tuple[Path, list[RecoveredRun]]]:
        """Take a directory of this process's; read the frames of directories whose process is gone.

        A directory that cannot be made leaves the spool off, logged."""
        if fcntl is None:
            logger.warning("journal-bridge: no frame spool on this system (no file locks)")
            return []
        try:
            return await asyncio.to_thread(self._open)
        except OSError as exc:
            logger.error("journal-bridge: cannot use frame spool %s (%s); frames are not spooled", self.directory, exc)
            self._close_files()
            self.path = None
            return []

    def _open(self) -> list[tuple[Path, list[RecoveredRun]]]:
        # Beside the queue's spool file, whose directory its spool made: never a store's missing directory.
        self.directory.mkdir(exist_ok=True)
        # Named as a process's directory only once locked: another start never takes it for one gone.
        made = Path(tempfile.mkdtemp(prefix="new-", dir=self.directory))
        self._lock_fd = os.open(made / _LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        path = made.with_name("p-" + made.name.removeprefix("new-"))
        made.rename(path)
        self.path = path
        left: list[tuple[Path, list[RecoveredRun]]] = []
        for other in sorted(self.directory.iterdir()):
            if other == path or not other.is_dir() or not other.name.startswith("p-"):
                continue
            runs = self._adopt(other)
            if runs is not None:
                left.append((other, runs))
        return left

    @staticmethod
    def _adopt(other: Path) -> list[RecoveredRun] | None:
        """The runs of `other` when its process is gone (its lock free), else None."""
        try:
            lock = os.open(other / _LOCK, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return None  # made and not locked yet, or being removed: its process decides
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return None  # its process is alive
            runs: list[RecoveredRun] = []
            for slot in sorted(other.iterdir()):
                if _SLOT.match(slot.name):
                    runs += read_runs(slot.read_bytes())
            return runs
        finally:
            os.close(lock)

    async def forget(self, other: Path) -> None:
        """`other`'s runs are journaled: the directory goes."""
        await asyncio.to_thread(shutil.rmtree, other, True)

    def spooled(self, thread_id: str, run_id: str, path: str, modes: tuple[str, ...], inner: _Frames, *,
                assistant_id: Any = None, run_input: Any = None) -> _Frames:
        """`inner`, a run's reader of its client's frames, with the frames spooled first."""
        if self.path is None:
            return inner
        header = {"thread_id": thread_id, "run_id": run_id, "path": path, "assistant_id": assistant_id,
                  "run_input": run_input}
        frames = SpooledFrames(self, run_id, header, frozenset(modes), inner)
        previous = self._runs.get(run_id)
        if previous is not None:
            self.done(run_id)
        self._runs[run_id] = frames
        return frames

    def _take(self, run_id: str, frames: SpooledFrames) -> int:
        if self.path is None or self._runs.get(run_id) is not frames:
            raise OSError("the frame spool is closed")
        if self._free:
            fd = self._free.pop()
        else:
            self._slots += 1
            fd = os.open(self.path / f"slot-{self._slots}.frames",
                         os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        self._held[run_id] = fd
        self.spooled_runs += 1
        return fd

    def done(self, run_id: str) -> None:
        """The run's records are in the store or the queue's spool: its file is emptied for the next run."""
        frames = self._runs.pop(run_id, None)
        if frames is None:
            return
        fd = frames._release()
        self._held.pop(run_id, None)
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        except OSError as exc:
            logger.warning("journal-bridge: could not empty a frame spool file (%s); it is left", exc)
            os.close(fd)
            return
        self._free.append(fd)

    async def close(self, *, keep_frames: bool) -> None:
        """Stop spooling. Frames of runs not done stay for the next start when
        `keep_frames`; otherwise, or with none, this process's directory goes."""
        held = bool(self._held) and keep_frames
        for frames in self._runs.values():
            frames._release()
        self._runs.clear()
        path = self.path
        self.path = None
        self._close_files()
        if path is not None and not held:
            await asyncio.to_thread(shutil.rmtree, path, True)

    def _close_files(self) -> None:
        for fd in [*self._free, *self._held.values()]:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._free.clear()
        self._held.clear()
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None

    def report(self) -> dict[str, int]:
        return {
            "runs": len(self._held),
            "spooled_runs": self.spooled_runs,
            "failed": self.failed,
            "recovered_runs": self.recovered_runs,
            "recovered_records": self.recovered_records,
        }


async def recover(
    spool: FrameSpool,
    left: list[tuple[Path, list[RecoveredRun]]],
    write: Callable[[list[RunEvent]], Awaitable[None]],
    owner_of: Callable[[str], Awaitable[str | None]],
) -> list[str]:
    """Journal the records of the runs processes gone left in `left`, then forget their
    directories; the threads whose records were journaled."""
    threads: dict[str, None] = {}
    for directory, runs in left:
        for run in runs:
            records = recover_records(run)
            if not records:
                continue
            await write(owned(records, await owner_of(run.thread_id)))
            threads[run.thread_id] = None
            spool.recovered_runs += 1
            spool.recovered_records += len(records)
            logger.info("journal-bridge: journaled %d records from the spooled frames of run %s of thread %s",
                        len(records), run.run_id, run.thread_id)
        await spool.forget(directory)
    return list(threads)
