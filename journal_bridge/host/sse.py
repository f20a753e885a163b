"""Server-sent event frames as they pass through the plugin, without buffering the body.

`SSEFrames` cuts a streamed body into frames (frames may arrive split across
chunks, or several in one chunk) and hands each to a callback that returns
the bytes to send on: the frame unchanged, the frame without its `id:` lines,
or nothing. A frame the callback fails on is passed on unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NamedTuple

import orjson

__all__ = ["Frame", "SSEFrames"]

logger = logging.getLogger(__name__)

_CRLF_END = b"\r\n\r\n"
_LF_END = b"\n\n"


class Frame(NamedTuple):
    """One SSE frame: its raw lines and the fields the plugin reads."""

    raw: bytes
    terminator: bytes
    event: str | None
    data: bytes | None
    id: str | None

    @classmethod
    def parse(cls, raw: bytes, terminator: bytes) -> Frame:
        event = data = frame_id = None
        for line in raw.splitlines():
            name, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                data = value if data is None else data + b"\n" + value
            elif name == b"event":
                event = value.decode("utf-8", "replace").strip()
            elif name == b"id":
                frame_id = value.decode("utf-8", "replace").strip()
        return cls(raw, terminator, event, data, frame_id)

    @property
    def mode(self) -> str | None:
        """The stream mode of the event name (`messages|sub:1` -> `messages`)."""
        return self.event.split("|", 1)[0] if self.event else None

    def field(self, name: str) -> str | None:
        """`name` of the frame's JSON data as text, None if the data has no such (truthy) field."""
        if self.data is None:
            return None
        try:
            value = orjson.loads(self.data).get(name)
        except (orjson.JSONDecodeError, AttributeError):
            return None
        return str(value) if value else None

    def to_bytes(self, *, strip_ids: bool = False) -> bytes:
        """The frame as it came, or without its `id:` lines."""
        if not strip_ids or self.id is None:
            return self.raw + self.terminator
        newline = b"\r\n" if b"\r\n" in self.raw or self.terminator.startswith(b"\r") else b"\n"
        lines = [line for line in self.raw.splitlines() if not line.startswith(b"id:")]
        return newline.join(lines) + self.terminator


class SSEFrames:
    """Feeds each complete frame of a body to `on_frame`; returns what to send on."""

    def __init__(self, on_frame: Callable[[Frame], bytes]) -> None:
        self._on_frame = on_frame
        self._buffer = b""

    def feed(self, chunk: bytes, final: bool) -> bytes:
        # What is held back has no blank line in it, except perhaps one its last
        # three bytes begin: the search starts there, so a frame that arrives in
        # many chunks is scanned once, not once per chunk.
        held = len(self._buffer)
        data = self._buffer + chunk if held else chunk
        out: list[bytes] = []
        start = 0
        # A frame ends at the first blank line, `\r\n\r\n` or `\n\n` (the one
        # never occurs inside the other). Literal searches, each looked up again
        # only once the frames passed it: one scan of the chunk per terminator.
        since = max(0, held - 3)
        crlf = data.find(_CRLF_END, since)
        lf = data.find(_LF_END, since)
        while crlf >= 0 or lf >= 0:
            if lf < 0 or 0 <= crlf < lf:
                end, terminator = crlf, _CRLF_END
            else:
                end, terminator = lf, _LF_END
            out.append(self._frame(data[start:end], terminator))
            start = end + len(terminator)
            if crlf >= 0 and crlf < start:
                crlf = data.find(_CRLF_END, start)
            if lf >= 0 and lf < start:
                lf = data.find(_LF_END, start)
        self._buffer = data[start:]
        if final and self._buffer:
            out.append(self._frame(self._buffer, b""))
            self._buffer = b""
        return b"".join(out)

    def _frame(self, raw: bytes, terminator: bytes) -> bytes:
        try:
            return self._on_frame(Frame.parse(raw, terminator))
        except Exception:  # noqa: BLE001 - the client's stream matters more than the journal
            logger.exception("journal-bridge: passing an SSE frame through unfiltered")
            return raw + terminator
