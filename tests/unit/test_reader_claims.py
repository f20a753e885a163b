"""One reader per run: the bridge and the reconciler leave a run whose claim another holds.

Two store objects on one SQLite file stand for two processes sharing a journal
(claims are per store object within a process, per process across them).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace

import orjson
import pytest

from journal_bridge.capture.reconcile import Reconciler
from journal_bridge.delivery.bridge import EVENTS_CAPTURE, Bridge
from journal_bridge.host.sse import Frame
from journal_bridge.mapping.capture_setting import Capture
from journal_bridge.mapping.reader import RunSource
from journal_bridge.model import records
from journal_bridge.model.envelope import RUN_END
from journal_bridge.store import RunEventStore, open_store


async def _no_thread(thread_id):
    raise LookupError(thread_id)


def _no_server():
    raise AssertionError("a run read elsewhere is never joined here")


async def test_a_run_another_process_reads_is_left_to_it(tmp_path):
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    async with open_store(url) as here, open_store(url) as there:
        assert await there.claim_run("r1")
        bridge = Bridge(here, _no_server)
        await bridge.start()
        tee = bridge.read_client_stream("t1", "r1", RunSource(EVENTS_CAPTURE))
        await bridge.wait_for_runs()
        tee.feed(Frame(b"", b"", "events", b"{}", "1"))
        await bridge.stop()

    assert bridge.stats.runs_read == 0 and bridge.stats.runs_read_elsewhere == 1
    assert bridge.read_elsewhere("r1")
    assert not bridge.knows("t1", "r1"), "a later hand-over (a takeover) reads it here"
    assert not tee.ready(), "the tee keeps no frame of a run read elsewhere"
    assert bridge.health()["runs_read_elsewhere"] == 1


# A run read elsewhere, still running as far as the server says.
_HELD_RUN = {"run_id": "r1", "thread_id": "t1", "status": "running", "created_at": "2026-12-01T00:00:00+00:00",
             "kwargs": {"resumable": True, "stream_mode": ["events"]}}


class _Runs:
    def __init__(self, runs: dict[str, dict], failing_reads: int = 0) -> None:
        self.runs = runs
        self.failing_reads = failing_reads  # reads of a whole run that fail first

    async def list(self, thread_id, limit=10, offset=0, select=None):
        return [{k: run[k] for k in select or run} for run in self.runs.values()][offset : offset + limit]

    async def get(self, thread_id, run_id):
        if self.failing_reads:
            self.failing_reads -= 1
            raise RuntimeError("server busy")
        return self.runs[run_id]


@contextlib.asynccontextmanager
async def _held_elsewhere(tmp_path, runs: _Runs) -> AsyncIterator[tuple[Bridge, Reconciler, RunEventStore]]:
    """A bridge and a reconciler on a journal whose other process (`there`) holds the claim on r1."""
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    sdk = SimpleNamespace(runs=runs)
    async with open_store(url) as here, open_store(url) as there:
        bridge = Bridge(here, lambda: sdk)
        await bridge.start()
        assert await there.claim_run("r1")
        try:
            yield bridge, Reconciler(bridge, lambda: sdk, lambda: here, sweep_deleted=False), there
        finally:
            await bridge.stop()


async def test_the_reconciler_takes_a_run_over_once_its_holder_lets_go(tmp_path):
    async with _held_elsewhere(tmp_path, _Runs({"r1": _HELD_RUN})) as (bridge, reconciler, there):
        await reconciler._discover("t1")
        await reconciler._retry_elsewhere()
        assert reconciler._elsewhere == {"r1": "t1"} and not bridge.following("t1", "r1")

        # The holder read the run to its end and let go; the run's status lags behind.
        await there.put_batch([records.record("t1", "r1", records.run_end({}))])
        await there.release_run("r1")
        await reconciler._retry_elsewhere()
        await asyncio.sleep(0)
        await bridge.stop()

        assert not reconciler._elsewhere and reconciler._settled["r1"] == "journaled"
        assert reconciler.stats["runs_taken_over"] == 1
        assert bridge.stats.runs_read == 0, "nothing read twice"
        assert await there.claim_run("r1"), "the reconciler gave the claim up"


class _Joinable:
    """A run the server still has: its frames replayed from the first to a join."""

    def __init__(self, parts) -> None:
        self.parts, self.joins = parts, []

    def join_stream(self, thread_id, run_id, params=None, last_event_id=None):
        self.joins.append(last_event_id)

        async def replay():
            for event, data, part_id in self.parts:
                yield SimpleNamespace(event=event, data=data, id=part_id)

        return replay()

    async def get(self, thread_id, run_id):
        return {"status": "success"}


@pytest.mark.parametrize("fed", [0, 1], ids=["empty body", "metadata only"])
async def test_a_client_stream_that_ended_without_a_frame_is_read_by_a_join(tmp_path, fed):
    parts = [
        ("metadata", {"run_id": "r1"}, "1"),
        ("values", {"messages": [{"type": "human", "content": "hi", "id": "h1"}]}, "2"),
        ("values", {"messages": [{"type": "human", "content": "hi", "id": "h1"},
                                 {"type": "ai", "content": "hello", "id": "a1"}]}, "3"),
    ]
    runs = _Joinable(parts)
    sdk = SimpleNamespace(runs=runs, threads=SimpleNamespace(get=_no_thread), assistants=None)
    state = RunSource(Capture("state", ("values", "custom"), ("custom",)), run={"assistant_id": "a", "kwargs": {}})
    async with open_store(f"sqlite:///{tmp_path / 'journal.db'}") as store:
        bridge = Bridge(store, lambda: sdk)
        await bridge.start()
        # The response ended normally, with nothing of the run past its metadata.
        stream = bridge.read_client_stream("t1", "r1", state)
        for _, data, part_id in parts[:fed]:
            stream.feed(Frame(b"", b"\n\n", "metadata", orjson.dumps(data), part_id))
        stream.close(complete=True)
        await bridge.wait_for_runs()
        await bridge.stop()
        events = await store.list_events("t1", "r1")
    assert runs.joins == [parts[fed - 1][2] if fed else "0"], "joined from the last frame the client got"
    kinds = [e.event_type for e in events]
    assert kinds[-1] == RUN_END and kinds.count(RUN_END) == 1, kinds
    assert "hello" in [e.content.get("content") for e in events if e.category == "message"], events


async def test_a_takeover_whose_read_fails_is_tried_again_at_the_next_pass(tmp_path):
    # Its reader died before the run ended; the run ended since.
    runs = _Runs({"r1": {**_HELD_RUN, "status": "success"}})
    async with _held_elsewhere(tmp_path, runs) as (bridge, reconciler, there):
        await reconciler._discover("t1")
        await there.release_run("r1")

        runs.failing_reads = 1
        with pytest.raises(RuntimeError, match="server busy"):
            await reconciler._retry_elsewhere()
        assert reconciler._elsewhere == {"r1": "t1"}, "still to be decided"
        assert await there.claim_run("r1"), "the claim was given up"
        await there.release_run("r1")

        await reconciler._retry_elsewhere()
        await bridge.stop()
        assert not reconciler._elsewhere and reconciler._waiting == {"r1": "t1"} and reconciler._repair == {"t1"}
        assert await there.claim_run("r1"), "the claim was given up"


class _CountedStore:
    """A journal that counts the reads the reconciler makes of it."""

    def __init__(self, store: RunEventStore) -> None:
        self._store, self.reads = store, 0

    def __getattr__(self, name: str):
        attribute = getattr(self._store, name)
        if name in ("has_source_keys", "list_events", "list_timeline"):
            async def counted(*args, **kwargs):
                self.reads += 1
                return await attribute(*args, **kwargs)

            return counted
        return attribute


class _CountedRuns(_Runs):
    def __init__(self, runs: dict[str, dict]) -> None:
        super().__init__(runs)
        self.gets = 0

    async def get(self, thread_id, run_id):
        self.gets += 1
        return await super().get(thread_id, run_id)


async def test_runs_let_go_by_their_reader_are_checked_a_thread_at_a_time(tmp_path):
    """Twelve runs of two threads read by another process: once it lets go, one journal
    query per thread settles those it journaled to the end, and only the one whose
    reader died before its end is read from the server."""
    held = {f"r{n}": {**_HELD_RUN, "run_id": f"r{n}", "thread_id": f"t{n % 2}", "status": "success"} for n in range(12)}
    runs = _CountedRuns(held)
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    sdk = SimpleNamespace(runs=runs)
    async with open_store(url) as here, open_store(url) as there:
        counted = _CountedStore(here)
        bridge = Bridge(here, lambda: sdk)
        await bridge.start()
        reconciler = Reconciler(bridge, lambda: sdk, lambda: counted, sweep_deleted=False)
        for run_id in held:
            assert await there.claim_run(run_id)
        for thread_id in ("t0", "t1"):
            runs.runs = {k: v for k, v in held.items() if v["thread_id"] == thread_id}
            await reconciler._discover(thread_id)
        runs.runs = held
        assert len(reconciler._elsewhere) == 12 and runs.gets == 0

        # The holder journaled eleven to their end (one failed) and let go of all twelve.
        ends = [records.record(v["thread_id"], k, records.run_end({}) if k != "r5" else records.run_error("boom"))
                for k, v in held.items() if k != "r7"]
        await there.put_batch(ends)
        for run_id in held:
            await there.release_run(run_id)
        counted.reads = 0
        await reconciler._retry_elsewhere()
        await bridge.stop()

    assert counted.reads == 2, "one journal query per thread"
    assert runs.gets == 1, "only the run whose end is not journaled is read from the server"
    assert not reconciler._elsewhere
    assert {k for k, how in reconciler._settled.items() if how == "journaled"} == set(held) - {"r7"}
    assert reconciler._waiting == {"r7": "t1"}
    assert reconciler.stats["released_checks"] == 2 and reconciler.stats["runs_taken_over"] == 12
