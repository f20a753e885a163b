"""A run's records handed to the store in batches while the run is still being read.

Reading goes on while a batch is written, and the records mapped meanwhile make
the next batch, so a run costs the store a few transactions instead of one per
frame.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from journal_bridge.model.envelope import RunEvent

__all__ = ["Batches", "Emit"]

Emit = Callable[[list[RunEvent]], Awaitable[None]]
# Records held back while more frames wait, at most.
_MAX_PENDING = 500
# A run's batch starts no sooner than this after its reader began writing or
# after its last batch began: a run whose frames come quickly (a model that
# answers at once) is written in one or two transactions. The end of the
# reading does not wait for it.
_GATHER_SECONDS = 0.05
# A run's first records (its `run.start`) wait for its first frame, this long at
# most: a run is written with its first frames, in one transaction, when the
# server starts it within this (a created run waits about a second for the
# runtime's queue); a run still queued behind another shows as running once
# this has passed.
_START_HOLD_SECONDS = 2.0
# Once the run's stream has ended, what is left to read (its outcome) comes
# within this: the records kept meanwhile wait for the run's last ones and go
# in one transaction with them, not in one of their own just before.
_END_HOLD_SECONDS = 0.5


class Batches:
    """Hands a run's records to `emit` in order, one batch at a time.

    `add` keeps records; `send` has them written by a writer that gathers
    first: a batch goes `_GATHER_SECONDS` after the writer started, or after
    the previous batch began, so a run whose frames come quickly is written in
    one or two transactions (the records kept meanwhile make the batch).
    `send` waits only when `_MAX_PENDING` records are kept, and then does not
    wait for the gathering time. After `hold_start`, the first batch waits for
    `started` (then gathers from there), `_START_HOLD_SECONDS` at most.
    `finish` ends the gathering and waits until everything is written. A
    failed write is raised by the next call; a reader that is cancelled
    cancels the write under way. After `ending` (the stream is over, the
    run's last records are being made), the writer keeps what it holds for
    `finish`, `_END_HOLD_SECONDS` at most.
    """

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._pending: list[RunEvent] = []
        self._writing: asyncio.Future[None] | None = None
        # Set: the writer takes what is kept without gathering more.
        self._hurry = False
        self._gate: asyncio.Future[None] | None = None
        self._finishing = False
        self._end_hold: float | None = None  # the loop's time until which `ending` holds batches
        self._start_hold: float | None = None  # the loop's time until which the first batch waits

    def add(self, records: list[RunEvent]) -> None:
        self._pending.extend(records)

    @property
    def full(self) -> bool:
        return len(self._pending) >= _MAX_PENDING

    async def send(self) -> None:
        if self._writing is not None:
            if not self._writing.done():
                if not self.full:
                    return  # the writer takes them next
                self._hurry_up()  # full: the writer stops gathering
            await self._written()
            if not self._finishing:
                self._hurry = False
        if self._pending:
            self._writing = asyncio.ensure_future(self._write())

    def hold_start(self) -> None:
        """What is kept now waits for `started`, a short while at most."""
        self._start_hold = asyncio.get_running_loop().time() + _START_HOLD_SECONDS

    def started(self) -> None:
        """A frame of the run came: a held first batch gathers from the first one on
        (later frames never put it off)."""
        if self._start_hold is not None:
            gathered = asyncio.get_running_loop().time() + _GATHER_SECONDS
            if gathered < self._start_hold:
                self._start_hold = gathered
                self._wake()

    def ending(self) -> None:
        """The stream is over: the next batch waits for `finish`, a short while at most."""
        self._end_hold = asyncio.get_running_loop().time() + _END_HOLD_SECONDS
        self._wake()  # a writer gathering now waits the longer

    async def finish(self) -> None:
        self._finishing = True
        self._hurry_up()
        await self.send()
        await self._written()

    async def cancel(self) -> None:
        writing, self._writing = self._writing, None
        if writing is None:
            return
        writing.cancel()
        with contextlib.suppress(BaseException):
            await writing

    def _hurry_up(self) -> None:
        self._hurry = True
        self._wake()

    def _wake(self) -> None:
        if self._gate is not None and not self._gate.done():
            self._gate.set_result(None)

    async def _gather(self, began: float) -> None:
        """Wait until `_GATHER_SECONDS` after the loop's time `began` (later while
        `ending` holds), or until hurried."""
        loop = asyncio.get_running_loop()
        while not self._hurry:
            until = max(began + _GATHER_SECONDS, self._end_hold or 0.0, self._start_hold or 0.0)
            if until <= loop.time():
                return
            gate = self._gate = loop.create_future()
            timer = loop.call_at(until, lambda: gate.done() or gate.set_result(None))  # type: ignore[func-returns-value]
            try:
                await gate
            finally:
                timer.cancel()
                self._gate = None

    async def _write(self) -> None:
        loop = asyncio.get_running_loop()
        began = loop.time()
        while True:
            await self._gather(began)
            self._start_hold = None
            batch, self._pending = self._pending, []
            if not batch:
                return
            began = loop.time()
            await self._emit(batch)

    async def _written(self) -> None:
        writing, self._writing = self._writing, None
        if writing is not None:
            await writing
