"""Follower sidecar: journal the runs of a server that cannot mount the plugin.

    journal-bridge follow --url http://server:2024 --store sqlite:///journal.db

Discovery. Every `interval` seconds the follower lists threads by
`updated_at`, newest first, down to its cursor (the newest `updated_at` it has
seen, minus a small overlap so threads reordered during paging are not
missed), and lists each changed thread's runs (ids, statuses and creation
times: a new run is then read whole, once). A thread's `updated_at` moves
when a run is created and when it ends, so every run is found within about
one interval of its creation.

Observation. A run's `kwargs` say how it was created, and that decides what
the follower can see of it through `runs.join_stream`. It joins with the modes
the run has, and reads them with the mapper the plugin uses for them
(`journal_bridge.mapping.reader`): `events` -> the `events` mapper; else `values`
(with `custom` when the run has it) -> the state mapper, which also reads the
thread's final state after a join that began late.

| created with                            | outcome                                  |
|-----------------------------------------|------------------------------------------|
| `events` or `values`, resumable         | `journaled`: replayed from its first frame, also after it ended |
| either, not resumable, not yet ended    | `live_only`: journaled from the join on; reported |
| either, not resumable, ended            | `unobservable`: nothing left to read; reported |
| neither `events` nor `values`           | `unobservable`: nothing the journal reads; reported |
| resumable, but the replay is empty      | `unobservable`: frames gone (server restart, expiry); reported |
| its `run.end` (or `run.error`) in the store | `already_journaled` (by the plugin, a tee or an earlier follower): left alone |
| its `run.start` in the store, running, not resumable | left alone until it ends, then decided again |
| its reader claim held by another process | left to it; found again when its thread changes |

Every reported run gets a log line, a counter per reason (`stats`) and a line
in the final `summary()` (the newest thousand; a follower left running for
months keeps no more). Nothing is skipped silently. With `from_now` runs
created before the follower started are left alone.

Restart. The cursor -- the `updated_at` watermark, the runs already decided and
the runs still being journaled -- is a small JSON file (by default next to a
SQLite store: `journal.db.follow.json`; otherwise `journal-bridge-follow.json`
in the working directory), replaced atomically after each poll. A run counts as
decided only once its records are in the store; a follower that is killed
re-joins the runs it had in flight and re-discovers the rest. Records carry
the bridge's idempotency keys, so the replay of a resumable run adds exactly
what was missing.

Delivery. Records go through the bridge's `DeliveryQueue`, spooled to a local
file (`spool`; the CLI's default is `spool_path(store_url, "follow")`) while
the store is down, so a follower stopped during a store outage delivers them
when it starts again. `health()` gives the shared verdict
(`journal_bridge.delivery.health`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langgraph_sdk.errors import NotFoundError

from journal_bridge.delivery.bridge import Bridge
from journal_bridge.delivery.health import UNAVAILABLE as UNAVAILABLE_STATUS
from journal_bridge.delivery.spool import spool_path
from journal_bridge.host.modes import EVENTS_MODE, requested_modes
from journal_bridge.host.run_objects import run_checkpoint
from journal_bridge.host.sdk import SdkClient, SdkRuns
from journal_bridge.mapping.capture_setting import EVENTS_PATH_MODES, Capture
from journal_bridge.mapping.reader import RunSource
from journal_bridge.model.envelope import RUN_END, RUN_ERROR, RUN_START
from journal_bridge.model.timestamps import parse_time
from journal_bridge.store import RunEventStore

if TYPE_CHECKING:
    from langgraph_sdk.schema import RunSelectField

logger = logging.getLogger(__name__)

__all__ = ["Follower", "default_cursor_path"]

JOURNALED = "journaled"
LIVE_ONLY = "live_only"
UNOBSERVABLE = "unobservable"
ALREADY_JOURNALED = "already_journaled"
BEFORE_START = "before_start"

_STATE_MODES = ("values", "custom")
_JOURNALED_MARKS = (RUN_START, RUN_END, RUN_ERROR)

_ACTIVE = {"pending", "running"}
# What a listing asks of each run: enough to tell a new one. A new run is then
# read whole (its input among it), once.
_LISTED: list[RunSelectField] = ["run_id", "status", "created_at"]
_MAX_DECIDED = 100_000
# Runs whose discovery time is kept, and reports kept for the summary: the
# newest ones. The counters (`stats`) count every run.
_MAX_FOUND = 10_000
_MAX_REPORTS = 1_000
_CURSOR_VERSION = 1


def _capture_of(modes: list[str]) -> Capture | None:
    """How a run created with `modes` is read: from `events`, else from `values` (+ `custom`)."""
    if EVENTS_MODE in modes:
        return Capture("events", EVENTS_PATH_MODES, ())
    if "values" in modes:
        return Capture("state", tuple(m for m in _STATE_MODES if m in modes), ())
    return None


def default_cursor_path(store_url: str) -> Path:
    """Next to a SQLite store's file; otherwise in the working directory."""
    if store_url.startswith("sqlite:"):
        from journal_bridge.store.sqlite import sqlite_path_from_url

        return Path(f"{sqlite_path_from_url(store_url)}.follow.json")
    return Path.cwd() / "journal-bridge-follow.json"


async def threads_updated_since(
    threads_api: Any, floor: datetime | None, page_size: int, select: list[str]
) -> list[dict[str, object]]:
    """The threads updated at or after `floor` (all of them without one), newest first,
    read page by page from `threads.search` until the pages get older than `floor`."""
    threads: list[dict[str, Any]] = []
    offset = 0
    while True:
        page = await threads_api.search(
            limit=page_size, offset=offset, sort_by="updated_at", sort_order="desc", select=select
        )
        for thread in page:
            updated = parse_time(thread.get("updated_at"))
            if floor is not None and updated is not None and updated < floor:
                return threads
            threads.append(thread)
        if len(page) < page_size:
            return threads
        offset += page_size


class _CountingRuns:
    def __init__(self, runs: SdkRuns, counts: Counter[str]) -> None:
        self._runs = runs
        self._counts = counts

    def join_stream(self, thread_id: str, run_id: str, **kwargs: Any) -> Any:
        return self._count(self._runs.join_stream(thread_id, run_id, **kwargs), str(run_id))

    async def _count(self, stream: Any, run_id: str) -> object:
        async for part in stream:
            self._counts[run_id] += 1
            yield part

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runs, name)


class _CountingClient:
    """The SDK client, counting the parts each run's join yields (0 = nothing replayed)."""

    def __init__(self, client: SdkClient, counts: Counter[str]) -> None:
        self._client = client
        self.runs = _CountingRuns(client.runs, counts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class Follower:
    """Discovers runs on a server and journals each one it can read through a `Bridge`."""

    def __init__(
        self,
        client: SdkClient,
        store: RunEventStore,
        *,
        cursor_path: Path | str | None = None,
        interval: float = 2.0,
        page_size: int = 100,
        overlap: float = 30.0,
        spool: Path | str | None = None,
        from_now: bool = False,
    ) -> None:
        self.client = client
        self.store = store
        self.cursor_path = Path(cursor_path) if cursor_path is not None else None
        self.interval = interval
        self.page_size = page_size
        self.overlap = timedelta(seconds=overlap)
        self._parts: Counter[str] = Counter()
        self.bridge = Bridge(
            store, lambda: _CountingClient(client, self._parts), spool=spool, on_run_done=self._run_done
        )
        self.delivery = self.bridge.delivery
        self.stats: Counter[str] = Counter()
        self.reports: deque[dict[str, Any]] = deque(maxlen=_MAX_REPORTS)
        self._since: datetime | None = None
        self._decided: OrderedDict[str, str] = OrderedDict()
        self._inflight: dict[str, tuple[str, str]] = {}  # run_id -> (thread_id, planned outcome)
        # run_id -> (thread_id, outcome): finished, records not yet confirmed stored
        self._finished: dict[str, tuple[str, str]] = {}
        # run_id -> when it was found: monotonic time, and the number of the poll
        # that found it (1 = the first poll); the newest `_MAX_FOUND` runs.
        self.discovered_at: OrderedDict[str, float] = OrderedDict()
        self.discovered_by_poll: OrderedDict[str, int] = OrderedDict()
        self._started = False
        self._from_now = from_now
        self._poll_error: str | None = None
        self._not_before: datetime | None = None

    # -- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        await self._load_cursor()
        if self._from_now:
            self._not_before = datetime.now(UTC)
            if self._since is None or self._since < self._not_before:
                self._since = self._not_before
        await self.bridge.start()
        for run_id, (thread_id, outcome) in list(self._inflight.items()):
            # Left in flight by a previous follower: join again from the first frame.
            self.bridge.observe(thread_id, run_id)
            logger.info("journal-bridge follow: resuming run %s of thread %s (%s)", run_id, thread_id, outcome)

    async def run(self, *, once: bool = False, stop: asyncio.Event | None = None) -> None:
        """Poll until `stop` is set (then finish in-flight runs and save the cursor),
        or once with `once`. Cancelling is a crash: see `abort`."""
        await self.start()
        try:
            while stop is None or not stop.is_set():
                started = time.monotonic()
                try:
                    await self.poll()
                    self._poll_error = None
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - the server may be restarting; poll again
                    self.stats["poll_errors"] += 1
                    self._poll_error = f"{type(exc).__name__}: {exc}"
                    logger.warning("journal-bridge follow: poll failed: %s", self._poll_error)
                if once:
                    await self.bridge.wait_for_runs()
                    await self._checkpoint(drain_timeout=None)
                    return
                await self._checkpoint(drain_timeout=self.interval)
                pause = max(0.0, self.interval - (time.monotonic() - started))
                if stop is None:
                    await asyncio.sleep(pause)
                else:
                    await _bounded(stop.wait(), pause)
            await self.stop()
        except asyncio.CancelledError:
            await self.abort()
            raise

    async def stop(self, timeout: float = 10.0) -> None:
        """Finish the runs being journaled (up to `timeout`), store the cursor."""
        await _bounded(self.bridge.wait_for_runs(), timeout)
        await self._checkpoint(drain_timeout=timeout)
        await self.bridge.stop(timeout=timeout)

    async def abort(self) -> None:
        """Stop at once, as a crash would: nothing more is written, the cursor is not updated."""
        await self.bridge.abort()

    # -- discovery -------------------------------------------------------------

    async def poll(self) -> int:
        """One discovery pass; returns how many new runs it decided on."""
        threads = await self._changed_threads()
        found = 0
        newest = self._since
        for thread in threads:
            updated = parse_time(thread.get("updated_at"))
            if updated is not None and (newest is None or updated > newest):
                newest = updated
            found += await self._discover_runs(str(thread["thread_id"]))
        if newest is not None:
            self._since = newest
        self.stats["polls"] += 1
        return found

    async def _changed_threads(self) -> list[dict[str, object]]:
        floor = self._since - self.overlap if self._since is not None else None
        return await threads_updated_since(
            self.client.threads, floor, self.page_size, ["thread_id", "updated_at", "status"]
        )

    async def _discover_runs(self, thread_id: str) -> int:
        runs: list[Mapping[str, Any]] = []
        offset = 0
        while True:
            page = await self.client.runs.list(thread_id, limit=self.page_size, offset=offset, select=_LISTED)
            runs.extend(page)
            fresh = [r for r in page if not self._known(str(r["run_id"]))]
            if len(page) < self.page_size or not fresh:
                break
            offset += self.page_size
        found = 0
        # Oldest first, so the bridge journals a thread's runs in creation order.
        for run in sorted(runs, key=lambda r: str(r.get("created_at"))):
            run_id = str(run["run_id"])
            if self._known(run_id):
                continue
            created = parse_time(run.get("created_at"))
            if self._not_before is not None and created is not None and created < self._not_before:
                self._decided[run_id] = BEFORE_START
                continue
            marks = await self._journaled_marks(thread_id, run_id)
            if RUN_END in marks or RUN_ERROR in marks:
                self._decided[run_id] = ALREADY_JOURNALED
                self.stats[ALREADY_JOURNALED] += 1
                continue
            try:
                run = await self.client.runs.get(thread_id, run_id)
            except NotFoundError:
                continue  # deleted since it was listed
            kwargs = run.get("kwargs") or {}
            if RUN_START in marks and run.get("status") in _ACTIVE and not kwargs.get("resumable"):
                # Someone else is journaling it; decided once it ends (its thread changes then).
                continue
            found += 1
            self.discovered_at[run_id] = time.monotonic()
            self.discovered_by_poll[run_id] = self.stats["polls"] + 1
            if len(self.discovered_at) > _MAX_FOUND:
                self.discovered_at.popitem(last=False)
                self.discovered_by_poll.popitem(last=False)
            self.stats["runs_discovered"] += 1
            self._decide(thread_id, run)
        return found

    def _known(self, run_id: str) -> bool:
        return run_id in self._decided or run_id in self._inflight or run_id in self._finished

    async def _journaled_marks(self, thread_id: str, run_id: str) -> set[str]:
        """Which of `run.start`, `run.end`, `run.error` of this run the store holds:
        someone (the plugin, a tee, an earlier follower) journals it already."""
        try:
            marks = await self.store.list_events(thread_id, run_id, event_types=_JOURNALED_MARKS, limit=3)
        except Exception as exc:  # noqa: BLE001 - the store may be down: join, the keys make it harmless
            logger.debug("journal-bridge follow: could not look up run %s in the store: %s", run_id, exc)
            return set()
        return {m.event_type for m in marks}

    def _decide(self, thread_id: str, run: Mapping[str, Any]) -> None:
        run_id = str(run["run_id"])
        kwargs = run.get("kwargs") or {}
        modes = requested_modes(kwargs.get("stream_mode")) or []
        resumable = bool(kwargs.get("resumable"))
        active = run.get("status") in _ACTIVE
        capture = _capture_of(modes)
        if capture is None:
            self._report(thread_id, run_id, UNOBSERVABLE,
                         f"created with stream_mode {modes}: neither 'events' nor 'values'")
            self._decided[run_id] = UNOBSERVABLE
            return
        if not resumable and not active:
            self._report(thread_id, run_id, UNOBSERVABLE,
                         f"ended ({run.get('status')}) and was not created with stream_resumable: nothing to replay")
            self._decided[run_id] = UNOBSERVABLE
            return
        outcome = JOURNALED
        if not resumable:
            outcome = LIVE_ONLY
            self._report(thread_id, run_id, LIVE_ONLY,
                         f"not created with stream_resumable: journaled from the join on (run was {run.get('status')})")
        self._inflight[run_id] = (thread_id, outcome)
        checkpoint = run_checkpoint(run.get("kwargs") or {})
        self.bridge.observe(thread_id, run_id, RunSource(capture, resumable=resumable, run=run, checkpoint=checkpoint))

    def _report(self, thread_id: str, run_id: str, outcome: str, reason: str) -> None:
        self.stats[outcome] += 1
        self.reports.append({"thread_id": thread_id, "run_id": run_id, "outcome": outcome, "reason": reason})
        logger.warning("journal-bridge follow: run %s of thread %s %s: %s", run_id, thread_id,
                       "is only partly observable" if outcome == LIVE_ONLY else "cannot be journaled", reason)

    def _run_done(self, thread_id: str, run_id: str) -> None:
        entry = self._inflight.pop(run_id, None)
        if self.bridge.read_elsewhere(run_id):
            # Another process (the plugin, another follower) reads it: undecided
            # here; found again when its thread changes, at its end at the latest.
            self._parts.pop(run_id, None)
            return
        outcome = entry[1] if entry else JOURNALED
        if self._parts.pop(run_id, 0) == 0:
            self._report(thread_id, run_id, UNOBSERVABLE,
                         "the join returned no frames (run created before a server restart, or frames expired)")
            outcome = UNOBSERVABLE
        elif outcome == JOURNALED:
            self.stats[JOURNALED] += 1
        self._finished[run_id] = (thread_id, outcome)

    # -- cursor ----------------------------------------------------------------

    async def _checkpoint(self, *, drain_timeout: float | None) -> None:
        """Confirm the finished runs whose records are stored, then save the cursor."""
        finished = dict(self._finished)
        drained = True
        if finished:
            if drain_timeout is None:
                await self.delivery.drain()
            else:
                drained = await _bounded(self.delivery.drain(), drain_timeout)
        if drained:
            for run_id, (_thread_id, outcome) in finished.items():
                self._finished.pop(run_id, None)
                self._decided[run_id] = outcome
        while len(self._decided) > _MAX_DECIDED:
            self._decided.popitem(last=False)
        await self._save_cursor()

    def _cursor(self) -> dict[str, object]:
        # Finished but not confirmed stored counts as in flight: a restart journals it again.
        inflight = {**self._finished, **self._inflight}
        return {
            "version": _CURSOR_VERSION,
            "since": self._since.isoformat() if self._since else None,
            "decided": dict(self._decided),
            "inflight": {run_id: list(entry) for run_id, entry in inflight.items()},
        }

    async def _save_cursor(self) -> None:
        if self.cursor_path is None:
            return
        data = json.dumps(self._cursor())
        await asyncio.to_thread(_write_atomically, self.cursor_path, data)

    async def _load_cursor(self) -> None:
        if self.cursor_path is None or not self.cursor_path.exists():
            return
        raw = await asyncio.to_thread(self.cursor_path.read_text)
        data = json.loads(raw)
        if data.get("version") != _CURSOR_VERSION:
            raise ValueError(f"{self.cursor_path}: unknown follower cursor version {data.get('version')!r}")
        self._since = parse_time(data.get("since"))
        self._decided = OrderedDict(data.get("decided") or {})
        self._inflight = {run_id: (entry[0], entry[1]) for run_id, entry in (data.get("inflight") or {}).items()}

    # -- reporting -------------------------------------------------------------

    def health(self) -> dict[str, object]:
        """The bridge's health (`status`, `reason`, backlog, counters) and the follower's own
        counts; while the server cannot be polled, `unavailable` with the poll's error."""
        health = {
            **self.bridge.health(),
            "polls": self.stats["polls"],
            "poll_errors": self.stats["poll_errors"],
            "unobservable": self.stats[UNOBSERVABLE],
            "already_journaled": self.stats[ALREADY_JOURNALED],
        }
        if self._poll_error is not None and health["status"] != UNAVAILABLE_STATUS:
            health["status"] = UNAVAILABLE_STATUS
            health["reason"] = f"the server cannot be polled: {self._poll_error}"
        return health

    def summary(self) -> dict[str, object]:
        health = self.health()
        return {
            "status": health["status"],
            "reason": health["reason"],
            "polls": self.stats["polls"],
            "runs_discovered": self.stats["runs_discovered"],
            "journaled": self.stats[JOURNALED],
            "live_only": self.stats[LIVE_ONLY],
            "unobservable": self.stats[UNOBSERVABLE],
            "already_journaled": self.stats[ALREADY_JOURNALED],
            "poll_errors": self.stats["poll_errors"],
            "records_written": health["records_written"],
            "backlog": health["backlog"],
            "runs_failed": health["runs_failed"],
            "reported": list(self.reports),
        }


async def _bounded(awaitable: Any, timeout: float) -> bool:
    try:
        await asyncio.wait_for(awaitable, timeout=timeout)
    except TimeoutError:
        return False
    return True


def _write_atomically(path: Path, data: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(data)
    os.replace(tmp, path)


def run_follower(
    client_factory: Callable[[], SdkClient],
    store_url: str,
    *,
    cursor_path: Path | None,
    interval: float,
    once: bool,
    from_now: bool = False,
    spool_dir: Path | None = None,
    store_options: dict[str, object] | None = None,
) -> dict[str, Any]:
    """The CLI's entry: follow until SIGINT/SIGTERM (or one pass); the summary."""
    from journal_bridge.store import create_store

    async def main() -> dict[str, object]:
        async with create_store(store_url, **(store_options or {})) as store:
            follower = Follower(
                client_factory(), store, cursor_path=cursor_path, interval=interval,
                spool=spool_path(store_url, "follow", spool_dir), from_now=from_now,
            )
            if once:
                await follower.run(once=True)
                await follower.bridge.stop()
                return follower.summary()
            loop = asyncio.get_running_loop()
            stopping = asyncio.Event()
            for signame in ("SIGINT", "SIGTERM"):
                with contextlib.suppress(NotImplementedError, AttributeError):
                    import signal

                    loop.add_signal_handler(getattr(signal, signame), stopping.set)
            await follower.run(stop=stopping)
            return follower.summary()

    return asyncio.run(main())
