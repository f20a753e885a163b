"""A run's records reach the delivery queue in order, a batch at a time, while reading goes on."""

from __future__ import annotations

import asyncio

import pytest

from journal_bridge.mapping import batches as batching
from journal_bridge.mapping.batches import Batches


class Writes:
    """An `emit` whose writes finish only when the test lets them."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.batches: list[list[str]] = []
        self.started = 0
        self.gates: list[asyncio.Event] = []
        self.cancelled = 0
        self.fail_on = fail_on

    async def __call__(self, records: list[str]) -> None:
        gate = asyncio.Event()
        self.gates.append(gate)
        self.started += 1
        try:
            await gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if self.fail_on == len(self.batches):
            raise RuntimeError("store said no")
        self.batches.append(list(records))

    def release(self) -> None:
        for gate in self.gates:
            gate.set()


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def _until(condition) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not reached within 5 s")


async def _first_write_under_way(writes: Writes, records: list[str]) -> Batches:
    """A run's batches with `records` sent and their write waiting on the test."""
    batches = Batches(writes)
    batches.add(records)
    await batches.send()
    await _until(lambda: writes.started == 1)
    return batches


async def test_records_mapped_during_a_write_go_together_in_the_next_batch():
    writes = Writes()
    batches = await _first_write_under_way(writes, ["start", "human"])
    assert writes.started == 1  # the first batch is on its way; reading goes on
    for record in ("ai", "tool", "ai-2"):
        batches.add([record])
        await batches.send()
    assert writes.started == 1
    finishing = asyncio.ensure_future(batches.finish())
    await _settle()
    writes.release()
    await _settle()
    writes.release()
    await finishing
    assert writes.batches == [["start", "human"], ["ai", "tool", "ai-2"]]


async def test_a_reader_waits_only_when_too_many_records_are_kept(monkeypatch):
    monkeypatch.setattr(batching, "_MAX_PENDING", 2)
    writes = Writes()
    batches = await _first_write_under_way(writes, ["a"])
    batches.add(["b"])
    await batches.send()  # one kept: returns at once
    batches.add(["c"])
    sending = asyncio.ensure_future(batches.send())
    await _settle()
    assert not sending.done()  # two kept: waits until they are written
    writes.release()
    await _settle()
    assert not sending.done()
    writes.release()
    await sending
    assert writes.batches == [["a"], ["b", "c"]]
    await batches.finish()
    assert writes.started == 2


async def test_records_kept_during_a_write_are_written_after_the_gathering_time_without_another_frame(monkeypatch):
    monkeypatch.setattr(batching, "_GATHER_SECONDS", 0.2)
    writes = Writes()
    batches = await _first_write_under_way(writes, ["start"])
    batches.add(["human"])
    await batches.send()  # kept: the write under way takes it next
    writes.release()
    await _settle()
    assert writes.started == 1  # still gathering
    # No further frame comes, and the reader is still waiting for one.
    await _until(lambda: writes.started == 2)
    writes.release()
    await _until(lambda: len(writes.batches) == 2)
    assert writes.batches == [["start"], ["human"]]


async def test_the_first_batch_waits_the_gathering_time_and_the_end_of_the_stream_does_not(monkeypatch):
    monkeypatch.setattr(batching, "_GATHER_SECONDS", 0.2)
    writes = Writes()
    batches = Batches(writes)
    batches.add(["start"])
    await batches.send()
    await _settle()
    assert writes.started == 0  # gathering: a frame that comes now goes with it
    # No frame comes: the start is written alone once the gathering time is over.
    await _until(lambda: writes.started == 1)
    writes.release()
    await _until(lambda: writes.batches == [["start"]])


async def test_frames_that_come_quickly_make_one_batch_and_the_end_of_the_stream_does_not_wait(monkeypatch):
    monkeypatch.setattr(batching, "_GATHER_SECONDS", 60)
    writes = Writes()
    batches = Batches(writes)
    for record in ("start", "human", "ai", "tool", "ai-2"):
        batches.add([record])
        await batches.send()
        await _settle()
    assert writes.started == 0  # all gathered
    finishing = asyncio.ensure_future(batches.finish())
    await _until(lambda: writes.started == 1)
    writes.release()
    await asyncio.wait_for(finishing, timeout=5)
    assert writes.batches == [["start", "human", "ai", "tool", "ai-2"]]


async def test_a_failed_write_is_raised_by_the_next_call():
    writes = Writes(fail_on=0)
    batches = await _first_write_under_way(writes, ["a"])
    writes.release()
    await _settle()
    batches.add(["b"])
    with pytest.raises(RuntimeError, match="store said no"):
        await batches.send()


async def test_cancel_stops_the_write_under_way():
    writes = Writes()
    batches = await _first_write_under_way(writes, ["a"])
    await batches.cancel()
    assert writes.cancelled == 1
    writes.release()
    await _settle()
    assert writes.batches == []


async def _gathering(monkeypatch, *, gather: float, hold: float) -> tuple[Writes, Batches]:
    """A run's batches with its start and first message sent, their writer gathering."""
    monkeypatch.setattr(batching, "_GATHER_SECONDS", gather)
    monkeypatch.setattr(batching, "_END_HOLD_SECONDS", hold)
    writes = Writes()
    batches = Batches(writes)
    batches.add(["start", "human"])
    await batches.send()
    return writes, batches


async def _finish_with(batches: Batches, writes: Writes, last: list[str]) -> None:
    """Add the run's last records and finish, the write it starts let through."""
    started = writes.started
    batches.add(last)
    finishing = asyncio.ensure_future(batches.finish())
    await _until(lambda: writes.started == started + 1)
    writes.release()
    await asyncio.wait_for(finishing, timeout=5)


async def test_after_the_stream_ends_what_is_kept_waits_for_the_runs_last_records(monkeypatch):
    monkeypatch.setattr(batching, "_GATHER_SECONDS", 0.05)
    monkeypatch.setattr(batching, "_END_HOLD_SECONDS", 60)
    writes = Writes()
    batches = await _first_write_under_way(writes, ["start"])
    batches.add(["human", "ai"])
    await batches.send()
    batches.ending()  # the stream is over; the outcome is being read
    writes.release()
    await _until(lambda: writes.batches == [["start"]])
    await asyncio.sleep(0.2)  # four gathering times: nothing goes before the run's end
    assert writes.started == 1
    await _finish_with(batches, writes, ["end"])
    assert writes.batches == [["start"], ["human", "ai", "end"]]


async def test_a_writer_already_gathering_when_the_stream_ends_waits_the_longer(monkeypatch):
    writes, batches = await _gathering(monkeypatch, gather=0.05, hold=60)
    await _settle()
    assert writes.started == 0  # gathering, its timer set for 50 ms
    batches.ending()
    await asyncio.sleep(0.2)
    assert writes.started == 0
    await _finish_with(batches, writes, ["end"])
    assert writes.batches == [["start", "human", "end"]]


async def test_the_hold_after_the_stream_ends_is_short(monkeypatch):
    writes, batches = await _gathering(monkeypatch, gather=0.01, hold=0.2)
    batches.ending()
    # The outcome never comes (a read that hangs): the records go anyway once the hold is over.
    await _until(lambda: writes.started == 1)
    writes.release()
    await _until(lambda: writes.batches == [["start", "human"]])


async def _held_start(monkeypatch, *, gather: float, hold: float) -> tuple[Writes, Batches]:
    """A run's batches with its start kept and held for its first frame."""
    monkeypatch.setattr(batching, "_GATHER_SECONDS", gather)
    monkeypatch.setattr(batching, "_START_HOLD_SECONDS", hold)
    writes = Writes()
    batches = Batches(writes)
    batches.add(["start"])
    batches.hold_start()
    await batches.send()
    return writes, batches


async def test_a_held_start_goes_with_the_runs_first_frames(monkeypatch):
    writes, batches = await _held_start(monkeypatch, gather=0.05, hold=60)
    await asyncio.sleep(0.2)  # four gathering times: the start still waits
    assert writes.started == 0
    batches.started()
    batches.add(["human"])
    await batches.send()
    # The first frame came: the batch gathers from then, not for the whole hold.
    await _until(lambda: writes.started == 1)
    writes.release()
    await _until(lambda: writes.batches == [["start", "human"]])


async def test_frames_after_the_first_do_not_put_off_the_held_batch(monkeypatch):
    writes, batches = await _held_start(monkeypatch, gather=0.2, hold=60)
    batches.started()
    loop = asyncio.get_running_loop()
    began = loop.time()
    # Frames keep coming, each sooner than the gathering time after the last: were
    # each to put the batch off, none would be written while they come.
    while writes.started == 0 and loop.time() - began < 5:
        batches.started()
        batches.add(["frame"])
        await batches.send()
        await asyncio.sleep(0.02)
    assert writes.started == 1


async def test_a_run_that_sends_no_frame_has_its_start_written_once_the_hold_is_over(monkeypatch):
    writes, batches = await _held_start(monkeypatch, gather=0.01, hold=0.2)
    await _settle()
    assert writes.started == 0
    # A queued run: no frame yet, and the reader is still waiting for one.
    await _until(lambda: writes.started == 1)
    writes.release()
    await _until(lambda: writes.batches == [["start"]])
    # Later frames gather as usual, the hold spent.
    batches.started()
    batches.add(["human"])
    await _finish_with(batches, writes, ["end"])
    assert writes.batches == [["start"], ["human", "end"]]


async def test_a_held_start_is_written_at_once_when_the_reading_ends(monkeypatch):
    writes, batches = await _held_start(monkeypatch, gather=60, hold=60)
    await _finish_with(batches, writes, ["end"])
    assert writes.batches == [["start", "end"]]
