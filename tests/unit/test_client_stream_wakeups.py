"""The reader of a streamed run is woken once for the frames that came together, not per frame.

`ClientStream` keeps the frames the journal reads as the response path feeds
them; its reader (`ClientStream.parts`) waits `_READ_AFTER_SECONDS` after
the first frame it is woken for, so frames fed one per loop turn are read in
one go. The stream's end is never held back.
"""

from __future__ import annotations

import asyncio

from journal_bridge.host.sse import Frame
from journal_bridge.mapping import reader
from journal_bridge.mapping.capture_setting import CaptureSetting, plan_capture


def _stream() -> reader.ClientStream:
    return reader.ClientStream(plan_capture(["values"], CaptureSetting.EVENTS), ("values",))


def _frame(index: int) -> Frame:
    data = b'{"event":"on_chain_end","data":{"n":%d}}' % index
    return Frame(b"", b"\n\n", "events", data, f"{index}-0")


async def _read(stream: reader.ClientStream, got: list, wakes: list[int]) -> None:
    async for part in stream.parts():
        got.append(part.data["data"]["n"] if part is not None else None)
        wakes.append(len(got))


async def test_frames_fed_one_per_loop_turn_are_read_in_one_wake_up(monkeypatch):
    monkeypatch.setattr(reader, "_READ_AFTER_SECONDS", 3600.0)
    stream = _stream()
    got: list = []
    reading = asyncio.create_task(_read(stream, got, []))
    await asyncio.sleep(0)
    for index in range(20):
        stream.feed(_frame(index))
        await asyncio.sleep(0)  # the response path yields between frames
    # Fed, kept, and not read: the reader waits for its wake-up.
    assert got == [] and stream.ready()
    stream.close(complete=True)
    await asyncio.wait_for(reading, 5)
    assert got == list(range(20))
    assert stream.complete is True


async def test_the_reader_wakes_without_the_end_once_the_wait_is_over(monkeypatch):
    monkeypatch.setattr(reader, "_READ_AFTER_SECONDS", 0.0)
    stream = _stream()
    got: list = []
    reading = asyncio.create_task(_read(stream, got, []))
    await asyncio.sleep(0)
    stream.feed(_frame(0))
    stream.feed(_frame(1))
    for _ in range(20):
        if len(got) == 2:
            break
        await asyncio.sleep(0.01)
    # Both read while the stream is still open.
    assert got == [0, 1] and not reading.done()
    stream.feed(_frame(2))
    stream.close(complete=False)
    await asyncio.wait_for(reading, 5)
    assert got == [0, 1, 2] and stream.complete is False


async def test_a_cancelled_reader_leaves_no_wake_up_behind(monkeypatch):
    monkeypatch.setattr(reader, "_READ_AFTER_SECONDS", 3600.0)
    stream = _stream()
    reading = asyncio.create_task(_read(stream, [], []))
    await asyncio.sleep(0)
    stream.feed(_frame(0))
    assert stream._wake is not None
    reading.cancel()
    await asyncio.gather(reading, return_exceptions=True)
    assert stream._waiter is None and stream._wake is None
    # Feeding on after the reader left schedules nothing and raises nothing.
    stream.feed(_frame(1))
    stream.close(complete=True)
    assert stream._wake is None and stream.ready()
