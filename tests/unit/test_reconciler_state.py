"""The reconciler's state across restarts: settled runs are appended, not rewritten."""

from __future__ import annotations

import json
from collections import OrderedDict

from journal_bridge.capture.reconcile import Reconciler
from journal_bridge.capture.settled_log import SettledLog


def _reconciler(state_path) -> Reconciler:
    # Saving and loading touch neither the bridge, the server nor the store.
    return Reconciler(None, lambda: None, lambda: None, state_path=state_path)  # type: ignore[arg-type]


def _read(log: SettledLog) -> OrderedDict[str, str]:
    into: OrderedDict[str, str] = OrderedDict()
    log.read(into)
    return into


def test_the_log_reads_back_what_was_appended_in_order_with_removals(tmp_path):
    log = SettledLog(tmp_path / "state.json.settled")
    log.write([("r1", "journaled"), ("r2", "journaled")])
    log.write([("r1", None), ("r3", "elsewhere"), ("r1", "journaled")])
    assert list(_read(SettledLog(log.path)).items()) == [("r2", "journaled"), ("r3", "elsewhere"), ("r1", "journaled")]


def test_a_line_cut_short_is_skipped_and_the_next_append_starts_a_line_of_its_own(tmp_path):
    path = tmp_path / "state.json.settled"
    path.write_text('["r1", "journaled"]\n["r2", "jour')
    log = SettledLog(path)
    assert list(_read(log)) == ["r1"]
    log.write([("r3", "journaled")])
    assert list(_read(SettledLog(path))) == ["r1", "r3"]


def test_the_log_is_rewritten_with_the_newest_runs_once_it_holds_twice_what_it_keeps(tmp_path):
    log = SettledLog(tmp_path / "state.json.settled", keep=3)
    log.write([(f"r{n}", "journaled") for n in range(6)])
    assert not log.compaction_due(0) and log.compaction_due(1)
    settled = _read(SettledLog(log.path))
    settled["r6"] = "journaled"
    log.write([("r6", "journaled")], kept=list(settled.items()))
    assert log.path.read_text().count("\n") == 3
    assert list(_read(SettledLog(log.path))) == ["r4", "r5", "r6"]


async def test_settled_runs_survive_a_restart_and_a_save_appends_only_the_new_ones(tmp_path):
    state = tmp_path / "server.json"
    first = _reconciler(state)
    for n in range(50):
        first._settle(f"r{n}", "journaled")
    await first._save()
    log = state.with_name("server.json.settled")
    size = log.stat().st_size
    first._settle("r50", "journaled")
    await first._save()
    assert log.read_text().count("\n") == 51
    assert log.stat().st_size - size == len('["r50", "journaled"]\n')
    assert "settled" not in json.loads(state.read_text())

    second = _reconciler(state)
    second._load()
    assert list(second._settled) == [f"r{n}" for n in range(51)]


async def test_a_state_holding_its_settled_runs_inline_moves_them_to_the_log(tmp_path):
    # As written before settled runs had a log of their own.
    state = tmp_path / "server.json"
    state.write_text(json.dumps({"version": 1, "since": None, "waiting": {}, "repair": [],
                                 "settled": {"old1": "journaled", "old2": "elsewhere"}}))
    first = _reconciler(state)
    first._load()
    first._settle("new", "journaled")
    await first._save()
    second = _reconciler(state)
    second._load()
    assert list(second._settled.items()) == [("old1", "journaled"), ("old2", "elsewhere"), ("new", "journaled")]


async def test_a_save_cancelled_mid_write_is_finished_before_the_next_one_writes(tmp_path, monkeypatch):
    import asyncio
    import threading

    state = tmp_path / "server.json"
    reconciler = _reconciler(state)
    release = threading.Event()
    write = Reconciler._write

    def slow_write(*args):
        release.wait(5)
        write(*args)

    monkeypatch.setattr(Reconciler, "_write", staticmethod(slow_write))
    reconciler._settle("r1", "journaled")
    first = asyncio.create_task(reconciler._save())
    await asyncio.sleep(0.05)
    first.cancel()
    reconciler._settle("r2", "journaled")
    second = asyncio.create_task(reconciler._save())
    await asyncio.sleep(0.05)
    assert not second.done()  # waits for the cancelled save's write
    release.set()
    await second
    assert state.with_name("server.json.settled").read_text().splitlines() == ['["r1", "journaled"]', '["r2", "journaled"]']


async def test_the_runs_held_in_memory_are_those_a_restart_reads_back(tmp_path, monkeypatch):
    from journal_bridge.capture import reconcile

    monkeypatch.setattr(reconcile, "_MAX_REMEMBERED", 5)
    state = tmp_path / "server.json"
    first = _reconciler(state)
    for n in range(12):  # past twice the bound: the log is rewritten on the way
        first._settle(f"r{n}", "journaled")
        first._trim()  # as every pass ends
        await first._save()
    assert list(first._settled) == [f"r{n}" for n in range(7, 12)]
    second = _reconciler(state)
    second._load()
    assert list(second._settled.items()) == list(first._settled.items())
