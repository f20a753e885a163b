"""The reader of a streamed run is woken once for the frames that came together, not per frame.

`ClientStream` keeps the frames the journal reads as the response path feeds
them; its reader (`ClientStream.parts`) waits `_READ_AFTER_SECONDS` after
the first frame it is woken for, so frames fed one per loop turn are read in
one go. The stream's end is never held back.
"""

from __future__ import annotations

import asyncio

from journal_bridge.host.sse import Frame
from journal_bridge.mapping import client_stream
from journal_bridge.mapping.capture_setting import CaptureSetting, plan_capture


def _frame(index: int) -> Frame:
    data = b'{"event":"on_chain_end","data":{"n":%d}}' % index
    return Frame(b"", b"\n\n", "events", data, f"{index}-0")


async def _reading(monkeypatch, wait: float) -> tuple[client_stream.ClientStream, list, list, asyncio.Task]:
    """A stream whose reader waits `wait` seconds after a frame; what it read, and
    each wait of the reader's that ended (how many frames it had read by then)."""
    monkeypatch.setattr(client_stream, "_READ_AFTER_SECONDS", wait)
    stream = client_stream.ClientStream(plan_capture(["values"], CaptureSetting.EVENTS), ("values",))
    got: list = []
    woken: list[int] = []
    waited = stream._more

    async def counted() -> None:
        await waited()
        woken.append(len(got))

    stream._more = counted  # type: ignore[method-assign]

    async def read() -> None:
        async for part in stream.parts():
            got.append(part.data["data"]["n"] if part is not None else None)

    task = asyncio.create_task(read())
    await asyncio.sleep(0)  # the reader waits
    return stream, got, woken, task


async def _until(condition, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)


async def test_frames_fed_one_per_loop_turn_are_read_in_one_wake_up(monkeypatch):
    stream, got, woken, reading = await _reading(monkeypatch, 0.05)
    for index in range(20):
        stream.feed(_frame(index))
        await asyncio.sleep(0)  # the response path yields between frames
    await _until(lambda: len(got) == 20)
    # One wake-up for the twenty, with none of them read before it.
    assert got == list(range(20)) and woken == [0]
    stream.close(complete=True)
    await asyncio.wait_for(reading, 5)
    assert woken == [0, 20] and stream.complete is True


async def test_the_end_is_not_held_back(monkeypatch):
    stream, got, woken, reading = await _reading(monkeypatch, 3600.0)
    for index in range(3):
        stream.feed(_frame(index))
        await asyncio.sleep(0)
    # Fed, kept, and not read: the reader waits for its wake-up.
    assert got == [] and stream.ready()
    stream.close(complete=False)
    await asyncio.wait_for(reading, 5)
    assert got == [0, 1, 2] and woken == [0] and stream.complete is False


async def test_a_cancelled_reader_leaves_no_wake_up_behind(monkeypatch):
    stream, _, _, reading = await _reading(monkeypatch, 3600.0)
    stream.feed(_frame(0))
    assert stream._wake is not None
    reading.cancel()
    await asyncio.gather(reading, return_exceptions=True)
    assert stream._waiter is None and stream._wake is None
    # Feeding on after the reader left schedules nothing and raises nothing.
    stream.feed(_frame(1))
    stream.close(complete=True)
    assert stream._wake is None and stream.ready()
