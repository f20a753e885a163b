"""The delivery queue: records go in, batches go into the `RunEventStore`.

Shared by everything that produces records -- the plugin's bridge, the SDK
tee, the follower sidecar. Producers `put` records; one writer takes them
oldest first, in batches, and appends them to the store.

Delivery contract:
- Accepted means durable: `put` returns once the records are in the store or
  committed to the queue's spool file (`journal_bridge.delivery.spool`), so they survive
  a process stop, a `kill -9` and a store outage spanning either; the next
  queue opened on the same spool delivers them. While nothing waits and the
  store keeps up, `put` appends straight to the store (write-through) and the
  spool is not touched; a write-through that fails spools the records and the
  writer retries them. Without a spool file (`spool=None`) records are kept in
  memory only and a stop with the store down loses them (logged).
- Order: records are written in the order they were accepted, across
  restarts too, so per thread the store's `seq` follows the producer's order.
  Write-throughs that wait for the store behind another one are appended
  together, in the order they came: concurrent runs share a transaction.
- Exactly once: a record leaves the spool only after the store holds it. A
  stop between the two delivers it again, and the store returns the existing
  record for a `(thread_id, source_key)` it already holds; records without a
  `source_key` are delivered at least once.
- Store unavailable (`StoreUnavailable`, or no store yet): the batch is retried
  with capped exponential backoff for as long as it takes, never reordered or
  discarded (`retried` counts the attempts). With `queue_size`, producers wait
  while that many records are waiting (back-pressure).
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
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from journal_bridge.model.envelope import InvalidEvent, RunEvent
from journal_bridge.delivery.health import assess
from journal_bridge.delivery.spool import Spool, SpooledRecord, encode
from journal_bridge.store import RunEventStore, StoreUnavailable

logger = logging.getLogger(__name__)

# Deleted threads remembered, for records of theirs read before the deletion.
_MAX_FORGOTTEN = 10_000

__all__ = ["DeliveryQueue", "DeliveryStats"]


@dataclass
class DeliveryStats:
    records_enqueued: int = 0
    records_written: int = 0
    retried: int = 0
    dropped: int = 0
    last_error: str | None = None
    started_at: float = field(default_factory=time.time)


@dataclass
class _Group:
    """Write-throughs waiting for the store lock; the first to come appends them all.

    `done` tells each of the others what `_write_through` would have: True
    written, False spool them.
    """

    records: list[RunEvent]
    done: asyncio.Future[bool]


class DeliveryQueue:
    """Records waiting for `store`, written in batches by one background writer.

    `store` may be None and set later (a store still opening): records wait.
    `spool` is the spool file's path (see `journal_bridge.delivery.spool.spool_path`),
    or None to keep records in memory. `queue_size` bounds how many records may
    wait before `put` waits too (0: unbounded). The backlog counts as growing
    when it is larger at the end of a `growing_after`-second window than at
    its start; `clock` is the time source of those windows and of record ages.
    A write-through that the store has not finished within
    `write_through_timeout` seconds is spooled as well (None: every record is
    spooled first, the writer alone appends).
    """

    def __init__(
        self,
        store: RunEventStore | None,
        *,
        spool: str | Path | None = None,
        queue_size: int = 0,
        batch_size: int = 500,
        max_backoff: float = 5.0,
        failures_before_split: int = 5,
        growing_after: float = 60.0,
        write_through_timeout: float | None = 0.2,
        stats: DeliveryStats | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.stats = stats if stats is not None else DeliveryStats()
        self._spool = Spool(spool, clock=clock)
        self._queue_size = queue_size
        self._batch_size = batch_size
        self._max_backoff = max_backoff
        self._failures_before_split = failures_before_split
        self._growing_after = growing_after
        self._write_through_timeout = write_through_timeout
        self._clock = clock
        self._writer: asyncio.Task[None] | None = None
        self._start_lock = asyncio.Lock()
        # Held by whoever appends to the store: the writer, or a write-through
        # (until it ends, even when it missed its deadline: `_finishing`).
        self._store_lock = asyncio.Lock()
        self._finishing: asyncio.Future[None] | None = None
        # Write-throughs waiting for the store lock, to be appended together.
        self._waiting: _Group | None = None
        self._wakeup = asyncio.Event()
        self._changed = asyncio.Condition()
        self._delivered_through = 0
        # When writes began failing, and when the last one succeeded.
        self._failing_since: float | None = None
        self._progress_at = clock()
        # The growth window: when it began and the backlog then.
        self._window = (clock(), 0)
        self._growing_since: float | None = None
        # Deleted threads -> the last spool id when they were: their records up to it are never written.
        self._forgotten: OrderedDict[str, int] = OrderedDict()

    # -- lifecycle ------------------------------------------------------------

    @property
    def spool_path(self) -> Path | None:
        """The spool file in use; None while records are kept in memory only."""
        return self._spool.path

    @property
    def backlog(self) -> int:
        """Records accepted and not yet in the store (nor dropped)."""
        return self._spool.size

    async def start(self) -> None:
        """Open the spool (records left from before are delivered first) and start the writer."""
        async with self._start_lock:
            if self._writer is not None:
                return
            await self._spool.open()
            self._delivered_through = 0
            self._window = (self._clock(), self._spool.size)
            self._writer = asyncio.create_task(self._write_loop(), name="journal-bridge-writer")

    async def stop(self, timeout: float = 10.0) -> None:
        """Deliver for up to `timeout` seconds, then stop; what is left stays spooled.

        With the store failing there is nothing to wait for: the spool keeps the records.
        """
        if self._writer is not None and self._failing_since is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.drain(), timeout=timeout)
        await self._halt()
        left, path = self._spool.size, self._spool.path
        await self._spool.close()
        if not left:
            return
        if path is not None:
            logger.warning(
                "journal-bridge: %d records not yet journaled stay spooled in %s; the next start delivers them",
                left,
                path,
            )
        else:
            logger.error("journal-bridge stopped with %d records not yet journaled (no spool file)", left)

    async def abort(self) -> None:
        """Stop at once, as a crash would: nothing more is written; the spool keeps what it holds."""
        await self._halt()
        await self._spool.close()

    async def _halt(self) -> None:
        writer, self._writer = self._writer, None
        finishing, self._finishing = self._finishing, None
        for task in (writer, finishing):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def drain(self) -> None:
        """Wait until every record accepted so far is in the store (or dropped)."""
        target = self._spool.last_id
        async with self._changed:
            await self._changed.wait_for(
                lambda: self._delivered_through >= target or self._spool.size == 0
            )

    async def forget_thread(self, thread_id: str, *, timeout: float = 2.0) -> int | None:
        """Delete the thread's journal: its records waiting here, and those in the store.

        No record of the thread accepted so far reaches the store after this
        returns, not even one of a write under way. Returns how many stored
        records went, or None when the store could not delete them within
        `timeout` (down, or a write hangs): the caller deletes them later.
        """
        self._forgotten[thread_id] = self._spool.last_id
        while len(self._forgotten) > _MAX_FORGOTTEN:
            self._forgotten.popitem(last=False)
        if await self._spool.remove_thread(thread_id):
            self._track_growth()
            async with self._changed:
                self._changed.notify_all()
        try:
            await asyncio.wait_for(self._store_lock.acquire(), timeout)
        except TimeoutError:
            return None
        try:
            if self.store is None:
                return None
            return await asyncio.wait_for(self.store.delete_by_thread(thread_id), timeout)
        except (StoreUnavailable, TimeoutError) as exc:
            logger.warning("journal-bridge: could not delete the journal of thread %s yet: %s", thread_id, exc)
            return None
        finally:
            self._store_lock.release()

    def _deleted_since(self, spool_id: int, record: RunEvent) -> bool:
        """Whether `record` (spooled as `spool_id`) belongs to a thread deleted after it came."""
        last = self._forgotten.get(record.thread_id)
        return last is not None and spool_id <= last

    # -- accepting records ----------------------------------------------------

    async def put(self, record: RunEvent) -> None:
        await self.write((record,))

    async def write(self, records: Iterable[RunEvent]) -> None:
        """Accept `records`, in order; returns once they are in the store or spooled.

        A record the store could never accept (`InvalidEvent`) is dropped here,
        counted and logged, as the writer would.
        """
        records = list(records)
        if not records:
            return
        if self._writer is None:
            await self.start()
        slow = await self._write_through(records) if self._may_write_through(records) else None
        if slow is True:
            return
        accepted: list[RunEvent] = []
        encoded: list[str] = []
        for record in records:
            try:
                encoded.append(encode(record))
            except InvalidEvent as exc:
                self._drop(record, exc)
                continue
            accepted.append(record)
        if encoded:
            if self._queue_size:
                async with self._changed:
                    await self._changed.wait_for(lambda: self._spool.size < self._queue_size)
            await self._spool.append(accepted, encoded)
            self.stats.records_enqueued += len(encoded)
            self._track_growth()
        if isinstance(slow, asyncio.Future):
            self._finishing = asyncio.ensure_future(self._finish_slow_write(slow))
        self._wakeup.set()

    def _may_write_through(self, records: list[RunEvent]) -> bool:
        """Write-through keeps the order only while nothing waits before `records`."""
        return (
            self.store is not None
            and not self._spool.size
            and self._failing_since is None
            and (self._finishing is None or self._finishing.done())  # no append hangs
            and len(records) <= self._batch_size
            and self._write_through_timeout is not None
        )

    async def _write_through(self, records: list[RunEvent]) -> bool | asyncio.Future[list[RunEvent]]:
        """Append `records` to the store, holding the store lock (the writer waits).

        True when the store took them within `write_through_timeout`. False when
        it refused them (they are spooled and the writer retries them, or drops
        the invalid ones). Still pending at the deadline: the pending append,
        which keeps the lock until it ends (`_finish_slow_write`); the records
        are spooled too. Writes that wait for the lock together go into the
        store in one append, in the order they came.
        """
        assert self.store is not None
        timeout = self._write_through_timeout
        assert timeout is not None
        group = self._waiting
        if group is not None and len(group.records) + len(records) <= self._batch_size:
            # Another write waits for the lock: go with it. Its deadlines are this
            # one's; if it fails, these records are spooled after its own.
            group.records.extend(records)
            return await asyncio.shield(group.done)
        if self._store_lock.locked():
            # Another write-through is under way: queue behind it, within the
            # deadline, taking along whatever comes meanwhile.
            group = self._waiting = _Group(list(records), asyncio.get_running_loop().create_future())
            began = time.monotonic()
            try:
                await asyncio.wait_for(self._store_lock.acquire(), timeout=timeout)
            except TimeoutError:
                self._close(group, False)
                return False
            except BaseException:
                self._close(group, False)
                raise
            timeout = max(0.0, timeout - (time.monotonic() - began))
            records = group.records
            if self._waiting is group:
                self._waiting = None
            if not self._may_write_through(records):  # something was spooled meanwhile
                self._store_lock.release()
                self._close(group, False)
                return False
        else:
            group = None
            await self._store_lock.acquire()
        append = asyncio.ensure_future(self.store.put_batch(records))
        try:
            await asyncio.wait_for(asyncio.shield(append), timeout=timeout)
        except TimeoutError:
            self._close(group, False)
            return append  # the lock stays held: `write` hands it to `_finish_slow_write`
        except asyncio.CancelledError:
            self._close(group, False)
            self._finishing = asyncio.ensure_future(self._finish_slow_write(append))
            raise
        except Exception as exc:  # noqa: BLE001 - StoreUnavailable, driver errors alike
            self._store_lock.release()
            self._close(group, False)
            if not isinstance(exc, InvalidEvent):  # invalid records are the spool path's to drop
                self._failed(exc)
                logger.warning(
                    "journal-bridge: store write failed (%s); %d records spooled, retrying", exc, len(records)
                )
            return False
        self._store_lock.release()
        self.stats.records_enqueued += len(records)
        self._succeeded(len(records))
        self._close(group, True)
        return True

    def _close(self, group: _Group | None, written: bool) -> None:
        if group is None:
            return
        if self._waiting is group:
            self._waiting = None
        if not group.done.done():
            group.done.set_result(written)

    async def _finish_slow_write(self, append: asyncio.Future[list[RunEvent]]) -> None:
        """Hold the store lock until a write-through that missed its deadline ends.

        Its records are spooled as well, and the writer delivers those copies
        after it: the store keeps one record per `source_key`.
        """
        try:
            with contextlib.suppress(Exception):
                await append
            if (exc := append.exception()) is not None and not isinstance(exc, InvalidEvent):
                self._failed(exc)
        finally:
            self._store_lock.release()

    # -- writing --------------------------------------------------------------

    async def _write_loop(self) -> None:
        while True:
            async with self._store_lock:
                batch = await self._spool.head(self._batch_size)
                if batch:
                    await self._deliver(batch)
                    continue
            self._wakeup.clear()
            await self._wakeup.wait()

    async def _removed(self, last_id: int) -> None:
        await self._spool.remove_through(last_id)
        self._delivered_through = last_id
        self._track_growth()
        async with self._changed:
            self._changed.notify_all()

    def _succeeded(self, count: int) -> None:
        self.stats.records_written += count
        self._failing_since = None
        self._progress_at = self._clock()

    def _failed(self, exc: BaseException) -> None:
        self.stats.retried += 1
        self.stats.last_error = f"store: {exc}"
        if self._failing_since is None:
            self._failing_since = self._clock()

    async def _append(self, records: list[RunEvent]) -> None:
        if self.store is None:
            raise StoreUnavailable("the run event store is not open yet")
        await self.store.put_batch(records)

    async def _backoff(self, attempt: int) -> None:
        await asyncio.sleep(min(self._max_backoff, 0.05 * 2**attempt))

    async def _deliver(self, batch: list[SpooledRecord]) -> None:
        """Write a batch. While the store is unavailable, wait and retry for as long as
        it takes. Any other failure is retried a few times, then the batch is written
        record by record so one bad record cannot hold up every thread."""
        if self._forgotten:
            kept = [(spool_id, record) for spool_id, record in batch if not self._deleted_since(spool_id, record)]
            if not kept:
                await self._removed(batch[-1][0])
                return
            batch = kept
        attempt = 0
        while True:
            try:
                await self._append([record for _, record in batch])
            except asyncio.CancelledError:
                raise
            except InvalidEvent:
                break
            except Exception as exc:  # noqa: BLE001 - StoreUnavailable, driver errors alike
                attempt += 1
                self._failed(exc)
                if not isinstance(exc, StoreUnavailable) and attempt >= self._failures_before_split:
                    break
                if attempt == 1 or attempt % 20 == 0:
                    logger.warning(
                        "journal-bridge: store write failed (%s); %d records held, retrying",
                        exc,
                        self._spool.size,
                    )
                await self._backoff(attempt)
                continue
            self._succeeded(len(batch))
            await self._removed(batch[-1][0])
            return
        await self._deliver_one_by_one(batch)

    async def _deliver_one_by_one(self, batch: list[SpooledRecord]) -> None:
        """Keep every record the store accepts; drop, count and report the rest."""
        for spool_id, record in batch:
            attempt = 0
            while True:
                try:
                    await self._append([record])
                    self._succeeded(1)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001
                    attempt += 1
                    if isinstance(exc, StoreUnavailable) or (
                        not isinstance(exc, InvalidEvent) and attempt < self._failures_before_split
                    ):
                        self._failed(exc)
                        await self._backoff(attempt)
                        continue
                    self._drop(record, exc)
                    break
            await self._removed(spool_id)

    def _drop(self, record: RunEvent, exc: Exception) -> None:
        self.stats.dropped += 1
        self.stats.last_error = f"dropped a {record.event_type} record: {exc}"
        logger.error(
            "journal-bridge dropped a %s record of run %s (key %s): %s",
            record.event_type,
            record.run_id,
            record.source_key,
            exc,
        )

    # -- health ---------------------------------------------------------------

    def _track_growth(self) -> None:
        now = self._clock()
        started, backlog_then = self._window
        if now - started < self._growing_after:
            return
        backlog = self._spool.size
        if backlog > backlog_then:
            if self._growing_since is None:
                self._growing_since = started
        else:
            self._growing_since = None
        self._window = (now, backlog)

    def report(self) -> dict[str, object]:
        """The queue's counters and state, without a verdict (see `health`)."""
        self._track_growth()
        now = self._clock()
        backlog = self._spool.size
        head = self._spool.head_spooled_at
        lag = max(0.0, now - head) if backlog and head is not None else 0.0
        stalled = max(0.0, now - max(self._progress_at, head or 0.0)) if backlog else 0.0
        growing = now - self._growing_since if self._growing_since is not None else 0.0
        stats = self.stats
        return {
            "store_open": self.store is not None,
            "store_failing": self._failing_since is not None,
            "backlog": backlog,
            "lag_seconds": round(lag, 3),
            "stalled_seconds": round(stalled, 3),
            "backlog_growing_seconds": round(growing, 3),
            "growing_after": self._growing_after,
            "spool": str(self._spool.path) if self._spool.path is not None else None,
            "spool_recovered": self._spool.recovered,
            "records_enqueued": stats.records_enqueued,
            "records_written": stats.records_written,
            "retried": stats.retried,
            "dropped": stats.dropped,
            "last_error": stats.last_error,
        }

    def health(self) -> dict[str, object]:
        """`report()` with `status` and `reason` (see `journal_bridge.delivery.health.assess`)."""
        report = self.report()
        return {**assess(report), **report}
