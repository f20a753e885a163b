"""What a reconciler pass lists and remembers: a thread being read waits for a quiet pass, a listing leaves inputs out."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from journal_bridge.capture.reconcile import Reconciler
from journal_bridge.delivery.bridge import Bridge
from journal_bridge.store import open_store
from tests.harness.sdk_errors import run_not_found

CHANGED = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
OTHER = datetime(2026, 12, 1, 12, 5, tzinfo=UTC)


class _Server:
    """Two threads changed; the run of `busy` streams until the test ends it."""

    def __init__(self) -> None:
        self.listed: list[str] = []
        self.run_over = asyncio.Event()
        self.threads = SimpleNamespace(search=self._search, get=self._thread)
        self.runs = SimpleNamespace(list=self._list, join_stream=self._join, get=self._run)

    async def _search(self, **_):
        return [
            {"thread_id": "quiet", "updated_at": OTHER.isoformat()},
            {"thread_id": "busy", "updated_at": CHANGED.isoformat()},
        ]

    async def _thread(self, thread_id):
        return {"thread_id": thread_id, "metadata": {}}

    async def _list(self, thread_id, limit=10, offset=0, select=None):
        self.listed.append(thread_id)
        return []

    def _join(self, thread_id, run_id, **_):
        async def frames():
            await self.run_over.wait()
            yield SimpleNamespace(event="metadata", data={"run_id": run_id}, id="1")

        return frames()

    async def _run(self, thread_id, run_id):
        return {"status": "success"}


@contextlib.asynccontextmanager
async def _reconciling(server: _Server, url: str = "memory://") -> AsyncIterator[tuple[Bridge, Reconciler]]:
    """A bridge on a journal (`url`) and a reconciler, both reading `server`."""
    async with open_store(url) as store:
        bridge = Bridge(store, lambda: server)
        await bridge.start()
        try:
            yield bridge, Reconciler(bridge, lambda: server, lambda: store, sweep_deleted=False)
        finally:
            server.run_over.set()
            await bridge.stop()


async def test_a_thread_the_bridge_reads_is_listed_at_the_first_quiet_pass():
    server = _Server()
    async with _reconciling(server) as (bridge, reconciler):
        bridge.observe("busy", "r1")
        await asyncio.sleep(0)
        assert bridge.reading_thread("busy")

        await reconciler.reconcile()
        assert server.listed == ["quiet"], "the thread being read is not listed"
        assert reconciler.stats["threads_deferred"] == 1
        # The watermark stays at the deferred change: the next search brings the thread back.
        assert reconciler._since == CHANGED

        server.run_over.set()
        await bridge.wait_for_runs()
        await reconciler.reconcile()
        assert server.listed == ["quiet", "busy"]
        assert reconciler._since == OTHER
        await reconciler.reconcile()
        assert server.listed == ["quiet", "busy"], "listed once per change"


class _ChangingThreads:
    """Threads whose `updated_at` the test sets; searched newest first, with no runs."""

    def __init__(self) -> None:
        self.updated: dict[str, datetime] = {}
        self.listed: list[str] = []
        self.threads = SimpleNamespace(search=self._search)
        self.runs = SimpleNamespace(list=self._list)

    async def _search(self, *, limit, offset, **_):
        newest = sorted(self.updated.items(), key=lambda item: item[1], reverse=True)
        return [{"thread_id": t, "updated_at": u.isoformat()} for t, u in newest][offset : offset + limit]

    async def _list(self, thread_id, limit=10, offset=0, select=None):
        self.listed.append(thread_id)
        return []


async def test_a_thread_is_remembered_only_while_a_search_can_list_it_again():
    server = _ChangingThreads()
    bridge = SimpleNamespace(reading_thread=lambda thread_id: False)
    reconciler = Reconciler(bridge, lambda: server, lambda: None, sweep_deleted=False, overlap=30)  # type: ignore[arg-type]
    for n in range(5):
        server.updated[f"old{n}"] = CHANGED
    await reconciler.reconcile()
    assert sorted(server.listed) == [f"old{n}" for n in range(5)]

    # Two minutes on, one thread changes: the others are older than the next search's floor.
    server.listed.clear()
    server.updated["new"] = CHANGED + timedelta(minutes=2)
    await reconciler.reconcile()
    assert server.listed == ["new"]
    assert list(reconciler._thread_seen) == ["new"], "threads no search lists again are forgotten"

    await reconciler.reconcile()
    assert server.listed == ["new"], "an unchanged thread is not listed again"
    server.updated["old0"] = CHANGED + timedelta(minutes=3)
    await reconciler.reconcile()
    assert server.listed == ["new", "old0"], "a forgotten thread that changes is listed"


class _UnhandedRun(_Server):
    """A thread with a running run nobody handed the bridge; `runs.get` fails until `readable`."""

    def __init__(self) -> None:
        super().__init__()
        self.run = {"run_id": "r1", "thread_id": "t1", "status": "running", "created_at": CHANGED.isoformat(),
                    "assistant_id": "a1",
                    "kwargs": {"input": {"messages": ["x" * 1000]}, "stream_mode": ["events"], "resumable": True}}
        self.readable = False
        self.deleted = False
        self.selected: list[object] = []
        self.runs = SimpleNamespace(list=self._list, get=self._get, join_stream=self._join)

    async def _search(self, **_):
        return [{"thread_id": "t1", "updated_at": CHANGED.isoformat()}]

    async def _list(self, thread_id, limit=10, offset=0, select=None):
        self.selected.append(select)
        listed = {k: v for k, v in self.run.items() if select is None or k in select}
        return [listed][offset : offset + limit]

    async def _get(self, thread_id, run_id):
        if self.deleted:
            raise run_not_found(thread_id, run_id)
        if not self.readable:
            raise RuntimeError("server busy")
        return self.run


async def test_a_listing_reads_runs_without_their_input_and_a_new_run_whole():
    server = _UnhandedRun()
    async with _reconciling(server) as (bridge, reconciler):
        with pytest.raises(RuntimeError, match="server busy"):
            await reconciler.reconcile()  # a pass that cannot read a new run fails, as a listing would
        assert not bridge.following("t1", "r1"), "not joined without its run object"
        assert reconciler.stats["runs_joined"] == 0 and reconciler._since is None

        server.readable = True
        await reconciler.reconcile()
        assert len(server.selected) == 2, "a run that could not be read is listed again"
        assert reconciler.stats["runs_joined"] == 1 and bridge.following("t1", "r1")
        assert all(select is not None and "kwargs" not in select for select in server.selected)


async def test_a_run_deleted_since_it_was_listed_is_left_and_its_claim_given_up(tmp_path):
    server = _UnhandedRun()
    server.deleted = True
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    async with _reconciling(server, url) as (bridge, reconciler), open_store(url) as other_process:
        await reconciler.reconcile()
        await reconciler.reconcile()
        assert len(server.selected) == 1, "the thread is decided: listed once"
        assert reconciler.stats["runs_joined"] == 0 and not bridge.following("t1", "r1")
        assert await other_process.claim_run("r1"), "the claim was given up"
