"""What the follower asks of a server: runs listed without their input, a new run read whole."""

from __future__ import annotations

from types import SimpleNamespace


from journal_bridge.capture import follower as follower_module
from journal_bridge.capture.follower import Follower
from journal_bridge.store import open_store
from tests.harness.sdk_errors import run_not_found

UPDATED = "2026-12-01T12:00:00+00:00"


class _Server:
    """One thread, two ended resumable runs with big inputs; `gone` is deleted before it is read."""

    def __init__(self) -> None:
        self.runs_by_id = {
            run_id: {"run_id": run_id, "thread_id": "t1", "status": "success", "created_at": created,
                     "assistant_id": "a1", "metadata": {},
                     "kwargs": {"input": {"messages": ["x" * 10_000]}, "stream_mode": ["values"], "resumable": True}}
            for run_id, created in (("kept", "2026-12-01T11:00:00+00:00"), ("gone", "2026-12-01T11:30:00+00:00"))
        }
        self.selected: list[object] = []
        self.got: list[str] = []
        self.joined: list[str] = []
        self.threads = SimpleNamespace(search=self._search, get=self._thread)
        self.runs = SimpleNamespace(list=self._list, get=self._get, join_stream=self._join)

    async def _search(self, **_):
        return [{"thread_id": "t1", "updated_at": UPDATED}]

    async def _thread(self, thread_id):
        return {"thread_id": thread_id, "metadata": {}}

    async def _list(self, thread_id, limit=10, offset=0, select=None):
        self.selected.append(select)
        rows = [{k: v for k, v in run.items() if select is None or k in select} for run in self.runs_by_id.values()]
        return rows[offset : offset + limit]

    async def _get(self, thread_id, run_id):
        self.got.append(run_id)
        if run_id == "gone":
            del self.runs_by_id[run_id]
            raise run_not_found(thread_id, run_id)
        return self.runs_by_id[run_id]

    def _join(self, thread_id, run_id, **_):
        self.joined.append(run_id)

        async def frames():
            yield SimpleNamespace(event="metadata", data={"run_id": run_id}, id="1")

        return frames()


async def test_runs_are_listed_without_their_input_and_a_new_run_is_read_whole_once(tmp_path):
    server = _Server()
    async with open_store("memory://") as store:
        follower = Follower(server, store, cursor_path=tmp_path / "cursor.json")  # type: ignore[arg-type]
        await follower.run(once=True)
        await follower.run(once=True)
        await follower.stop()

    assert len(server.selected) == 2
    assert all(select is not None and "kwargs" not in select for select in server.selected)
    # Joined with the modes only the whole run shows, and found once in two polls.
    assert server.joined == ["kept"], "a run deleted since it was listed is left alone"
    assert follower.stats["runs_discovered"] == 1 and follower.stats["journaled"] == 1
    assert server.got.count("gone") == 1 and follower.stats["poll_errors"] == 0


async def test_a_long_running_follower_keeps_the_newest_finds_and_reports_and_counts_them_all(tmp_path, monkeypatch):
    monkeypatch.setattr(follower_module, "_MAX_FOUND", 3)
    monkeypatch.setattr(follower_module, "_MAX_REPORTS", 2)
    server = _Server()
    # Runs the journal cannot read (neither `events` nor `values`): each one is reported.
    server.runs_by_id = {
        f"r{i}": {"run_id": f"r{i}", "thread_id": "t1", "status": "success",
                  "created_at": f"2026-12-01T11:{i:02d}:00+00:00", "assistant_id": "a1", "metadata": {},
                  "kwargs": {"input": None, "stream_mode": ["updates"]}}
        for i in range(7)
    }
    async with open_store("memory://") as store:
        follower = Follower(server, store, cursor_path=tmp_path / "cursor.json")  # type: ignore[arg-type]
        await follower.run(once=True)
        await follower.stop()

    summary = follower.summary()
    assert summary["runs_discovered"] == 7 and summary["unobservable"] == 7
    assert list(follower.discovered_at) == ["r4", "r5", "r6"] == list(follower.discovered_by_poll)
    assert [r["run_id"] for r in summary["reported"]] == ["r5", "r6"]
