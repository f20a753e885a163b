"""The reconciler: journals the runs the plugin's middleware never saw.

Crons, runs created by in-process callers that bypass the middleware, runs of
another process sharing the runtime, runs in flight when the server was
killed: none of them passed through `RunObserverMiddleware`. Every `interval`
seconds (`JOURNAL_BRIDGE_RECONCILE_INTERVAL`, and once at startup) the
reconciler asks the in-process SDK for the threads whose `updated_at` moved
since its watermark (one `threads.search` page, newest first), and lists the
runs only of threads whose `updated_at` differs from what it last saw and
whose runs the bridge is not reading at that moment (a thread the bridge
reads is listed at the first pass that finds it quiet: the watermark stays at
its change meanwhile). For each run the bridge was not handed:

- still pending or running, resumable, with `events` or `values` among its
  modes: joined through the bridge from its first frame (live, the same
  records a middleware-observed run gets);
- any other run that has not ended: waited for;
- ended (or joined, or waited for, and now ended): the thread is backfilled
  from its checkpoints once it is idle and the bridge has written what it
  holds for it (`journal_bridge.capture.backfill`: keys `backfill:...`,
  `metadata.source = "backfill"`, displaced records in conversation order).
  A run whose `run.end` or `run.error` record was journaled since this start
  needs nothing (one journaled before it may be an attempt a restart executed
  anew: the backfill supersedes it, `journal_bridge.mapping.attempts`).

Backfill writes only what the journal lacks (by message id), so a thread the
bridge journaled completely costs one read of its history and journal.

The runs another process let go are checked a thread at a time: one journal
query tells which of them it journaled to the end; only the others are read
from the server.

Several processes sharing a runtime and a journal each run a reconciler, and
each sees the others' runs. A run is decided only by the process that holds
its reader claim (`Bridge.claim`, the store's `claim_run`): one whose claim
another process holds (its request came through there, or its reconciler was
first) is left to it and asked again every pass; once that process has read
the run it finds `run.end` journaled, and when that process died, its claim
went with it and this one takes the run over -- joined from its first frame
while it runs (the records' keys make the replay add only what is missing),
backfilled once it ended.

State -- the watermark, the threads waiting for a backfill and the runs
waited for -- is a small JSON file next to the spool, replaced atomically
after each pass that changed it. After a `kill -9` the next start reads it,
looks back `overlap` seconds before the watermark, and repairs what the
crash interrupted: a run the runtime resumes is joined from its first frame
(its records' keys make the replay harmless), one that ended is backfilled.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langgraph_sdk.errors import NotFoundError

from journal_bridge.capture.backfill import BUSY, backfill_thread
from journal_bridge.capture.follower import threads_updated_since
from journal_bridge.capture.settled_log import SettledLog
from journal_bridge.delivery.bridge import EVENTS_CAPTURE, Bridge
from journal_bridge.host.modes import EVENTS_MODE, requested_modes
from journal_bridge.host.run_objects import run_checkpoint
from journal_bridge.host.sdk import SdkClient, SdkOnDemand
from journal_bridge.mapping.capture_setting import Capture
from journal_bridge.mapping.reader import RunSource
from journal_bridge.model.envelope import RUN_END, RUN_ERROR, RUN_START
from journal_bridge.model.timestamps import parse_time
from journal_bridge.store import RunEventStore

if TYPE_CHECKING:
    from langgraph_sdk.schema import RunSelectField

logger = logging.getLogger(__name__)

__all__ = ["Reconciler"]

DEFAULT_INTERVAL = 3.0

_ACTIVE = frozenset({"pending", "running"})
# The keys of a run's `run.end` and `run.error` records (`records.record`): a run journaled to its end.
_END_KEYS = ("run.end", "run.error")
_STATE_VERSION = 1
# Settled runs and threads seen on the server: as many are kept in memory as
# the settled log keeps across a restart. A run forgotten is decided again as
# after a restart (its journal says it was journaled); the deletion sweep
# checks far fewer threads (`_SWEEP_THREADS`) than are remembered alive.
_MAX_REMEMBERED = 10_000
# Runs asked for first when a thread changed (see `_discover`).
_FIRST_PAGE = 5
# What a listing asks of each run: what it takes to tell a new run. The whole
# run, its input among it, is read only for a run the bridge was not handed.
_LISTED: list[RunSelectField] = ["run_id", "status", "created_at"]
# Every this many passes, the journal's newest threads are checked against the server.
_SWEEP_EVERY = 10
_SWEEP_THREADS = 500
_SWEEP_CHUNK = 100


def live_capture(kwargs: dict[str, Any]) -> Capture | None:
    """How a run created with these `kwargs` can be read from its first frame, if at all."""
    if not kwargs.get("resumable"):
        return None
    modes = requested_modes(kwargs.get("stream_mode")) or []
    if EVENTS_MODE in modes:
        return EVENTS_CAPTURE
    if "values" in modes:
        return Capture("state", tuple(m for m in ("values", "custom") if m in modes), ())
    return None


class Reconciler:
    """Finds and journals the runs the bridge was not handed. `start()`, `stop()`."""

    def __init__(
        self,
        bridge: Bridge,
        client_factory: Callable[[], SdkClient],
        store: Callable[[], RunEventStore | None],
        *,
        interval: float = DEFAULT_INTERVAL,
        state_path: Path | None = None,
        page_size: int = 100,
        overlap: float = 30.0,
        drain_timeout: float = 5.0,
        sweep_deleted: bool = True,
    ) -> None:
        self.bridge = bridge
        self._sdk = SdkOnDemand(client_factory)
        self._store = store
        self.interval = interval
        self.state_path = state_path
        self.page_size = page_size
        self.overlap = timedelta(seconds=overlap)
        self.drain_timeout = drain_timeout
        self.sweep_deleted = sweep_deleted
        # Runs journaled before this start and running again are executed anew.
        self._started_at = datetime.now(UTC)
        self._since: datetime | None = None
        # thread_id -> updated_at last listed; only while a search can list it again (`_trim`).
        self._thread_seen: OrderedDict[str, str] = OrderedDict()
        # Threads this process saw the server have: only their journals go when they are
        # gone. Not kept across restarts: a runtime whose state was reset lost threads
        # nobody deleted, and their journal is all that is left of them.
        self._alive: OrderedDict[str, None] = OrderedDict()
        self._settled: OrderedDict[str, str] = OrderedDict()  # run_id -> how it was journaled
        # Settled (how) and unsettled (None) since the last save: what it appends.
        self._unsaved: list[tuple[str, str | None]] = []
        self._settled_log = (
            SettledLog(state_path.with_name(state_path.name + ".settled"), keep=_MAX_REMEMBERED)
            if state_path is not None
            else None
        )
        self._waiting: dict[str, str] = {}  # run_id -> thread_id: not ended, not joinable
        self._joined: dict[str, str] = {}  # run_id -> thread_id: joined by the reconciler
        self._elsewhere: dict[str, str] = {}  # run_id -> thread_id: another process holds its claim
        self._repair: set[str] = set()  # threads to backfill once idle
        self._task: asyncio.Task[None] | None = None
        self._dirty = False
        # The last save's write, on a thread: one cancelled mid-way still runs to its end.
        self._writing: asyncio.Future[None] | None = None
        self.stats: dict[str, Any] = {
            "passes": 0,
            "pass_errors": 0,
            "threads_listed": 0,
            "threads_deferred": 0,
            "runs_found": 0,
            "runs_joined": 0,
            "runs_taken_over": 0,
            "released_checks": 0,
            "threads_backfilled": 0,
            "threads_deleted": 0,
            "records_backfilled": 0,
            "last_error": None,
        }

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.to_thread(self._load)
        self._task = asyncio.create_task(self._loop(), name="journal-bridge-reconciler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self._save()

    async def _loop(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.reconcile()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the store or the runtime may be busy; try again
                self.stats["pass_errors"] += 1
                self.stats["last_error"] = str(exc)
                logger.warning("journal-bridge: reconcile pass failed: %s", exc)
            await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))

    # -- one pass ------------------------------------------------------------------

    async def reconcile(self) -> None:
        """One pass: discover, join or wait, then backfill what ended."""
        self.stats["passes"] += 1
        newest = self._since
        deferred: datetime | None = None
        for thread in await self._changed_threads():
            thread_id = str(thread["thread_id"])
            updated = thread.get("updated_at")
            when = parse_time(updated)
            if when is not None and (newest is None or when > newest):
                newest = when
            self._seen_alive(thread_id)
            if self._thread_seen.get(thread_id) == str(updated):
                continue
            if when is not None and self.bridge.reading_thread(thread_id):
                # The bridge reads a run of it now: the change is listed once the thread
                # is quiet; the watermark stays at it, so the search brings it back.
                self.stats["threads_deferred"] += 1
                deferred = when if deferred is None else min(deferred, when)
                continue
            if await self._discover(thread_id):
                self._thread_seen[thread_id] = str(updated)
                self._thread_seen.move_to_end(thread_id)
        if deferred is not None and newest is not None:
            newest = min(newest, deferred)
        if newest != self._since:
            self._since = newest
            self._dirty = True
        await self._retry_elsewhere()
        await self._check_waiting()
        await self._repair_threads()
        if self.sweep_deleted and self.stats["passes"] % _SWEEP_EVERY == 1:
            await self._sweep_deleted()
        self._trim()
        await self._save()

    async def _changed_threads(self) -> list[dict[str, Any]]:
        floor = self._since - self.overlap if self._since is not None else None
        return await threads_updated_since(self._sdk().threads, floor, self.page_size, ["thread_id", "updated_at"])

    async def _discover(self, thread_id: str) -> bool:
        """Decide on the thread's new runs; False while one of them is still the bridge's to read."""
        self.stats["threads_listed"] += 1
        decided = True
        runs: list[Mapping[str, Any]] = []
        # Runs come newest first, and every run older than a settled one was decided
        # by an earlier pass (or waits in `_waiting`): paging stops at the first
        # settled run. A thread changed since the last pass mostly has one new run,
        # so the first page is short and a pass does not cost more as threads grow.
        limit = min(_FIRST_PAGE, self.page_size)
        while True:
            page = await self._sdk().runs.list(thread_id, limit=limit, offset=len(runs), select=_LISTED)
            runs.extend(page)
            if len(page) < limit or any(str(r["run_id"]) in self._settled for r in page):
                break
            limit = self.page_size
        # Oldest first: the bridge journals a thread's runs in the order it is handed them.
        for run in sorted(runs, key=lambda r: str(r.get("created_at"))):
            run_id = str(run["run_id"])
            if run_id in self._settled and run.get("status") in _ACTIVE and not self.bridge.knows(thread_id, run_id):
                # Ended once, running again: the runtime executes it anew after a crash.
                del self._settled[run_id]
                self._unsaved.append((run_id, None))
                self._dirty = True
            if (run_id in self._settled or run_id in self._waiting or run_id in self._joined
                    or run_id in self._elsewhere):
                continue
            if self.bridge.knows(thread_id, run_id):
                if run.get("status") in _ACTIVE or self.bridge.following(thread_id, run_id):
                    # A crash now must leave it to the next start: decided once it ended.
                    decided = False
                else:
                    self._settle(run_id, "observed")
                continue
            self.stats["runs_found"] += 1
            await self._decide(thread_id, run_id)
        return decided

    async def _decide(self, thread_id: str, run_id: str) -> None:
        """Decide on a run the bridge was not handed, read whole. A run deleted since
        it was listed is left; a read that fails fails the pass, as a listing would."""
        if not await self.bridge.claim(run_id):
            # Another process reads it: asked again every pass (`_retry_elsewhere`).
            self._elsewhere[run_id] = thread_id
            return
        run = await self._read_claimed(thread_id, run_id)
        if run is not None:
            await self._decide_claimed(thread_id, run, taken_over=False)

    async def _retry_elsewhere(self) -> None:
        """The runs another process held: decided here once their claim is free.

        The runs let go since the last pass are checked together, a thread at a
        time: one journal query tells which of them their reader journaled to
        the end (settled, nothing read from the server); only the others (their
        reader died) are read whole and decided."""
        free: dict[str, list[str]] = {}
        for run_id, thread_id in list(self._elsewhere.items()):
            if self.bridge.knows(thread_id, run_id):
                del self._elsewhere[run_id]  # handed to this process's bridge meanwhile
                continue
            if await self.bridge.claim(run_id):
                free.setdefault(thread_id, []).append(run_id)
        undecided = [run_id for run_ids in free.values() for run_id in run_ids]
        try:
            for thread_id, run_ids in free.items():
                for run_id in await self._ended_runs(thread_id, run_ids):
                    undecided.remove(run_id)
                    del self._elsewhere[run_id]
                    await self.bridge.release(run_id)
                    self.stats["runs_taken_over"] += 1
                    self._settle(run_id, "journaled")
                for run_id in [r for r in run_ids if r in undecided]:
                    undecided.remove(run_id)
                    run = await self._read_claimed(thread_id, run_id)  # a failure: asked again next pass
                    del self._elsewhere[run_id]
                    if run is None:
                        continue
                    self.stats["runs_taken_over"] += 1
                    await self._decide_claimed(thread_id, run, taken_over=True, unended=True)
        finally:
            for run_id in undecided:
                await self.bridge.release(run_id)

    async def _ended_runs(self, thread_id: str, run_ids: list[str]) -> set[str]:
        """Which of the thread's runs have their end journaled: one query for all of them."""
        store = self._store()
        if store is None or not run_ids:
            return set()
        self.stats["released_checks"] += 1
        keys = {f"{run_id}:{end}": run_id for run_id in run_ids for end in _END_KEYS}
        return {keys[key] for key in await store.has_source_keys(thread_id, list(keys))}

    async def _read_claimed(self, thread_id: str, run_id: str) -> Mapping[str, Any] | None:
        """The whole run, whose claim this process just took; None (the claim given up)
        when it was deleted since it was listed. Any other failure gives the claim up
        and fails the pass, as a failed listing does."""
        try:
            return await self._sdk().runs.get(thread_id, run_id)
        except NotFoundError:
            await self.bridge.release(run_id)
            return None
        except BaseException:
            await self.bridge.release(run_id)
            raise

    async def _decide_claimed(
        self, thread_id: str, run: Mapping[str, Any], *, taken_over: bool, unended: bool = False
    ) -> None:
        """Decide on a run whose claim this process holds; the claim goes with the
        run to the bridge when it is joined, else it is given up here. A run
        `taken_over` from another process was read there until it let go (or died);
        `unended`: the journal was just found to hold no end of it."""
        run_id = str(run["run_id"])
        try:
            await self._decide_run(thread_id, run, taken_over=taken_over, unended=unended)
        finally:
            if not self.bridge.following(thread_id, run_id):
                await self.bridge.release(run_id)

    async def _decide_run(
        self, thread_id: str, run: Mapping[str, Any], *, taken_over: bool, unended: bool = False
    ) -> None:
        run_id = str(run["run_id"])
        kwargs = run.get("kwargs") or {}
        if run.get("status") in _ACTIVE:
            capture = live_capture(kwargs)
            if capture is not None and not unended and await self._ended_since_start(thread_id, run_id):
                # Read to its end by the process that held it; its status lags behind.
                self._settle(run_id, "journaled")
                return
            if capture is not None:
                logger.info("journal-bridge: joining run %s of thread %s, which no request showed", run_id, thread_id)
                # What another process read of it is this attempt's, not an earlier one's.
                restart = None if taken_over else await self._restart_point(thread_id, run_id)
                checkpoint = restart or run_checkpoint(kwargs)
                self.bridge.observe(thread_id, run_id, RunSource(capture, resumable=True, checkpoint=checkpoint))
                self._joined[run_id] = thread_id
                self.stats["runs_joined"] += 1
            else:
                self._waiting[run_id] = thread_id
            self._dirty = True
            return
        if not unended and await self._ended_since_start(thread_id, run_id):
            # An end journaled before this start may be an earlier attempt's: a restart
            # executes anew a run that was running when the runtime last saved its state,
            # and this one may have ended before any pass saw it. The backfill tells.
            self._settle(run_id, "journaled")
            return
        self._waiting[run_id] = thread_id
        self._repair.add(thread_id)
        self._dirty = True

    async def _restart_point(self, thread_id: str, run_id: str) -> dict[str, Any] | None:
        """For a run journaled in part before this start and running again (the
        runtime executes a run anew after a crash, from the state it had kept):
        the thread's checkpoint now, where the new attempt went on from. What the
        killed attempt journaled past it is then on an abandoned branch."""
        store = self._store()
        if store is None:
            return None
        started = await store.list_events(thread_id, run_id, event_types=[RUN_START], limit=1)
        if not started or started[0].created_at >= self._started_at:
            return None
        state = await self._sdk().threads.get_state(thread_id)
        checkpoint_id = (state.get("checkpoint") or {}).get("checkpoint_id")
        return {"checkpoint_id": checkpoint_id} if checkpoint_id else None

    async def _ended_since_start(self, thread_id: str, run_id: str) -> bool:
        """Whether the run's end was journaled since this start. An end journaled
        before it is an earlier attempt's: the runtime executes a run anew after a crash."""
        store = self._store()
        if store is None:
            return False
        ends = await store.list_events(thread_id, run_id, event_types=[RUN_END, RUN_ERROR], limit=1)
        return bool(ends) and ends[0].created_at >= self._started_at

    async def _check_waiting(self) -> None:
        for run_id, thread_id in list(self._joined.items()):
            if not self.bridge.following(thread_id, run_id):
                # Read to its end; the checkpoints show whatever the join could not.
                del self._joined[run_id]
                self._waiting[run_id] = thread_id
                self._repair.add(thread_id)
                self._dirty = True
        for run_id, thread_id in list(self._waiting.items()):
            if thread_id in self._repair:
                continue
            try:
                run = await self._sdk().runs.get(thread_id, run_id)
            except Exception as exc:  # noqa: BLE001 - deleted meanwhile: its thread says what is left
                logger.debug("journal-bridge: run %s not readable (%s)", run_id, exc)
                run = {}
            if run.get("status") not in _ACTIVE:
                self._repair.add(thread_id)
                self._dirty = True

    async def _repair_threads(self) -> None:
        store = self._store()
        if store is None or not self._repair:
            return
        for thread_id in sorted(self._repair):
            # What the bridge holds for the thread goes first: backfill skips what the journal has.
            await self.bridge.wait_for_thread(thread_id)
            try:
                await asyncio.wait_for(self.bridge.drain(), timeout=self.drain_timeout)
            except TimeoutError:
                return  # the store is behind; next pass
            result = await backfill_thread(self._sdk(), store, thread_id, default_owner=self.bridge.default_owner)
            if result.status == BUSY:
                continue
            self._repair.discard(thread_id)
            self._dirty = True
            self.stats["threads_backfilled"] += 1
            self.stats["records_backfilled"] += result.written
            for run_id, waited_on in list(self._waiting.items()):
                if waited_on == thread_id:
                    del self._waiting[run_id]
                    self._settle(run_id, "backfilled")
            if result.written:
                logger.info("journal-bridge: backfilled %d records of thread %s (%s)",
                            result.written, thread_id, result.status)

    async def _sweep_deleted(self) -> None:
        """Delete the journal of threads the server no longer has (deleted by another
        process, a TTL sweep, a request the middleware never saw).

        Only threads this process saw the server have count (listed by a pass,
        or found by an earlier sweep): a journal written by another server, or
        before the runtime's state was reset, is not this server's to delete.
        The journal's newest threads are looked up by id, a hundred per
        request; a stateless run's journal (filed under its run id) has no
        thread and is kept.
        """
        store = self._store()
        if store is None:
            return
        journaled = [str(t["thread_id"]) for t in await store.list_threads(limit=_SWEEP_THREADS)]
        for start in range(0, len(journaled), _SWEEP_CHUNK):
            chunk = journaled[start : start + _SWEEP_CHUNK]
            found = await self._sdk().threads.search(ids=chunk, limit=len(chunk), select=["thread_id"])
            existing = {str(t["thread_id"]) for t in found}
            if not existing <= set(chunk):
                logger.warning("journal-bridge: the server ignores thread ids in searches; deletions not swept")
                return
            for thread_id in existing:
                self._seen_alive(thread_id)
            for thread_id in chunk:
                if thread_id in existing or thread_id not in self._alive:
                    continue
                if await store.list_events(thread_id, thread_id, limit=1):
                    continue
                removed = await self.bridge.forget_thread(thread_id)
                if removed is None:
                    continue  # the store did not answer: the next sweep tries again
                self.stats["threads_deleted"] += 1
                self._alive.pop(thread_id, None)
                logger.info("journal-bridge: thread %s is gone from the server; deleted its journal (%d records)",
                            thread_id, removed)

    def _seen_alive(self, thread_id: str) -> None:
        self._alive[thread_id] = None
        self._alive.move_to_end(thread_id)

    def _settle(self, run_id: str, how: str) -> None:
        self._settled[run_id] = how
        self._unsaved.append((run_id, how))
        self._dirty = True

    def _trim(self) -> None:
        # A thread last updated before the next search's floor is listed again
        # only once it changes, and then with another `updated_at`.
        if self._since is not None:
            floor = self._since - self.overlap
            for thread_id, updated in list(self._thread_seen.items()):
                when = parse_time(updated)
                if when is not None and when < floor:
                    del self._thread_seen[thread_id]
        for remembered in (self._settled, self._thread_seen, self._alive):
            while len(remembered) > _MAX_REMEMBERED:
                remembered.popitem(last=False)

    # -- state across restarts ------------------------------------------------------

    async def _save(self) -> None:
        """Write what changed: the state (small) whole, the settled runs appended to their log.

        What is written is taken here, on the event loop, and written on a
        thread, after the previous write has ended; a write that fails is
        tried again at the next save."""
        if self._writing is not None:
            await asyncio.gather(self._writing, return_exceptions=True)
        if self.state_path is None or self._settled_log is None or not self._dirty:
            return
        # Runs joined but not yet read to their end are repaired after a restart.
        waiting = {**self._waiting, **self._joined}
        data = {
            "version": _STATE_VERSION,
            "since": self._since.isoformat() if self._since else None,
            "waiting": waiting,
            "repair": sorted(self._repair | set(self._joined.values())),
        }
        changes, self._unsaved = self._unsaved, []
        kept = list(self._settled.items()) if self._settled_log.compaction_due(len(changes)) else None
        self._dirty = False
        self._writing = asyncio.ensure_future(
            asyncio.to_thread(self._write, self.state_path, self._settled_log, data, changes, kept)
        )
        try:
            await asyncio.shield(self._writing)
        except asyncio.CancelledError:
            raise  # the write goes on; the next save waits for it
        except Exception:
            self._unsaved[:0] = changes
            self._dirty = True
            raise

    @staticmethod
    def _write(
        path: Path,
        log: SettledLog,
        data: dict[str, Any],
        changes: list[tuple[str, str | None]],
        kept: list[tuple[str, str]] | None,
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
        log.write(changes, kept)

    def _load(self) -> None:
        if self.state_path is None or not self.state_path.exists():
            return
        try:
            data = json.loads(self.state_path.read_text())
        except (OSError, ValueError) as exc:
            logger.warning("journal-bridge: reconciler state %s unreadable (%s); starting afresh", self.state_path, exc)
            return
        if data.get("version") != _STATE_VERSION:
            return
        self._since = parse_time(data.get("since"))
        self._waiting = {str(k): str(v) for k, v in (data.get("waiting") or {}).items()}
        self._repair = {str(t) for t in data.get("repair") or []}
        # A state written before the settled runs had their own log holds them:
        # the next save moves them to the log.
        self._settled = OrderedDict((str(k), str(v)) for k, v in (data.get("settled") or {}).items())
        if self._settled:
            self._unsaved.extend(self._settled.items())
            self._dirty = True
        if self._settled_log is not None:
            self._settled_log.read(self._settled)

    def report(self) -> dict[str, Any]:
        report = {
            **self.stats,
            "waiting_runs": len(self._waiting) + len(self._joined),
            "runs_read_elsewhere": len(self._elsewhere),
            "threads_to_repair": len(self._repair),
        }
        listings = getattr(self._sdk.made, "listings", None)
        if isinstance(listings, dict):
            # How the listings were answered: an in-process client reads the runtime.
            report["listings"] = dict(listings)
        return report
