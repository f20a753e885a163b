"""Server-sent event frames as they pass through the plugin, without buffering the body.

`SSEFrames` cuts a streamed body into frames (frames may arrive split across
chunks, or several in one chunk) and hands each to a callback that returns
the bytes to send on instead (the frame without its `id:` lines, or nothing),
or None to send the frame as it came. A frame the callback fails on is passed
on as it came.

Frames the state of a conversation travels in are large, and most are sent on
as they came: those are not copied. A frame's `raw` is a view of the body it
came in; its `data` is the one copy made (the journal keeps it); a run of
frames sent as they came goes on as one slice of the body, or as the body
itself when all of it did.

A frame that neither the client nor the journal wants need not be parsed at
all: `passed_over`, given, is asked first with the frame's bytes
(`body[start:end]`, unparsed) and, when it answers True, the frame is dropped
without `on_frame` seeing it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

import orjson

__all__ = ["Frame", "SSEFrames"]

logger = logging.getLogger(__name__)

_CRLF_END = b"\r\n\r\n"
_LF_END = b"\n\n"
_FIELDS = (b"data", b"event", b"id")
_LONGEST_NAME = max(len(name) for name in _FIELDS)
# A frame this short is cheaper to split into lines at once than line by line.
_SMALL_FRAME = 2048


def _blank_line(data: bytes, pos: int) -> tuple[int, bytes]:
    """Where the first blank line at or after `pos` begins, `\r\n\r\n` or `\n\n`
    (the one never occurs inside the other), and which; `(-1, b"")` if none.

    Found from the line feeds: a frame has a few lines, and one byte is found
    at memory speed where a search for the pair compares every byte."""
    size = len(data)
    newline = data.find(b"\n", pos)
    while newline >= 0:
        after = newline + 1
        if after < size:
            following = data[after]
            if following == 0x0A:
                return newline, _LF_END
            if (
                following == 0x0D
                and after + 1 < size
                and data[after + 1] == 0x0A
                and newline > pos
                and data[newline - 1] == 0x0D
            ):
                return newline - 1, _CRLF_END
        newline = data.find(b"\n", after)
    return -1, b""


def _split_fields(raw: bytes) -> list[tuple[bytes, bytes]]:
    """The `(name, value)` of each line of a small frame, split at once.

    Lines end at LF, CRLF or a lone CR."""
    fields = []
    for line in raw.splitlines():
        name, _, value = line.partition(b":")
        fields.append((name, value[1:] if value[:1] == b" " else value))
    return fields


def _found_fields(body: bytes, start: int, end: int) -> Iterator[tuple[bytes, bytes]]:
    """The `(name, value)` of each field the plugin reads in `body[start:end]`,
    found with `find`: a long `data` line is scanned at memory speed and copied
    once. Lines end at LF, CRLF or a lone CR."""
    pos = start
    while pos < end:
        newline = body.find(b"\n", pos, end)
        line_end = end if newline < 0 else newline
        after = end if newline < 0 else newline + 1
        carriage = body.find(b"\r", pos, line_end)
        if 0 <= carriage < line_end - 1:  # a lone CR ends this line
            line_end, after = carriage, carriage + 1
        elif carriage == line_end - 1 and carriage >= 0:
            line_end = carriage  # CRLF
        # A field's name ends at the line's first colon; those read are 5 bytes at most.
        colon = body.find(b":", pos, min(line_end, pos + _LONGEST_NAME + 1))
        if colon >= 0:
            name = body[pos:colon]
        else:
            name = body[pos:line_end] if line_end - pos <= _LONGEST_NAME else b""
        if name in _FIELDS:
            value_at = line_end if colon < 0 else colon + 1
            if value_at < line_end and body[value_at] == 0x20:
                value_at += 1
            yield name, body[value_at:line_end]
        pos = after


class Frame(NamedTuple):
    """One SSE frame: its raw lines (bytes, or a view of the body it came in)
    and the fields the plugin reads."""

    raw: bytes | memoryview
    terminator: bytes
    event: str | None
    data: bytes | None
    id: str | None

    @classmethod
    def parse(cls, raw: bytes, terminator: bytes) -> Frame:
        return cls._in(raw, 0, len(raw), terminator)

    @classmethod
    def _in(cls, body: bytes, start: int, end: int, terminator: bytes) -> Frame:
        """The frame at `body[start:end]`; the raw lines of a large one are a view of `body`."""
        raw: bytes | memoryview
        fields: Iterable[tuple[bytes, bytes]]
        if end - start <= _SMALL_FRAME:
            small = body[start:end]
            raw, fields = small, _split_fields(small)
        else:
            raw = body if start == 0 and end == len(body) else memoryview(body)[start:end]
            fields = _found_fields(body, start, end)
        event = data = frame_id = None
        for name, value in fields:
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
        raw = bytes(self.raw)
        if not strip_ids or self.id is None:
            return raw + self.terminator
        newline = b"\r\n" if b"\r\n" in raw or self.terminator.startswith(b"\r") else b"\n"
        lines = [line for line in raw.splitlines() if not line.startswith(b"id:")]
        return newline.join(lines) + self.terminator

    def sent_on(self, *, strip_ids: bool = False) -> bytes | None:
        """What an `SSEFrames` callback returns to send the frame on: None (as it
        came) unless its `id:` lines are to go."""
        return self.to_bytes(strip_ids=True) if strip_ids and self.id is not None else None


class SSEFrames:
    """Feeds each complete frame of a body to `on_frame`; returns what to send on.

    `on_frame` returns the bytes to send instead of the frame, or None to send
    it as it came. `passed_over(body, start, end)`, when given, drops a frame
    before it is parsed (see the module docstring)."""

    def __init__(
        self,
        on_frame: Callable[[Frame], bytes | None],
        passed_over: Callable[[bytes, int, int], bool] | None = None,
    ) -> None:
        self._on_frame = on_frame
        self._passed_over = passed_over
        self._buffer = b""

    def feed(self, chunk: bytes, final: bool) -> bytes:
        # What is held back has no blank line in it, except perhaps one its last
        # three bytes begin: the search starts there, so a frame that arrives in
        # many chunks is scanned once, not once per chunk.
        held = len(self._buffer)
        data = self._buffer + chunk if held else chunk
        out: list[bytes] = []
        start = 0
        kept = -1  # where the frames sent as they came, not yet in `out`, begin
        end, terminator = _blank_line(data, max(0, held - 3))
        while end >= 0 or (final and start < len(data)):
            if end < 0:  # the body's end ends its last frame
                end, terminator = len(data), b""
            # The frame from `start` to `end`: kept in place, or its bytes after those kept.
            sent = self._frame(data, start, end, terminator)
            if sent is None:
                kept = start if kept < 0 else kept
            else:
                if kept >= 0:
                    out.append(data[kept:start])
                    kept = -1
                out.append(sent)
            start = end + len(terminator)
            end, terminator = _blank_line(data, start) if terminator else (-1, b"")
        if kept >= 0:
            out.append(data[kept:start])  # the whole of `data` is `data` itself
        self._buffer = data[start:] if start < len(data) else b""
        return out[0] if len(out) == 1 else b"".join(out)

    def _frame(self, body: bytes, start: int, end: int, terminator: bytes) -> bytes | None:
        if self._passed_over is not None:
            try:
                if self._passed_over(body, start, end):
                    return b""
            except Exception:  # noqa: BLE001 - a frame the check fails on is parsed as any other
                logger.exception("journal-bridge: parsing an SSE frame whose bytes could not be checked")
        try:
            return self._on_frame(Frame._in(body, start, end, terminator))
        except Exception:  # noqa: BLE001 - the client's stream matters more than the journal
            logger.exception("journal-bridge: passing an SSE frame through unfiltered")
            return None
