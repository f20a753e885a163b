"""Completing a client's run stream that the runtime ended before the run's output reached it.

The runtimes end a run's stream in two ways: the run's last frame is followed
by a `done` message on the same channel, or the join waits half a second
without a frame (`JOIN_POLL_SECONDS`), asks for the run's status and ends when
the run is over. The second way loses whatever had not reached this process
by then: langgraph-runtime-pg carries another process's frames through Redis
pub/sub, and a frame still on its way when the status says `success` never
reaches the client, which gets an HTTP 200 with nothing (or nothing but the
run's `metadata`) and no error.

The plugin makes every run it creates resumable, so the runtime keeps each of
the run's frames with its id, and a join with `Last-Event-ID` replays those
after that id. `StreamWatch` notes what the client's stream carried (every
frame, before the plugin's filter: a frame only the journal reads counts as
one the runtime delivered); once the runtime ended the stream and the client
is still there, `needs_repair` says whether the stream may have lost frames:
nothing of the run past its `metadata`, or the end came a poll after the last
frame. The middleware then joins the run's stream from just before the last
id the client got and sends on, through the same filter as every frame, only
the frames the client did not get (`repeats`). A stream that was complete
gets nothing from the replay: the runtime keeps no frame after its last one.

Frame ids are the runtime's `<ms>-<seq>`: langgraph-runtime-inmem gives every
frame of one millisecond the same id (`<ms>-0`) and replays only ids greater
than the one asked for, so the replay starts just below the last id and skips
as many frames carrying that id as the client got.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable

from starlette.types import Message, Receive, Scope, Send

from journal_bridge.host.compat import JOIN_POLL_SECONDS
from journal_bridge.host.sse import Frame

__all__ = ["JOIN_POLL_SECONDS", "StreamWatch", "replay_run", "replay_scope"]

# A join that ends at such a poll ends about `JOIN_POLL_SECONDS` after it handed on
# its last frame (its wait starts once the frame is sent; measured here, the gap
# came out between 0.500 and 0.503 s, and a bound of exactly 0.5 s missed such an
# end now and then): a stream that ended this long after its last frame may have
# lost frames. A `done`
# comes right after the run's last frame, later only on a busy server.
_POLL_GAP_SECONDS = JOIN_POLL_SECONDS * 0.9

_MS_SEQ = re.compile(r"^(\d+)-(\d+)$")
# The largest sequence number of a Redis stream id.
_MAX_SEQ = 2**64 - 1


class StreamWatch:
    """What a client's stream of one run carried, frame by frame, before any filter."""

    def __init__(self) -> None:
        self.frames = 0
        self.metadata = 0
        self.past_metadata = False
        self.last_id: str | None = None
        self.at_last_id = 0  # how many frames carried `last_id`
        self._last_frame_at: float | None = None

    def saw(self, event: str | None, frame_id: str | None) -> None:
        if event is None:
            return  # a comment (the server's heartbeat), no frame of the run
        self.frames += 1
        self._last_frame_at = time.monotonic()
        if event == "metadata":
            self.metadata += 1
        else:
            self.past_metadata = True
        if frame_id is not None:
            if frame_id == self.last_id:
                self.at_last_id += 1
            else:
                self.last_id, self.at_last_id = frame_id, 1

    def needs_repair(self) -> bool:
        """Whether the stream the runtime just ended may have lost the run's frames."""
        if not self.past_metadata:
            return True
        since = time.monotonic() - (self._last_frame_at or 0.0)
        return since >= _POLL_GAP_SECONDS

    def cursor(self) -> str:
        """The `Last-Event-ID` whose replay starts at the client's last frame."""
        if self.last_id is None:
            return "0"  # every frame: the client got none with an id
        found = _MS_SEQ.match(self.last_id)
        if found is None:
            return self.last_id
        ms, seq = int(found.group(1)), int(found.group(2))
        if seq > 0:
            return f"{ms}-{seq - 1}"
        return f"{ms - 1}-{_MAX_SEQ}" if ms > 0 else "0"

    def repeats(self) -> Callable[[Frame], bool]:
        """Whether a frame of a replay from `cursor()` is one the client already got
        (what the stream carried until now: later frames do not change the answer)."""
        last_id, at_last_id, metadata = self.last_id, self.at_last_id, self.metadata
        seen = {"at_last_id": 0, "metadata": 0}

        def repeat(frame: Frame) -> bool:
            if frame.event is None:
                return True  # not a frame of the run
            if last_id is None:
                # The replay starts at the run's first frame; the client got its metadata at most.
                if frame.mode == "metadata" and seen["metadata"] < metadata:
                    seen["metadata"] += 1
                    return True
                return False
            if frame.id == last_id and seen["at_last_id"] < at_last_id:
                seen["at_last_id"] += 1
                return True
            return False

        return repeat


def replay_scope(scope: Scope, thread_id: str, run_id: str, cursor: str) -> Scope:
    """A join of the run's whole stream from `cursor`, as the client's own request would
    make it: its headers (its credentials) and the app's mount point kept."""
    path = f"{scope.get('root_path', '')}/threads/{thread_id}/runs/{run_id}/stream"
    dropped = {b"content-length", b"content-type", b"last-event-id", b"accept"}
    headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() not in dropped]
    headers += [(b"accept", b"text/event-stream"), (b"last-event-id", cursor.encode())]
    return {**scope, "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b"", "headers": headers}


async def replay_run(
    app: Callable[[Scope, Receive, Send], Awaitable[None]],
    scope: Scope,
    on_body: Callable[[bytes, bool], Awaitable[None]],
) -> bool:
    """Run the join `scope` through `app`, handing each piece of its body to `on_body`
    (`final` on the last); True when it answered with a stream. A client that leaves
    meanwhile cancels the response this runs in, and the join with it."""
    answered = False
    requested = False

    async def receive() -> Message:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.get_running_loop().create_future()  # the join's client never leaves
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        nonlocal answered
        if message["type"] == "http.response.start":
            answered = 200 <= message["status"] < 300
        elif message["type"] == "http.response.body" and answered:
            await on_body(message.get("body", b""), not message.get("more_body", False))

    await app(scope, receive, send)
    return answered
