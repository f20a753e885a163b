"""The frames of one streamed run as its client receives them, kept for the run's reader.

The frames of the modes the capture reads are kept as they pass, never waited
on; an `events` frame of a callback the mapper ignores is recognised from its
bytes and kept as nothing but its id.
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from journal_bridge.host.modes import ERROR_MODE, EVENTS_MODE
from journal_bridge.host.sse import Frame
from journal_bridge.mapping.capture_setting import Capture

__all__ = ["ClientStream", "Part", "unmapped_callback_bytes"]

_INTERRUPT_MODES = frozenset({"values", "updates"})
_INTERRUPT_KEY = b'"__interrupt__"'
_ALWAYS_READ = frozenset({ERROR_MODE, "metadata"})
# A streamed run's reader is woken this long after the first frame it keeps
# came, not at every frame: the frames that came meanwhile are read in one
# go, a few wake-ups per run instead of one per frame. Short beside the
# gathering of its records (`_GATHER_SECONDS`); the stream's end wakes it at once.
_READ_AFTER_SECONDS = 0.01


@dataclass(frozen=True)
class Part:
    event: str
    data: Any
    id: str | None = None


# Callback events the `events` mapper ignores; the server writes the event's name
# first, so a frame is recognised before it is parsed. Tokens are most of the bytes.
_UNMAPPED_CALLBACKS = re.compile(rb'\{"event":"on_(chat_model_stream|chain_stream|chat_model_start|llm_stream|llm_start)"')


def _unmapped_callback(frame: Frame) -> bool:
    return frame.mode == EVENTS_MODE and frame.data is not None and _UNMAPPED_CALLBACKS.match(frame.data) is not None


# The lines before such a frame's data, as the server writes them: its `event`
# line (the root's `events`, or a subgraph's `events|<namespace>`), then `data`.
_EVENTS_DATA = re.compile(rb"event: ?events(?:\|[^\r\n]*)?(?:\r\n|\r|\n)data: ?")
# What may follow the data line: the frame's `id` line, the last (a resumable run's).
_ID_LINE = re.compile(rb"(?:\r\n|\r|\n)id: ?([^\r\n]*)")


def unmapped_callback_bytes(body: bytes, start: int, end: int) -> tuple[bool, str | None]:
    """Whether the unparsed frame `body[start:end]` is an `events` frame of an
    unmapped callback, laid out as the server writes one: its `event` line, one
    `data` line, then an `id` line or nothing; and that id. Such a frame
    `ClientStream.feed` keeps nothing of but its id and that a frame came.

    JSON data holds no raw line break: the data line ends at the first CR or LF
    after its start. Any other layout (data over several lines, a field after
    the id) answers False, and the frame is parsed."""
    lines = _EVENTS_DATA.match(body, start, end)
    if lines is None or _UNMAPPED_CALLBACKS.match(body, lines.end(), end) is None:
        return False, None
    data_end = body.find(b"\n", lines.end(), end)
    carriage = body.find(b"\r", lines.end(), data_end if data_end >= 0 else end)
    if carriage >= 0:
        data_end = carriage
    if data_end < 0:
        return True, None
    frame_id = _ID_LINE.fullmatch(body, data_end, end)
    if frame_id is None:
        return False, None
    return True, frame_id.group(1).decode("utf-8", "replace").strip()


class ClientStream:
    """The frames of one streamed run, as its client receives them.

    `feed` never waits and never raises into the response path; frames of
    modes the capture does not read are not kept.
    """

    def __init__(self, capture: Capture, client_modes: tuple[str, ...] = ()) -> None:
        self._wanted = frozenset(capture.modes) | _ALWAYS_READ
        self._frames: deque[Frame] = deque()
        self._closed = False
        # The reader waiting for frames, and the wake-up it is due (`_READ_AFTER_SECONDS`).
        self._waiter: asyncio.Future[None] | None = None
        self._wake: asyncio.TimerHandle | None = None
        self.complete: bool | None = None
        self.last_id: str | None = None
        # Whether a frame of the run came after its opening `metadata` one.
        self.fed = False
        # A run that pauses at `interrupt()` says so in its `values` and `updates`
        # frames; when its client streams either, this notes whether one did.
        self.watches_interrupts = bool(_INTERRUPT_MODES.intersection(client_modes))
        self.saw_interrupt = False

    def wants(self, mode: str | None) -> bool:
        """Whether frames of `mode` are read (a caller holding parsed parts skips the others)."""
        return mode in self._wanted

    def feed(self, frame: Frame) -> None:
        if frame.event is not None and frame.mode != "metadata":
            self.fed = True
        if frame.id is not None:
            self.last_id = frame.id
        if self.watches_interrupts and frame.mode in _INTERRUPT_MODES and frame.data and _INTERRUPT_KEY in frame.data:
            self.saw_interrupt = True
        if frame.event is not None and self.wants(frame.mode) and not _unmapped_callback(frame):
            self._frames.append(frame)
            if self._waiter is not None and self._wake is None:
                self._wake = self._waiter.get_loop().call_later(_READ_AFTER_SECONDS, self._woken)

    def passes_over(self, body: bytes, start: int, end: int) -> bool:
        """Whether the unparsed frame `body[start:end]` is one `feed` would keep
        nothing of but its id (`unmapped_callback_bytes`): noted as `feed` would
        note it, and not to be parsed. A frame this answers False for goes to `feed`."""
        return self.pass_over(body, start, end)[0]

    def pass_over(self, body: bytes, start: int, end: int) -> tuple[bool, str | None]:
        """`passes_over`, and the id of a frame passed over (None when it has none)."""
        passed, frame_id = unmapped_callback_bytes(body, start, end)
        if not passed:
            return False, None
        self.fed = True
        if frame_id is not None:
            self.last_id = frame_id
        return True, frame_id

    def discard(self) -> None:
        """Nobody here reads the run (another process does): keep no frame from now on."""
        self._wanted = frozenset()
        self._frames.clear()

    def ready(self) -> bool:
        """Whether another frame (or the end) is waiting to be read."""
        return bool(self._frames) or self._closed

    def close(self, *, complete: bool) -> None:
        if self.complete is None:
            self.complete = complete
            self._closed = True
            self._woken()  # the end is not held back

    def _woken(self) -> None:
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _more(self) -> None:
        """Wait until frames have come and `_READ_AFTER_SECONDS` passed since the
        first of them, or the stream closed."""
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            self._woken()  # a reader cancelled meanwhile leaves no wake-up behind

    async def parts(self, needs: Callable[[bytes], bool] | None = None) -> AsyncIterator[Part | None]:
        """The frames kept, parsed, in order.

        An `events` frame whose bytes `needs` turns down (asked as it comes to be
        read) is passed over unparsed; when no other frame is waiting then, None
        comes instead: the reader is not to wait on the next frame for what it keeps.
        """
        frames = self._frames
        while True:
            if not frames:
                if self._closed:
                    return
                await self._more()
                continue
            frame = frames.popleft()
            if needs is not None and frame.mode == EVENTS_MODE and frame.data and not needs(frame.data):
                if not self.ready():
                    yield None
                continue
            try:
                data = orjson.loads(frame.data) if frame.data else None
            except orjson.JSONDecodeError:
                data = frame.data.decode("utf-8", "replace") if frame.data else None
            yield Part(frame.event or "", data, frame.id)
