"""One reader per run: the bridge and the reconciler leave a run whose claim another holds.

Two store objects on one SQLite file stand for two processes sharing a journal
(claims are per store object within a process, per process across them).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from journal_bridge.capture.reconcile import Reconciler
from journal_bridge.delivery.bridge import EVENTS_CAPTURE, Bridge
from journal_bridge.host.sse import Frame
from journal_bridge.mapping.reader import RunSource
from journal_bridge.model.envelope import OUTPUTS, RUN_END, make_event
from journal_bridge.store import open_store


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


class _Runs:
    def __init__(self, runs: dict[str, dict]) -> None:
        self.runs = runs

    async def list(self, thread_id, limit=10, offset=0):
        return list(self.runs.values())[offset : offset + limit]

    async def get(self, thread_id, run_id):
        return self.runs[run_id]


async def test_the_reconciler_takes_a_run_over_once_its_holder_lets_go(tmp_path):
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    run = {"run_id": "r1", "thread_id": "t1", "status": "running", "created_at": "2026-12-01T00:00:00+00:00",
           "kwargs": {"resumable": True, "stream_mode": ["events"]}}
    sdk = SimpleNamespace(runs=_Runs({"r1": run}))
    async with open_store(url) as here, open_store(url) as there:
        bridge = Bridge(here, lambda: sdk)
        await bridge.start()
        reconciler = Reconciler(bridge, lambda: sdk, lambda: here, sweep_deleted=False)
        assert await there.claim_run("r1")

        await reconciler._discover("t1")
        await reconciler._retry_elsewhere()
        assert reconciler._elsewhere == {"r1": "t1"} and not bridge.following("t1", "r1")

        # The holder read the run to its end and let go; the run's status lags behind.
        await there.put_batch([make_event(thread_id="t1", run_id="r1", event_type=RUN_END, category=OUTPUTS)])
        await there.release_run("r1")
        await reconciler._retry_elsewhere()
        await asyncio.sleep(0)
        await bridge.stop()

        assert not reconciler._elsewhere and reconciler._settled["r1"] == "journaled"
        assert reconciler.stats["runs_taken_over"] == 1
        assert bridge.stats.runs_read == 0, "nothing read twice"
        assert await there.claim_run("r1"), "the reconciler gave the claim up"
