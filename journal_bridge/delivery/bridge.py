"""The bridge: reads runs through langgraph-sdk and journals them.

Runs reach it two ways: `observe` joins a run through the SDK (runs nobody
streams; with no capture given, from `events` and the first frame),
`read_client_stream` reads a run from the frames its streaming client receives. Either way the
run's parts go through the capture's mapper (`journal_bridge.mapping.reader`) and the
records onto the bridge's `DeliveryQueue`, which writes them to the
`RunEventStore` in batches (order, idempotency, retries, drops and the spool
that keeps them across restarts: `journal_bridge.delivery.queue`).

Records of a run are accepted in stream order, so per thread the store's
`seq` follows the stream. While the queue is full (`queue_size`), followers
wait instead of dropping (back-pressure).

One reader per run. Processes sharing a journal (a distributed server, a
follower next to the plugin) are each handed runs the others read too: before
reading, the bridge claims the run in the store (`RunEventStore.claim_run`,
where the store offers it) and reads it only if the claim is its own; it gives
the claim up once the run's records are in the store. A run another process
holds is left to it (`read_elsewhere`); its reconciler asks again later, and
takes the run over when the holder died. A store that cannot answer the claim
does not stop the read: reading a run twice costs time, its records' keys
keep the journal whole; not reading it would lose it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from journal_bridge.delivery.health import assess
from journal_bridge.delivery.queue import DeliveryQueue, DeliveryStats
from journal_bridge.host.outcome import CANCELLED, ERRORED, INTERRUPTED
from journal_bridge.host.sdk import SdkClient, SdkOnDemand
from journal_bridge.mapping.capture_setting import EVENTS_PATH_MODES, Capture
from journal_bridge.mapping.events_mapper import RunMapper
from journal_bridge.mapping.client_stream import ClientStream
from journal_bridge.mapping.forks import read_checkpoint
from journal_bridge.mapping.owners import OWNERS, owned
from journal_bridge.mapping.reader import RunSource, read_run
from journal_bridge.mapping.state_mapper import StateMapper
from journal_bridge.model import records
from journal_bridge.model.envelope import RunEvent
from journal_bridge.projection import branches
from journal_bridge.store import RunEventStore
from journal_bridge.store.base import StoreError, supports

logger = logging.getLogger(__name__)

__all__ = ["EVENTS_CAPTURE", "Bridge", "BridgeStats"]

# How many runs handed over the bridge remembers (`knows`) once they are read.
_RECENT_RUNS = 4096

# How many runs found read by another process the bridge remembers.
_ELSEWHERE_RUNS = 4096

# A run its client created with `events` (and resumable): read from its callbacks and
# states (a run created without `values` shows its states in its root's end alone).
EVENTS_CAPTURE = Capture("events", EVENTS_PATH_MODES, ())


@dataclass
class BridgeStats(DeliveryStats):
    """The delivery counters (shared with the bridge's queue) and those of reading runs."""

    runs_observed: int = 0
    runs_read: int = 0  # read by this process (claimed, or the store claims nothing)
    runs_read_elsewhere: int = 0  # handed over while another process held their claim
    runs_read_from_client_joins: int = 0  # created runs read from their client's join, not one of the journal's
    runs_completed: int = 0  # read to their end, however they ended
    runs_failed: int = 0  # could not be read
    # How the runs read to their end ended (`journal_bridge.host.outcome`).
    runs_errored: int = 0
    runs_cancelled: int = 0
    runs_interrupted: int = 0
    parts_seen: int = 0
    malformed: int = 0


# The counters of reading runs, reported by `Bridge.health` beside the queue's.
_READING_COUNTERS = tuple(
    field.name for field in dataclasses.fields(BridgeStats) if field.name not in DeliveryStats.__dataclass_fields__
)


class Bridge:
    """Journals observed runs into a store. Start with `start()`, stop with `stop()`."""

    def __init__(
        self,
        store: RunEventStore | None,
        client_factory: Callable[[], SdkClient],
        *,
        spool: str | Path | None = None,
        queue_size: int = 10_000,
        batch_size: int = 500,
        max_backoff: float = 5.0,
        join_retries: int = 5,
        failures_before_split: int = 5,
        growing_after: float = 60.0,
        on_run_done: Callable[[str, str], Awaitable[None] | None] | None = None,
        default_owner: str | None = None,
    ) -> None:
        self.sdk = SdkOnDemand(client_factory)
        """The SDK client the bridge reads runs with."""
        self.default_owner = default_owner
        self._max_backoff = max_backoff
        self._join_retries = join_retries
        self._on_run_done = on_run_done
        self._followers: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._thread_tails: dict[str, asyncio.Task[None]] = {}
        # The newest 4096 runs handed over, oldest first: asked about for every run
        # (by `observe` and the reconciler's `knows`), so looked up, never scanned.
        self._recent_runs: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._elsewhere: OrderedDict[str, None] = OrderedDict()  # runs another process read
        self._releases: set[asyncio.Task[None]] = set()
        self.stats = BridgeStats()
        self.delivery = DeliveryQueue(
            store,
            spool=spool,
            queue_size=queue_size,
            batch_size=batch_size,
            max_backoff=max_backoff,
            failures_before_split=failures_before_split,
            growing_after=growing_after,
            stats=self.stats,
        )

    @property
    def store(self) -> RunEventStore | None:
        return self.delivery.store

    @store.setter
    def store(self, store: RunEventStore | None) -> None:
        self.delivery.store = store

    # -- lifecycle ------------------------------------------------------------

    async def start(self) -> None:
        await self.delivery.start()

    async def stop(self, timeout: float = 10.0) -> None:
        """Let followers finish and drain the queue for up to `timeout` seconds each;
        what is not yet written stays in the spool."""
        followers = list(self._followers.values())
        if followers:
            await asyncio.wait(followers, timeout=timeout)
        for task in followers:
            task.cancel()
        await asyncio.gather(*followers, return_exceptions=True)
        await self.delivery.stop(timeout=timeout)
        await self._cancel_releases()

    async def drain(self) -> None:
        """Wait until every record enqueued so far is in the store."""
        await self.delivery.drain()

    async def abort(self) -> None:
        """Stop at once, as a crash would: followers and the writer are cancelled;
        what was enqueued stays in the spool (lost without a spool file)."""
        followers = list(self._followers.values())
        for task in followers:
            task.cancel()
        await asyncio.gather(*followers, return_exceptions=True)
        await self.delivery.abort()
        await self._cancel_releases()

    async def wait_for_thread(self, thread_id: str) -> None:
        """Wait until the runs of this thread observed so far are read to their end."""
        tail = self._thread_tails.get(str(thread_id))
        if tail is not None:
            await asyncio.gather(asyncio.shield(tail), return_exceptions=True)

    def knows(self, thread_id: str, run_id: str) -> bool:
        """Whether this run was handed to the bridge (recently enough to be remembered)."""
        key = (str(thread_id), str(run_id))
        return key in self._followers or key in self._recent_runs

    def read_elsewhere(self, run_id: str) -> bool:
        """Whether this run was handed over while another process held its claim."""
        return str(run_id) in self._elsewhere

    async def claim(self, run_id: str) -> bool:
        """Claim the run for this process (`RunEventStore.claim_run`); True when it is
        this process's to read -- also when the store claims nothing or cannot answer."""
        store = self.store
        if store is None or not supports(store, "claim_run"):
            return True
        try:
            claimed = await store.claim_run(str(run_id))
        except StoreError as exc:
            self.stats.last_error = f"claim {run_id}: {exc}"
            logger.warning("journal-bridge: could not claim run %s (%s); reading it anyway", run_id, exc)
            return True
        if claimed:
            self._elsewhere.pop(str(run_id), None)
        return claimed

    async def release(self, run_id: str) -> None:
        """Give up this process's claim on the run."""
        store = self.store
        if store is None or not supports(store, "claim_run"):
            return
        try:
            await store.release_run(str(run_id))
        except StoreError as exc:
            logger.warning("journal-bridge: could not release run %s (%s)", run_id, exc)

    def _release_when_written(self, run_id: str) -> None:
        # Once what was read is in the store: a process taking the run over then finds it.
        async def release() -> None:
            await self.delivery.drain()
            await self.release(run_id)

        task = asyncio.create_task(release(), name=f"journal-bridge-release-{run_id}")
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def _cancel_releases(self) -> None:
        releases = list(self._releases)
        for task in releases:
            task.cancel()
        await asyncio.gather(*releases, return_exceptions=True)

    def _left_elsewhere(self, key: tuple[str, str], source: RunSource) -> None:
        """Another process reads this run: forget it was handed over, so a later
        hand-over (a reconciler's, once that process is gone) reads it here."""
        self.stats.runs_read_elsewhere += 1
        if source.client_stream is not None:
            source.client_stream.discard()
        if source.client_join is not None:
            source.client_join.cancel()
        self._recent_runs.pop(key, None)
        self._elsewhere[key[1]] = None
        while len(self._elsewhere) > _ELSEWHERE_RUNS:
            self._elsewhere.popitem(last=False)
        logger.info("journal-bridge: run %s of thread %s is read by another process", key[1], key[0])

    def reading_thread(self, thread_id: str) -> bool:
        """Whether a run of this thread is being read (or waits behind one that is)."""
        return str(thread_id) in self._thread_tails

    def following(self, thread_id: str, run_id: str) -> bool:
        """Whether the bridge is still reading this run."""
        return (str(thread_id), str(run_id)) in self._followers

    async def wait_for_runs(self) -> None:
        """Wait until every observed run's follower has finished."""
        while self._followers:
            await asyncio.gather(*list(self._followers.values()), return_exceptions=True)

    async def forget_thread(self, thread_id: str) -> int | None:
        """The thread was deleted: stop reading its runs and delete its journal.

        Records a reader held are dropped with it; the queue then deletes what
        waits and what is stored (`DeliveryQueue.forget_thread`). Returns how
        many stored records went, None when the store could not delete them now.
        """
        thread_id = str(thread_id)
        readers = [task for (tid, _), task in self._followers.items() if tid == thread_id]
        for task in readers:
            task.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        removed = await self.delivery.forget_thread(thread_id)
        OWNERS.forget(thread_id)
        if removed is not None:
            branches.forget_thread(thread_id)
        return removed

    async def state_forked(self, thread_id: str, checkpoint: Mapping[str, object], result: object) -> None:
        """A state update went on from `checkpoint`: journal the fork, then the
        messages the update added or changed, after the thread's runs so far."""
        thread_id = str(thread_id)
        await self.wait_for_thread(thread_id)
        head = (result.get("checkpoint") or {}).get("checkpoint_id") if isinstance(result, dict) else None
        sdk = self.sdk()
        base = await read_checkpoint(sdk, thread_id, str(checkpoint["checkpoint_id"]))
        updated = await read_checkpoint(sdk, thread_id, str(head)) if head else None
        owner = await OWNERS.owner_of(sdk, thread_id) or self.default_owner
        await self.delivery.write(owned(records.state_fork(thread_id, checkpoint, base, updated, head), owner))

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
        self._recent_runs[key] = None
        if len(self._recent_runs) > _RECENT_RUNS:
            self._recent_runs.popitem(last=False)
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

    def read_client_stream(self, thread_id: str | None, run_id: str, source: RunSource) -> ClientStream:
        """Journal a run from the frames its client receives; returns what to feed them to.

        A stateless run's temporary thread is named to no client and deleted when
        the run ends: its journal is filed under the run's id (`thread_id` None).
        """
        stream = source.client_stream = source.client_stream or ClientStream(source.capture, source.client_modes)
        self.observe(thread_id or run_id, run_id, source)
        return stream

    async def _follow_after(
        self, previous: asyncio.Task[None] | None, thread_id: str, run_id: str, source: RunSource
    ) -> None:
        # Claimed at once, not after the thread's earlier runs: a reconciler elsewhere asks meanwhile.
        if not await self.claim(run_id):
            self._left_elsewhere((thread_id, run_id), source)
            await self._run_done(thread_id, run_id)
            return
        try:
            if previous is not None:
                await asyncio.gather(previous, return_exceptions=True)
            self.stats.runs_read += 1
            await self._follow(thread_id, run_id, source)
        except BaseException:
            self._release_when_written(run_id)
            raise
        if self.delivery.backlog:
            self._release_when_written(run_id)
            return
        try:
            await self.release(run_id)  # nothing waits: what was read is in the store already
        except asyncio.CancelledError:
            self._release_when_written(run_id)
            raise

    @property
    def active_runs(self) -> int:
        return len(self._followers)

    async def _follow(self, thread_id: str, run_id: str, source: RunSource) -> None:
        try:
            mapper = await self._read_run(thread_id, run_id, source)
        finally:
            await self._run_done(thread_id, run_id)
        if source.client_join is not None and source.client_join.read_from_client:
            self.stats.runs_read_from_client_joins += 1
        if mapper is not None:
            self.stats.malformed += mapper.malformed
            self.stats.runs_completed += 1
            if mapper.ending == ERRORED:
                self.stats.runs_errored += 1
            elif mapper.ending == CANCELLED:
                self.stats.runs_cancelled += 1
            elif mapper.ending == INTERRUPTED:
                self.stats.runs_interrupted += 1

    async def _read_run(self, thread_id: str, run_id: str, source: RunSource) -> RunMapper | StateMapper | None:
        """Read the run to its end; None if it could not be read."""
        attempt = 0

        def seen() -> None:
            self.stats.parts_seen += 1

        async def emit(records: list[RunEvent]) -> None:
            await self.delivery.write(records)

        while True:
            try:
                # A second reading replays from the first frame: the records' keys make the repeat harmless.
                return await read_run(
                    self.sdk(), thread_id, run_id, source, emit, on_part=seen, default_owner=self.default_owner
                )
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
                source = dataclasses.replace(source, client_stream=None, client_join=None)
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
        await self.delivery.put(record)

    async def write(self, records: Iterable[RunEvent]) -> None:
        """Enqueue records produced elsewhere (tests, tools that map runs themselves)."""
        await self.delivery.write(records)

    # -- health ---------------------------------------------------------------

    def health(self) -> dict[str, object]:
        """The queue's report and the reading counters, with `status` and `reason`
        (`journal_bridge.delivery.health.assess`)."""
        report = self.delivery.report()
        report.update(
            active_runs=self.active_runs, **{name: getattr(self.stats, name) for name in _READING_COUNTERS}
        )
        return {**assess(report), **report}
