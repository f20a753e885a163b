"""A created run's first join by its client, read instead of a join of the journal's own."""

from __future__ import annotations

import asyncio

from journal_bridge.host.sse import Frame
from journal_bridge.mapping.capture_setting import Capture
from journal_bridge.mapping.client_stream import ClientStream

__all__ = ["ClientJoin"]


class ClientJoin:
    """A created run's first join by its client, which the run may be read from
    instead of a join of the journal's own.

    Waits `wait` seconds for the client's join (`take`); a join taken is read
    only if the first frame it gets is the run's own `metadata` frame, so it
    holds the run from its start. Otherwise, or without a join in time,
    `stream()` answers None and the reader joins the run itself.
    """

    def __init__(self, run_id: str, capture: Capture, wait: float) -> None:
        loop = asyncio.get_running_loop()
        self.run_id = str(run_id)
        self._capture = capture
        self._decided: asyncio.Future[ClientStream | None] = loop.create_future()
        self._timer: asyncio.TimerHandle | None = loop.call_later(wait, self._decide, None)
        self._taken = False

    @property
    def open(self) -> bool:
        """Whether a client join can still be taken."""
        return not self._taken and not self._decided.done()

    def take(self, modes: tuple[str, ...]) -> _JoinFrames | None:
        """The client's join of the run, reading `modes` (each frame of them is fed):
        what to feed its frames to, or None when the wait is over or a join was taken."""
        if not self.open:
            return None
        self._taken = True
        self._stop_timer()
        return _JoinFrames(self, ClientStream(self._capture, modes))

    def cancel(self) -> None:
        """The run is read another way: no join is taken from now on, none taken is kept."""
        self._stop_timer()
        self._decide(None)
        taken = self._decided.result()
        if taken is not None:
            taken.discard()

    @property
    def read_from_client(self) -> bool:
        """Whether the run is read from its client's join."""
        return self._decided.done() and self._decided.result() is not None

    async def stream(self) -> ClientStream | None:
        """The client's join to read the run from, None to join it here."""
        return await self._decided

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _decide(self, stream: ClientStream | None) -> None:
        if not self._decided.done():
            self._decided.set_result(stream)


class _JoinFrames:
    """The frames of a client's join, checked at the first for the run's start."""

    def __init__(self, join: ClientJoin, stream: ClientStream) -> None:
        self._join = join
        self._stream = stream
        self._reading: bool | None = None  # None until the first frame decides

    def feed(self, frame: Frame) -> None:
        if frame.event is None:
            return
        if self._reading is None:
            self._reading = frame.mode == "metadata" and frame.field("run_id") == self._join.run_id
            self._join._decide(self._stream if self._reading else None)
        if self._reading:
            self._stream.feed(frame)

    def close(self, *, complete: bool) -> None:
        if self._reading is None:
            self._reading = False
            self._join._decide(None)
        elif self._reading:
            self._stream.close(complete=complete)
