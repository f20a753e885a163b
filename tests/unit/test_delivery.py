"""The delivery queue keeps what it accepted -- across stops, crashes and store outages.

Real parts throughout: SQLite journal files locked by another connection, spool
files on disk, and a writer process killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from journal_bridge.delivery.health import http_status, prometheus_text
from journal_bridge.delivery.queue import DeliveryQueue
from journal_bridge.delivery.spool import Spool, encode, spool_path
from journal_bridge.model.envelope import make_event
from journal_bridge.store import StoreUnavailable, open_store
from tests.harness.langgraph_server import HARNESS

WORKER = HARNESS / "tee_worker.py"


def _record(n: int, thread: str = "t1", event_type: str = "llm.human.input"):
    return make_event(
        thread_id=thread,
        run_id=f"r{n // 10}",
        event_type=event_type,
        category="message",
        content={"type": "human", "content": f"m{n}", "id": f"m{n}"},
        source_key=f"message:m{n}",
    )


@pytest.fixture
def journal(tmp_path):
    """A SQLite journal file with its schema, and a way to hold its write lock."""
    path = tmp_path / "journal.db"

    class Journal:
        url = f"sqlite:///{path}"
        locked_url = f"sqlite:///{path}?busy_timeout=0.05"
        blocker: sqlite3.Connection | None = None

        def lock(self):
            self.blocker = sqlite3.connect(path, timeout=0, isolation_level=None)
            self.blocker.execute("BEGIN EXCLUSIVE")

        def unlock(self):
            if self.blocker is not None:
                self.blocker.execute("ROLLBACK")
                self.blocker.close()
                self.blocker = None

    j = Journal()
    sqlite3.connect(path).close()
    yield j
    j.unlock()


async def _create_schema(url):
    async with open_store(url):
        pass


async def _contents(url, thread="t1"):
    async with open_store(url) as store:
        records = await store.list_messages(thread, limit=1000)
    return [r.content["content"] for r in records], [r.seq for r in records]


async def test_records_accepted_while_the_store_is_locked_stay_spooled_across_a_stop_and_are_delivered_once_in_order(
    journal, tmp_path
):
    await _create_schema(journal.url)
    spool = tmp_path / "spool" / "q.spool"
    journal.lock()
    async with open_store(journal.locked_url) as store:
        queue = DeliveryQueue(store, spool=spool, max_backoff=0.01)
        await queue.write([_record(n) for n in range(30)])
        await queue.stop(timeout=0.2)
    assert queue.stats.retried > 0 and queue.stats.records_written == 0
    journal.unlock()

    async with open_store(journal.url) as store:
        again = DeliveryQueue(store, spool=spool)
        await again.start()
        assert again.report()["spool_recovered"] == 30
        await again.write([_record(n) for n in range(30, 35)])
        await again.drain()
        await again.stop()
    contents, seqs = await _contents(journal.url)
    assert contents == [f"m{n}" for n in range(35)]
    assert seqs == list(range(1, 36))
    assert again.backlog == 0


async def test_a_writer_killed_during_a_store_outage_loses_nothing(journal):
    await _create_schema(journal.url)
    journal.lock()
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), journal.locked_url, "0", "40", "--hold"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout.readline().strip() == "accepted 40"
        for line in worker.stdout:
            health = json.loads(line)
            if health["retried"] > 0:  # it tried the store and found it locked
                break
        assert health["status"] == "unavailable" and "locked" in health["reason"], health
        assert health["backlog"] == 40
        worker.send_signal(signal.SIGKILL)
    finally:
        worker.kill()
        worker.wait()
        worker.stdout.close()
    journal.unlock()

    result = subprocess.run(
        [sys.executable, str(WORKER), journal.url, "40", "5", "--drain"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    health = json.loads(result.stdout.splitlines()[-1])
    assert health["spool_recovered"] == 40 and health["backlog"] == 0 and health["dropped"] == 0
    assert health["status"] == "ok", health
    contents, seqs = await _contents(journal.url)
    assert contents == [f"m{n}" for n in range(45)], "every record once, in the order accepted"
    assert seqs == list(range(1, 46))


async def test_records_the_store_already_holds_are_not_written_again_on_redelivery(journal, tmp_path):
    """A stop between the store's write and the spool's removal delivers a batch twice."""
    spool = tmp_path / "q.spool"
    queue = DeliveryQueue(None, spool=spool)
    records = [_record(n) for n in range(10)]
    await queue.write(records)
    await queue.abort()
    async with open_store(journal.url) as store:
        await store.put_batch(records[:6])  # delivered just before the crash
        again = DeliveryQueue(store, spool=spool)
        await again.start()
        await again.drain()
        await again.stop()
    contents, seqs = await _contents(journal.url)
    assert contents == [f"m{n}" for n in range(10)] and seqs == list(range(1, 11))


async def test_a_second_queue_on_a_spool_in_use_takes_its_own_slot_and_a_later_one_adopts_what_is_left(tmp_path, journal):
    spool = tmp_path / "q.spool"
    first = DeliveryQueue(None, spool=spool)
    second = DeliveryQueue(None, spool=spool)
    await first.write([_record(n) for n in range(5)])
    await second.write([_record(n, thread="t2") for n in range(3)])
    assert first.spool_path == spool and second.spool_path != spool
    await first.abort()
    await second.abort()

    async with open_store(journal.url) as store:
        third = DeliveryQueue(store, spool=spool)
        await third.start()
        assert third.spool_path == spool and third.report()["spool_recovered"] == 8
        await third.drain()
        await third.stop()
    assert (await _contents(journal.url))[0] == [f"m{n}" for n in range(5)]
    assert (await _contents(journal.url, "t2"))[0] == [f"m{n}" for n in range(3)]


async def test_an_invalid_record_is_dropped_when_accepted_and_the_rest_are_delivered(journal):
    async with open_store(journal.url) as store:
        queue = DeliveryQueue(store)
        bad = make_event(thread_id="t1", run_id="r0", event_type="x" * 40, category="message", content="too long a type")
        await queue.write([_record(0), bad, _record(1)])
        await queue.drain()
        await queue.stop()
    assert queue.stats.dropped == 1 and "event_type" in queue.stats.last_error
    assert (await _contents(journal.url))[0] == ["m0", "m1"]
    assert queue.health()["status"] == "degraded"


def test_spool_files_are_per_store_and_kept_next_to_a_sqlite_journal(tmp_path):
    a = spool_path(f"sqlite:///{tmp_path / 'a.db'}", "tee")
    b = spool_path(f"sqlite:///{tmp_path / 'b.db'}", "tee")
    assert a.parent == b.parent == tmp_path / ".journal-bridge-spool" and a != b
    assert spool_path("memory://", "tee") is None
    pg = spool_path("postgresql://user:secret@db/journal", "server")
    assert pg == spool_path("postgresql://user:changed@db/journal", "server"), "credentials do not name the spool"
    assert "secret" not in str(pg) and pg.parent == Path.cwd() / ".journal-bridge-spool"
    assert spool_path(f"sqlite:///{tmp_path / 'a.db'}", "tee", tmp_path / "elsewhere").parent == tmp_path / "elsewhere"


async def test_health_says_unavailable_while_writes_fail_and_ok_once_the_backlog_is_written(journal):
    await _create_schema(journal.url)
    journal.lock()
    async with open_store(journal.locked_url) as store:
        queue = DeliveryQueue(store, max_backoff=0.01)
        await queue.write([_record(n) for n in range(5)])
        while queue.stats.retried == 0:
            await asyncio.sleep(0.01)
        during = queue.health()
        journal.unlock()
        await queue.drain()
        after = queue.health()
        await queue.stop()
    assert during["status"] == "unavailable" and "locked" in during["reason"]
    assert http_status(during) == 503
    assert after["status"] == "ok" and after["reason"] is None and http_status(after) == 200


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class _GatedStore:
    """A real store whose writes each wait to be let through: a store slower than the runs."""

    def __init__(self, store) -> None:
        self._store = store
        self.waiting = asyncio.Queue()

    async def put_batch(self, records):
        gate = asyncio.Event()
        await self.waiting.put(gate)
        await gate.wait()
        return await self._store.put_batch(records)


async def test_health_says_degraded_with_503_when_the_backlog_grows_over_a_whole_window(journal):
    clock = _Clock()
    async with open_store(journal.url) as real:
        store = _GatedStore(real)
        queue = DeliveryQueue(store, growing_after=30, clock=clock, write_through_timeout=None)
        await queue.write([_record(0)])
        (await store.waiting.get()).set()
        await queue.drain()
        clock.now += 20
        await queue.write([_record(1)])
        (await store.waiting.get()).set()
        await queue.drain()
        assert queue.health()["status"] == "ok"
        await queue.write([_record(n) for n in range(2, 5)])
        clock.now += 11  # the window [0 s, 31 s] began with 0 records waiting and ends with 3
        growing = queue.health()
        (await store.waiting.get()).set()
        await queue.drain()
        clock.now += 31  # the next window ends with none
        recovered = queue.health()
        await queue.stop()
    assert growing["status"] == "degraded" and growing["backlog_growing"], growing
    assert "growing" in growing["reason"] and http_status(growing) == 503
    assert recovered["status"] == "ok" and http_status(recovered) == 200


async def test_health_says_unavailable_when_no_write_completes_while_records_wait(journal):
    clock = _Clock()
    async with open_store(journal.url) as real:
        store = _GatedStore(real)  # a write that hangs, as over a broken network
        queue = DeliveryQueue(store, growing_after=30, clock=clock, write_through_timeout=None)
        await queue.write([_record(0)])
        await store.waiting.get()
        clock.now += 31
        health = queue.health()
        await queue.abort()
    assert health["status"] == "unavailable" and "no record written for 31 s" in health["reason"]


def test_metrics_are_prometheus_text_with_help_and_type_for_each_counter():
    text = prometheus_text(
        {"status": "degraded", "records_written": 12, "dropped": 1, "backlog": 3, "lag_seconds": 1.5, "store_open": True}
    )
    lines = text.splitlines()
    assert "# TYPE journal_bridge_records_written_total counter" in lines
    assert "journal_bridge_records_written_total 12" in lines
    assert "journal_bridge_records_dropped_total 1" in lines
    assert "# TYPE journal_bridge_backlog_records gauge" in lines
    assert "journal_bridge_lag_seconds 1.5" in lines
    assert "journal_bridge_store_open 1" in lines
    assert 'journal_bridge_health_status{status="degraded"} 1' in lines
    assert 'journal_bridge_health_status{status="ok"} 0' in lines
    for line in lines:
        if not line.startswith("#"):
            name = line.split("{")[0].split(" ")[0]
            assert f"# TYPE {name} " in text, line
    assert text.endswith("\n")


async def test_records_beyond_what_the_queue_keeps_in_memory_are_read_back_from_the_spool_in_order(
    journal, tmp_path, monkeypatch
):
    monkeypatch.setattr("journal_bridge.delivery.spool._MIRROR_SIZE", 3)
    async with open_store(journal.url) as store:
        queue = DeliveryQueue(None, spool=tmp_path / "q.spool", batch_size=2)
        for n in range(10):
            await queue.put(_record(n))
        queue.store = store
        await queue.write([_record(n) for n in range(10, 14)])
        await queue.drain()
        await queue.write([_record(14)])
        await queue.drain()
        await queue.stop()
    contents, seqs = await _contents(journal.url)
    assert contents == [f"m{n}" for n in range(15)] and seqs == list(range(1, 16))


def _spooled_rows(path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT COUNT(*) FROM spool").fetchone()[0]
    finally:
        conn.close()


async def test_a_store_that_keeps_up_takes_records_straight_away_without_the_spool(journal, tmp_path):
    spool = tmp_path / "q.spool"
    async with open_store(journal.url) as store:
        queue = DeliveryQueue(store, spool=spool)
        for start in range(0, 30, 10):
            await queue.write([_record(n) for n in range(start, start + 10)])
            # Returned means durable: already in the store, nothing waits.
            contents, _ = await _contents(journal.url)
            assert contents == [f"m{n}" for n in range(start + 10)]
            assert queue.backlog == 0
        report = queue.report()
        await queue.stop()
    assert report["records_enqueued"] == report["records_written"] == 30
    assert _spooled_rows(queue.spool_path) == 0


async def test_a_store_slower_than_the_deadline_gets_the_records_spooled_too_and_keeps_one_of_each(journal, tmp_path):
    spool = tmp_path / "q.spool"
    async with open_store(journal.url) as real:
        store = _GatedStore(real)
        queue = DeliveryQueue(store, spool=spool, write_through_timeout=0.05)
        await queue.write([_record(n) for n in range(5)])  # the store has not answered: spooled
        first = await store.waiting.get()
        assert queue.backlog == 5
        # Written meanwhile: behind the pending write, spooled, in their order.
        await queue.write([_record(n) for n in range(5, 8)])
        assert queue.backlog == 8
        first.set()
        (await store.waiting.get()).set()  # the writer delivers the spooled copies
        await queue.drain()
        await queue.stop()
    contents, seqs = await _contents(journal.url)
    assert contents == [f"m{n}" for n in range(8)], "each record once, in the order accepted"
    assert seqs == list(range(1, 9))
    assert queue.backlog == 0 and _spooled_rows(queue.spool_path) == 0


async def test_a_write_through_the_store_refuses_is_spooled_and_delivered_once_the_store_is_back(journal, tmp_path):
    await _create_schema(journal.url)
    journal.lock()
    async with open_store(journal.locked_url) as store:
        queue = DeliveryQueue(store, spool=tmp_path / "q.spool", max_backoff=0.01)
        await queue.write([_record(n) for n in range(4)])
        assert queue.backlog == 4 and queue.stats.retried >= 1
        assert "locked" in queue.stats.last_error
        await queue.write([_record(n) for n in range(4, 6)])  # the store is failing: straight to the spool
        assert queue.backlog == 6
        journal.unlock()
        await queue.drain()
        await queue.stop()
    contents, seqs = await _contents(journal.url)
    assert contents == [f"m{n}" for n in range(6)] and seqs == list(range(1, 7))


async def test_write_throughs_that_wait_behind_another_go_into_the_store_in_one_append_in_order(journal, tmp_path):
    async with open_store(journal.url) as real:
        store = _GatedStore(real)
        queue = DeliveryQueue(store, spool=tmp_path / "q.spool", write_through_timeout=30)
        first = asyncio.ensure_future(queue.write([_record(n) for n in range(3)]))
        first_gate = await store.waiting.get()
        # Two runs write while the first append is under way: they wait together.
        second = asyncio.ensure_future(queue.write([_record(n) for n in range(3, 5)]))
        third = asyncio.ensure_future(queue.write([_record(5)]))
        await asyncio.sleep(0.05)
        assert not second.done() and not third.done()
        first_gate.set()
        await first
        (await store.waiting.get()).set()
        await asyncio.wait_for(asyncio.gather(second, third), timeout=10)
        assert store.waiting.empty()  # two appends for three writes
        report = queue.report()
        await queue.stop()
    contents, seqs = await _contents(journal.url)
    assert contents == [f"m{n}" for n in range(6)] and seqs == list(range(1, 7))
    assert report["records_enqueued"] == report["records_written"] == 6
    assert _spooled_rows(queue.spool_path) == 0


class _RefusingOnce(_GatedStore):
    """A store whose first two appends wait for the test and whose second fails
    as an unreachable store's would; later appends go straight through."""

    def __init__(self, store) -> None:
        super().__init__(store)
        self.appends = 0

    async def put_batch(self, records):
        self.appends += 1
        if self.appends != 2:
            return await (super() if self.appends == 1 else self._store).put_batch(records)
        gate = asyncio.Event()
        await self.waiting.put(gate)
        await gate.wait()
        raise StoreUnavailable("the store went away")


async def test_write_throughs_appended_together_that_the_store_refuses_are_spooled_and_delivered_once_in_order(
    journal, tmp_path
):
    async with open_store(journal.url) as real:
        store = _RefusingOnce(real)
        queue = DeliveryQueue(store, spool=tmp_path / "q.spool", write_through_timeout=30, max_backoff=0.01)
        first = asyncio.ensure_future(queue.write([_record(n) for n in range(2)]))
        first_gate = await store.waiting.get()
        second = asyncio.ensure_future(queue.write([_record(n) for n in range(2, 4)]))
        third = asyncio.ensure_future(queue.write([_record(n) for n in range(4, 7)]))
        await asyncio.sleep(0.05)
        first_gate.set()
        await first
        (await store.waiting.get()).set()  # the joint append fails
        await asyncio.gather(second, third)  # accepted all the same: spooled
        assert queue.stats.retried >= 1
        await asyncio.wait_for(queue.drain(), timeout=10)  # the writer delivers them
        await queue.stop()
    contents, seqs = await _contents(journal.url)
    assert contents == [f"m{n}" for n in range(7)] and seqs == list(range(1, 8))
    assert _spooled_rows(queue.spool_path) == 0


async def test_forgetting_a_thread_deletes_what_is_stored_and_what_waits_and_nothing_else(journal, tmp_path):
    await _create_schema(journal.url)
    async with open_store(journal.url) as store:
        queue = DeliveryQueue(store, spool=tmp_path / "q.spool")
        await queue.write(_both_threads(5))
        await queue.drain()
        assert await queue.forget_thread("t1") == 5
        await queue.stop()
        assert not await store.has_thread("t1")
    assert (await _contents(journal.url, "t2"))[0] == [f"m{n}" for n in range(5)]


def _both_threads(count: int) -> list:
    return [_record(n, thread) for n in range(count) for thread in ("t1", "t2")]


async def _forget_t1_while_locked(journal, spool, queue_stop, count: int) -> None:
    """Records of t1 and t2 accepted while the store is locked, then t1 forgotten:
    the deletion does not wait for the writer, which is retrying a batch of both."""
    journal.lock()
    async with open_store(journal.locked_url) as store:
        queue = DeliveryQueue(store, spool=spool, max_backoff=0.01)
        await queue.write(_both_threads(count))
        assert await queue.forget_thread("t1", timeout=0.2) is None
        assert queue.backlog == count
        await queue_stop(queue)


async def test_a_thread_forgotten_while_the_store_is_down_never_reaches_it(journal, tmp_path):
    await _create_schema(journal.url)

    async def unlock_and_drain(queue) -> None:
        journal.unlock()
        await queue.drain()
        await queue.stop()

    await _forget_t1_while_locked(journal, tmp_path / "spool" / "q.spool", unlock_and_drain, 20)
    async with open_store(journal.url) as store:
        assert not await store.has_thread("t1")
    assert (await _contents(journal.url, "t2"))[0] == [f"m{n}" for n in range(20)]


async def test_a_forgotten_thread_stays_out_of_the_spool_across_a_restart(journal, tmp_path):
    await _create_schema(journal.url)
    spool = tmp_path / "spool" / "q.spool"

    async def stop(queue) -> None:
        await queue.stop(timeout=0.2)

    await _forget_t1_while_locked(journal, spool, stop, 10)
    journal.unlock()
    async with open_store(journal.url) as store:
        again = DeliveryQueue(store, spool=spool)
        await again.start()
        assert again.report()["spool_recovered"] == 10
        await again.drain()
        await again.stop()
        assert not await store.has_thread("t1")
    assert (await _contents(journal.url, "t2"))[0] == [f"m{n}" for n in range(10)]


async def test_the_spool_caches_a_bounded_number_of_pages_as_it_grows(tmp_path, sqlite_heap):
    # Appended at the end, delivered from the front: at SQLite's default the
    # connection would keep about 2 MiB of the pages it wrote.
    spool = Spool(tmp_path / "queue.spool")
    await spool.open()
    try:
        records = [
            make_event(thread_id="t", run_id=f"run-{n}", event_type="llm.ai.response", content="x" * 2000)
            for n in range(3000)
        ]
        before = sqlite_heap()
        for start in range(0, len(records), 100):
            batch = records[start : start + 100]
            await spool.append(batch, [encode(r) for r in batch])
        head = await spool.head(3000)
        grown = sqlite_heap() - before
    finally:
        await spool.close()
    assert [r.run_id for _, r in head] == [r.run_id for r in records]
    assert (tmp_path / "queue.spool").stat().st_size > 4 * 2**20
    assert grown < 0.5 * 2**20, f"SQLite holds {grown / 2**20:.2f} MiB more for the spooled records"
