"""The bridge: reads runs through langgraph-sdk and journals them.

Runs reach it two ways: `observe` joins a run through the SDK (runs nobody
streams; with no capture given, from `events` and the first frame), `tee`
reads a run from the frames its streaming client receives. Either way the
run's parts go through the capture's mapper (`journal_bridge.reader`) and the
records onto a bounded delivery queue. One writer drains the queue in batches
into the `RunEventStore`.

Delivery contract:
- Order: records of a run are enqueued in stream order and written in queue
  order, so per thread the store's `seq` follows the stream.
- No duplicates: every record carries a `source_key`; the store returns the
  existing record for a key it already holds, so replays and retries are safe.
- Store down: while the store is unavailable a batch is retried with capped
  exponential backoff for as long as it takes, never reordered or discarded
  (`retried` counts the attempts). While the queue is full, followers wait
  instead of dropping (back-pressure).
- Drops: a batch that fails for another reason is retried a few times, then
  written record by record; a record the store still rejects (invalid, or an
  error retrying will not fix) is dropped, counted in `dropped` and logged with
  its key and the reason. The records around it are written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from journal_bridge.events import InvalidEvent, RunEvent
from journal_bridge.capture import Capture
from journal_bridge.mapping import RunMapper
from journal_bridge.modes import EVENTS_MODE
from journal_bridge.reader import Part, RunSource, TeeSource, read_run, resolve_thread
from journal_bridge.state_mapping import StateMapper
from journal_bridge.store import RunEventStore, StoreUnavailable

logger = logging.getLogger(__name__)

__all__ = ["EVENTS_CAPTURE", "Bridge", "BridgeStats"]

# A run its client created with `events` (and resumable): read from that mode alone.
EVENTS_CAPTURE = Capture("events", (EVENTS_MODE,), ())


@dataclass
class BridgeStats:
    runs_observed: int = 0
    runs_completed: int = 0
    runs_failed: int = 0
    parts_seen: int = 0
    records_enqueued: int = 0
    records_written: int = 0
    malformed: int = 0
    retried: int = 0
    dropped: int = 0
    last_error: str | None = None
    started_at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class _Queued:
    record: RunEvent
    enqueued_at: float


class Bridge:
    """Journals observed runs into a store. Start with `start()`, stop with `stop()`."""

    def __init__(
        self,
        store: RunEventStore | None,
        client_factory: Callable[[], Any],
        *,
        queue_size: int = 10_000,
        batch_size: int = 500,
        max_backoff: float = 5.0,
        join_retries: int = 5,
        failures_before_split: int = 5,
        on_run_done: Callable[[str, str], Awaitable[None] | None] | None = None,
    ) -> None:
        self.store = store
        self._client_factory = client_factory
        self._client: Any = None
        self._queue: asyncio.Queue[_Queued] = asyncio.Queue(maxsize=queue_size)
        self._batch_size = batch_size
        self._max_backoff = max_backoff
        self._join_retries = join_retries
        self._failures_before_split = failures_before_split
        self._on_run_done = on_run_done
        self._followers: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._thread_tails: dict[str, asyncio.Task[None]] = {}
        self._recent_runs: deque[tuple[str, str]] = deque(maxlen=4096)
        self._writer: asyncio.Task[None] | None = None
        self._inflight: list[_Queued] = []
        self.stats = BridgeStats()

    # -- lifecycle ------------------------------------------------------------

    async def start(self) -> None:
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_loop(), name="journal-bridge-writer")

    async def stop(self, timeout: float = 10.0) -> None:
        """Let followers finish and drain the queue for up to `timeout` seconds."""
        followers = list(self._followers.values())
        if followers:
            await asyncio.wait(followers, timeout=timeout)
        for task in followers:
            task.cancel()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.drain(), timeout=timeout)
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
            self._writer = None
        if not self._queue.empty() or self._inflight:
            logger.error(
                "journal-bridge stopped with %d records not yet journaled",
                self._queue.qsize() + len(self._inflight),
            )

    async def drain(self) -> None:
        """Wait until every record enqueued so far is in the store."""
        while not self._queue.empty() or self._inflight:
            await asyncio.sleep(0.02)

    async def abort(self) -> None:
        """Stop at once, as a crash would: followers and the writer are cancelled and
        whatever is still queued is not written."""
        followers = list(self._followers.values())
        for task in followers:
            task.cancel()
        await asyncio.gather(*followers, return_exceptions=True)
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
            self._writer = None

    async def wait_for_thread(self, thread_id: str) -> None:
        """Wait until the runs of this thread observed so far are read to their end."""
        tail = self._thread_tails.get(str(thread_id))
        if tail is not None:
            await asyncio.gather(asyncio.shield(tail), return_exceptions=True)

    async def wait_for_runs(self) -> None:
        """Wait until every observed run's follower has finished."""
        while self._followers:
            await asyncio.gather(*list(self._followers.values()), return_exceptions=True)

    # -- observing runs -------------------------------------------------------

    def observe(self, thread_id: str, run_id: str, source: RunSource | None = None) -> None:
        """Journal this run; calling it again for a run already followed does nothing.

        Without a `source` the run is joined from its first frame and read
        from `events` (a run its client created resumable with `events`).
        Runs of one thread are journaled one after the other, in the order they
        were observed, so a thread's records never interleave two runs.
        """
        key = (str(thread_id), str(run_id))
        if key in self._followers or key in self._recent_runs:
            return
        self.stats.runs_observed += 1
        self._recent_runs.append(key)
        previous = self._thread_tails.get(key[0])
        source = source or RunSource(EVENTS_CAPTURE)
        task = asyncio.create_task(self._follow_after(previous, *key, source), name=f"journal-bridge-run-{run_id}")
        self._followers[key] = task
        self._thread_tails[key[0]] = task

        def done(_task: asyncio.Task[None], k: tuple[str, str] = key) -> None:
            self._followers.pop(k, None)
            if self._thread_tails.get(k[0]) is _task:
                del self._thread_tails[k[0]]

        task.add_done_callback(done)

    def tee(self, thread_id: str | None, run_id: str, source: RunSource) -> TeeSource:
        """Journal a run from the frames its client receives; returns what to feed them to.

        A stateless run (`thread_id` None) is journaled once a frame names its thread.
        """
        tee = source.tee = source.tee or TeeSource(source.capture)
        if thread_id is not None:
            self.observe(thread_id, run_id, source)
            return tee
        self.stats.runs_observed += 1
        task = asyncio.create_task(self._follow_stateless(run_id, source), name=f"journal-bridge-run-{run_id}")
        key = ("", str(run_id))
        self._followers[key] = task
        task.add_done_callback(lambda _t, k=key: self._followers.pop(k, None))
        return tee

    async def _follow_stateless(self, run_id: str, source: RunSource) -> None:
        assert source.tee is not None
        thread_id, held = await resolve_thread(source.tee)
        if thread_id is None:
            self.stats.runs_failed += 1
            logger.warning("journal-bridge: run %s ended before any frame named its thread; not journaled", run_id)
            return
        await self._follow(thread_id, run_id, source, held)

    async def _follow_after(
        self, previous: asyncio.Task[None] | None, thread_id: str, run_id: str, source: RunSource
    ) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        await self._follow(thread_id, run_id, source)

    @property
    def active_runs(self) -> int:
        return len(self._followers)

    def _sdk(self) -> Any:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    async def _follow(self, thread_id: str, run_id: str, source: RunSource, held: list[Part] | None = None) -> None:
        try:
            mapper = await self._read_run(thread_id, run_id, source, held)
        finally:
            await self._run_done(thread_id, run_id)
        if mapper is not None:
            self.stats.malformed += mapper.malformed
            self.stats.runs_completed += 1

    async def _read_run(
        self, thread_id: str, run_id: str, source: RunSource, held: list[Part] | None
    ) -> RunMapper | StateMapper | None:
        """Read the run to its end; None if it could not be read."""
        attempt = 0

        def seen() -> None:
            self.stats.parts_seen += 1

        async def emit(records: list[RunEvent]) -> None:
            for record in records:
                await self._enqueue(record)

        while True:
            try:
                # A second reading replays from the first frame: the records' keys make the repeat harmless.
                return await read_run(self._sdk(), thread_id, run_id, source, emit, held=held, on_part=seen)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the run goes on; report and retry the join
                attempt += 1
                self.stats.last_error = f"join {run_id}: {exc}"
                if attempt > self._join_retries:
                    self.stats.runs_failed += 1
                    logger.error("journal-bridge gave up joining run %s of thread %s: %s", run_id, thread_id, exc)
                    return None
                logger.warning("journal-bridge: join of run %s failed (%s); rejoining", run_id, exc)
                source, held = RunSource(source.capture, source.resumable, None, source.run,
                                         source.assistant_id, source.run_input), None
                await asyncio.sleep(min(self._max_backoff, 0.2 * 2**attempt))

    async def _run_done(self, thread_id: str, run_id: str) -> None:
        # Also after a failed read: whatever the run kept for the bridge is released.
        if self._on_run_done is None:
            return
        try:
            result = self._on_run_done(thread_id, run_id)
            if asyncio.iscoroutine(result):
                await result
        except Exception:  # noqa: BLE001
            logger.exception("journal-bridge: run-done hook failed for run %s", run_id)

    async def _enqueue(self, record: RunEvent) -> None:
        await self._queue.put(_Queued(record, time.monotonic()))
        self.stats.records_enqueued += 1

    async def write(self, records: list[RunEvent]) -> None:
        """Enqueue records produced elsewhere (SDK tee, follower, tests)."""
        for record in records:
            await self._enqueue(record)

    # -- delivery -------------------------------------------------------------

    async def _write_loop(self) -> None:
        while True:
            first = await self._queue.get()
            batch = [first]
            while len(batch) < self._batch_size:
                try:
                    batch.append(self._queue.get_nowait())
                except asyncio.QueueEmpty:
                    break
            self._inflight = batch
            await self._deliver(batch)
            self._inflight = []

    async def _deliver(self, batch: list[_Queued]) -> None:
        """Write a batch. While the store is unavailable, wait and retry for as long as
        it takes. Any other failure is retried a few times, then the batch is written
        record by record so one bad record cannot hold up every thread."""
        attempt = 0
        while True:
            try:
                if self.store is None:
                    raise StoreUnavailable("the run event store is not open yet")
                await self.store.put_batch([item.record for item in batch])
                self.stats.records_written += len(batch)
                return
            except asyncio.CancelledError:
                raise
            except InvalidEvent:
                break
            except Exception as exc:  # noqa: BLE001 - StoreUnavailable, driver errors alike
                attempt += 1
                self.stats.retried += 1
                self.stats.last_error = f"store: {exc}"
                if not isinstance(exc, StoreUnavailable) and attempt >= self._failures_before_split:
                    break
                if attempt == 1 or attempt % 20 == 0:
                    logger.warning(
                        "journal-bridge: store write failed (%s); %d records held, retrying",
                        exc,
                        len(batch) + self._queue.qsize(),
                    )
                await asyncio.sleep(min(self._max_backoff, 0.05 * 2**attempt))
        await self._deliver_one_by_one(batch)

    async def _deliver_one_by_one(self, batch: list[_Queued]) -> None:
        """Keep every record the store accepts; drop, count and report the rest."""
        for item in batch:
            attempt = 0
            while True:
                try:
                    if self.store is None:
                        raise StoreUnavailable("the run event store is not open yet")
                    await self.store.put_batch([item.record])
                    self.stats.records_written += 1
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001
                    attempt += 1
                    if isinstance(exc, StoreUnavailable) or (
                        not isinstance(exc, InvalidEvent) and attempt < self._failures_before_split
                    ):
                        self.stats.retried += 1
                        self.stats.last_error = f"store: {exc}"
                        await asyncio.sleep(min(self._max_backoff, 0.05 * 2**attempt))
                        continue
                    self.stats.dropped += 1
                    self.stats.last_error = f"dropped a {item.record.event_type} record: {exc}"
                    logger.error(
                        "journal-bridge dropped a %s record of run %s (key %s): %s",
                        item.record.event_type,
                        item.record.run_id,
                        item.record.source_key,
                        exc,
                    )
                    break

    # -- health ---------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        now = time.monotonic()
        oldest = None
        if self._inflight:
            oldest = self._inflight[0].enqueued_at
        elif not self._queue.empty():
            oldest = self._queue._queue[0].enqueued_at  # type: ignore[attr-defined]
        stats = self.stats
        return {
            "status": "ok" if stats.dropped == 0 and stats.runs_failed == 0 else "degraded",
            "store_open": self.store is not None,
            "backlog": self._queue.qsize() + len(self._inflight),
            "lag_seconds": round(now - oldest, 3) if oldest is not None else 0.0,
            "active_runs": self.active_runs,
            "runs_observed": stats.runs_observed,
            "runs_completed": stats.runs_completed,
            "runs_failed": stats.runs_failed,
            "parts_seen": stats.parts_seen,
            "records_enqueued": stats.records_enqueued,
            "records_written": stats.records_written,
            "malformed": stats.malformed,
            "retried": stats.retried,
            "dropped": stats.dropped,
            "last_error": stats.last_error,
        }
