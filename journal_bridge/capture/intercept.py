"""ASGI middleware that makes every run observable to the journal, invisibly.

For each run-creating request (`journal_bridge.capture.run_requests` decides whether
and how to rewrite it) the middleware:

1. forwards the request with the capture's stream modes and `stream_resumable`
   added;
2. journals a streamed run from the frames it forwards to its client (fed to
   the journal's `ClientFrames` as they pass); a run nobody streams (`runs.create`, `runs.wait`, batches)
   is handed to the journal to join;
3. gives the client exactly what it would get without the plugin: frames of
   the added modes are dropped and the `id:` lines the resumable flag adds are
   removed, frame by frame, without buffering the stream; run objects get the
   client's own `stream_mode` and `resumable` back.

Later reads of those runs get the same treatment: a run's stream joined by a
client (`runs.join_stream`), a run read or listed, and a thread's stream. A
created run whose client joins it at once is journaled from that join, so the
run is read once, not twice: the journal takes the join (`take_client_join`),
adds the modes it reads and `metadata` to the join's `stream_mode` when the
client named fewer, and drops their frames from what the client gets, by the
server's own mode filter (`compat.join_mode_matches`).

Everything else passes through untouched.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

import orjson
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from journal_bridge.mapping.capture_setting import EVENTS_MODE, CaptureSetting
from journal_bridge.host.compat import join_mode_matches, join_query_modes, join_query_with_modes, max_request_body_bytes
from journal_bridge.capture.run_requests import RunPlan, plan_run_request, restore_run_objects, run_creating_kind
from journal_bridge.capture.stream_repair import StreamWatch, replay_run, replay_scope
from journal_bridge.host.sse import Frame, SSEFrames

logger = logging.getLogger(__name__)

__all__ = ["READER_HEADER", "RunObserverMiddleware", "ClientFrames", "RunSink", "route_path"]

_RUN_JOIN = re.compile(r"^/threads/(?P<thread_id>[^/]+)/runs/(?P<run_id>[^/]+)/stream/?$")
_RUN_READ = re.compile(r"^/threads/(?P<thread_id>[^/]+)/runs(?:/(?P<run_id>[^/]+))?/?$")
_THREAD_STREAM = re.compile(r"^/threads/(?P<thread_id>[^/]+)/stream/?$")
_CONTENT_LOCATION = re.compile(r"^/threads/(?P<thread_id>[^/]+)/runs/(?P<run_id>[^/]+)$")
_STATELESS_LOCATION = re.compile(r"^/runs/(?P<run_id>[^/]+)$")

READER_HEADER = "x-journal-bridge-reader"
"""Sent by the journal's own in-process SDK client: its requests pass untouched."""
_READER_HEADER = READER_HEADER.encode()


class ClientFrames(Protocol):
    """The journal's reader of one streamed run, fed the frames its client gets.

    One may also offer `passes_over(body, start, end) -> bool`: whether it keeps
    nothing of the unparsed frame `body[start:end]` (`SSEFrames`); a frame of a
    mode only the journal added that it passes over is dropped unparsed."""

    def feed(self, frame: Frame) -> None: ...

    def close(self, *, complete: bool) -> None: ...


class RunSink(Protocol):
    """Where the middleware hands the runs it sees."""

    def join(self, thread_id: str, run_id: str, plan: RunPlan) -> None: ...

    def read_client_stream(self, thread_id: str | None, run_id: str, plan: RunPlan) -> ClientFrames: ...

    def take_client_join(self, thread_id: str, run_id: str, modes: tuple[str, ...]) -> ClientFrames | None: ...

    def unplanned(self, reason: str) -> None: ...


# A sink may also offer `replayed(run_id, missed)`: a run's stream the runtime ended was
# replayed (`stream_repair`), and the client had not got `missed` of its frames.


def route_path(scope: Scope) -> str:
    """The path below the app's mount point (`root_path`), as routing sees it."""
    path = scope.get("path", "")
    root = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :] or "/"
    return path


class RunObserverMiddleware:
    """See the module docstring. `sink_for(scope)` returns where runs go, or None to stay out."""

    def __init__(
        self,
        app: ASGIApp,
        sink_for: Callable[[Scope], RunSink | None],
        setting: CaptureSetting = CaptureSetting.AUTO,
        max_runs: int = 10_000,
    ) -> None:
        self.app = app
        self._sink_for = sink_for
        self._setting = setting
        self._max_runs = max_runs
        # What the plugin changed in recent runs, for the reads that come later.
        self.plans: OrderedDict[str, RunPlan] = OrderedDict()

    def _remember(self, run_id: str, plan: RunPlan) -> None:
        if not plan.changed:
            return
        # Later reads need what the client asked for and what was added, never
        # the run's input: a remembered plan does not keep it alive.
        self.plans[run_id] = dataclasses.replace(plan, assistant_id=None, run_input=None)
        while len(self.plans) > self._max_runs:
            self.plans.popitem(last=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if any(k == _READER_HEADER for k, _ in scope["headers"]):
            if scope.get("method") == "GET" and _RUN_JOIN.match(route_path(scope)):
                send = _WithoutLocation(send)
            await self.app(scope, receive, send)
            return
        method, path = scope.get("method", ""), route_path(scope)
        kind = run_creating_kind(method, path)
        if kind is not None:
            await self._create(scope, receive, send, path)
        elif method == "GET" and self.plans and (match := _RUN_JOIN.match(path)):
            await self._join(scope, receive, send, match.group("thread_id"), match.group("run_id"))
        elif method == "GET" and self.plans and _RUN_READ.match(path):
            await self.app(scope, receive, _RestoringSend(self.plans, send))
        elif method == "GET" and _THREAD_STREAM.match(path):
            await self._thread_stream(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    # -- creating runs --------------------------------------------------------

    async def _create(self, scope: Scope, receive: Receive, send: Send, path: str) -> None:
        sink = self._sink_for(scope)
        if sink is None:
            await self.app(scope, receive, send)
            return
        body, trailing, complete = await _read_body(receive, max_request_body_bytes())
        planned = plan_run_request("POST", path, body, self._setting) if complete else None
        if planned is None:
            sink.unplanned("a run-creating request the journal cannot read as the server does")
            await self.app(scope, _replay(body, trailing, receive, complete), send)
            return
        plans, new_body = planned
        if new_body is not body:
            scope = {**scope, "headers": list(scope["headers"])}
            MutableHeaders(scope=scope)["content-length"] = str(len(new_body))
        responder = _CreatedRunSend(plans, sink, self._remember, send, self._replayer(scope))
        try:
            await self.app(scope, responder.watch(_replay(new_body, trailing, receive, True)), responder)
        finally:
            responder.finish()

    def _replayer(self, scope: Scope) -> Replay:
        """Joins a run's stream from a cursor, as the request `scope` would (`stream_repair`)."""

        async def replay(thread_id: str, run_id: str, cursor: str, on_body: Callable[[bytes, bool], Any]) -> bool:
            return await replay_run(self.app, replay_scope(scope, thread_id, run_id, cursor), on_body)

        return replay

    # -- later reads ------------------------------------------------------------

    async def _join(self, scope: Scope, receive: Receive, send: Send, thread_id: str, run_id: str) -> None:
        plan = self.plans.get(run_id)
        if plan is None:
            await self.app(scope, receive, send)
            return
        resuming = any(k.lower() == b"last-event-id" for k, _ in scope["headers"])
        if plan.forced_resumable:
            # The client's run is not resumable: a Last-Event-ID replays nothing.
            scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k.lower() != b"last-event-id"]}
            resuming = False
        added = set(plan.capture.added)
        taken = None if resuming else self._take_client_join(scope, thread_id, run_id, plan)
        journal, client_modes, extra = taken or (None, [], [])
        if extra:
            scope = {**scope, "query_string": join_query_with_modes(scope.get("query_string", b""), [*client_modes, *extra])}

        def on_frame(frame: Frame) -> bytes | None:
            if journal is not None:
                journal.feed(frame)
            if frame.mode in added:
                return b""
            if extra and frame.event and not join_mode_matches(frame.event, client_modes) and join_mode_matches(frame.event, extra):
                return b""  # read for the journal only
            return frame.sent_on(strip_ids=plan.forced_resumable)

        filtered = _FilteredSend(SSEFrames(on_frame), send)
        try:
            await self.app(scope, filtered.watch(receive), filtered)
        finally:
            if journal is not None:
                _close_quietly(journal, complete=filtered.ended and not filtered.left_early)

    def _take_client_join(
        self, scope: Scope, thread_id: str, run_id: str, plan: RunPlan
    ) -> tuple[ClientFrames, list[str], list[str]] | None:
        """The journal's reader of a created run, when it reads the run from this join
        of its client: what to feed the frames to, the modes the client asked for, and
        those the journal adds to the join's query (frames only it reads)."""
        sink = self._sink_for(scope)
        client_modes = join_query_modes(scope.get("query_string", b""))
        if sink is None or client_modes is None:
            return None
        if client_modes:
            wanted = (*plan.capture.modes, "metadata")
            extra = [m for m in dict.fromkeys(wanted) if not join_mode_matches(m, client_modes)]
            read = (*client_modes, *extra)
        else:  # every frame of the run
            extra, read = [], (*plan.client_modes, *plan.capture.added)
        journal = sink.take_client_join(thread_id, run_id, tuple(read))
        return (journal, client_modes, extra) if journal is not None else None

    async def _thread_stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A thread's stream carries every frame of the thread's runs, each run's
        frames after its `metadata` frame: those of the modes the plugin added to
        that run are dropped."""
        current: RunPlan | None = None

        def on_frame(frame: Frame) -> bytes | None:
            nonlocal current
            if frame.mode == "metadata":
                run_id = frame.field("run_id")
                if run_id is not None:
                    current = self.plans.get(run_id)
            elif current is not None and frame.mode in current.capture.added:
                return b""
            return None

        await self.app(scope, receive, _FilteredSend(SSEFrames(on_frame), send))


async def _read_body(receive: Receive, limit: int) -> tuple[bytes, list[Message], bool]:
    """The request body; `complete` is False when it ended early or grew past `limit`."""
    chunks: list[bytes] = []
    size = 0
    trailing: list[Message] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # a disconnect before the body was complete
            trailing.append(message)
            return b"".join(chunks), trailing, False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), trailing, True
        if size > limit:
            return b"".join(chunks), trailing, False


def _replay(body: bytes, trailing: list[Message], receive: Receive, complete: bool) -> Receive:
    """A `receive` that gives the app `body` first, then whatever the client sends."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": not complete and not trailing}
        if trailing:
            return trailing.pop(0)
        return await receive()

    return replay


def _is_sse(message: Message) -> bool:
    content_type = MutableHeaders(raw=list(message.get("headers", []))).get("content-type", "")
    return content_type.split(";", 1)[0].strip().lower() == "text/event-stream"


class _FilteredSend:
    """Passes a successful SSE response body through an `SSEFrames`."""

    def __init__(self, frames: SSEFrames | None, send: Send) -> None:
        self.frames = frames
        self.send = send
        self.active = False
        self.ended = False
        self.left_early = False

    def watch(self, receive: Receive) -> Receive:
        """`receive`, noting a client that goes away before the response ends."""

        async def watched() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and not self.ended:
                self.left_early = True
            return message

        return watched

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.active = self.frames is not None and 200 <= message["status"] < 300 and _is_sse(message)
        elif message["type"] == "http.response.body":
            more = message.get("more_body", False)
            self.ended = not more
            if self.active and self.frames is not None:
                body = self.frames.feed(message.get("body", b""), final=not more)
                if not body and more:
                    return
                message = {**message, "body": body}
        await self.send(message)


class _WithoutLocation:
    """The journal's own joins of a run's stream, without the `Location` header.

    langgraph-sdk follows that header: it reconnects to a stream that closes
    early and, when one closes without an `end` event (a join always does),
    asks for the run's status. The reader asks for it itself once the stream
    is over, and the bridge joins a run again when a join fails: without the
    header a joined run costs one request less.
    """

    def __init__(self, send: Send) -> None:
        self.send = send

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"location"]
            message = {**message, "headers": headers}
        await self.send(message)


class _RestoringSend:
    """Gives run objects in a JSON response the client's own values back."""

    def __init__(self, plans: OrderedDict[str, RunPlan], send: Send) -> None:
        self.plans = plans
        self.send = send
        self.start: Message | None = None
        self.chunks: list[bytes] = []

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(raw=list(message.get("headers", [])))
            if 200 <= message["status"] < 300 and headers.get("content-type", "").startswith("application/json"):
                self.start = message
                return
        elif message["type"] == "http.response.body" and self.start is not None:
            self.chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            await self._flush(b"".join(self.chunks))
            return
        await self.send(message)

    async def _flush(self, body: bytes) -> None:
        assert self.start is not None
        restored = restore_run_objects(body, self.plans)
        start = self.start
        if restored is not None:
            body = restored
            start = {**start, "headers": list(start.get("headers", []))}
            MutableHeaders(raw=start["headers"])["content-length"] = str(len(body))
        await self.send(start)
        await self.send({"type": "http.response.body", "body": body, "more_body": False})


Replay = Callable[[str, str, str, Callable[[bytes, bool], Any]], Any]


class _CreatedRunSend(_FilteredSend):
    """Learns the created runs from the response and hands them to the journal.

    A run's stream that the runtime ends before the run's output reached the
    client is completed from the run's resumable stream (`stream_repair`)."""

    def __init__(
        self,
        plans: list[RunPlan],
        sink: RunSink,
        remember: Callable[[str, RunPlan], None],
        send: Send,
        replay: Replay | None = None,
    ) -> None:
        super().__init__(None, send)
        self.replay = replay
        self.watched: tuple[str, str, StreamWatch, Callable[[Frame], bytes | None]] | None = None
        self._passed_over: Callable[[bytes, int, int], bool] | None = None
        self.run_plans = plans
        self.sink = sink
        self.remember = remember
        self.known: OrderedDict[str, RunPlan] = OrderedDict()
        self.client_frames: ClientFrames | None = None
        self.restoring: _RestoringSend | None = None

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start" and 200 <= message["status"] < 300:
            self._started(message)
        if (
            self.watched is not None
            and self.active
            and message["type"] == "http.response.body"
            and not message.get("more_body", False)
            and not self.left_early
            and self.watched[2].needs_repair()
        ):
            await self._completed(message)
            return
        if self.restoring is not None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                body = b"".join([*self.restoring.chunks, message.get("body", b"")])
                self._runs_from_json(body)
                self.restoring.chunks = [body]
                await self.restoring._flush(body)
                return
            await self.restoring(message)
            return
        await super().__call__(message)

    def _started(self, message: Message) -> None:
        plan = self.run_plans[0]
        if plan.kind in ("create", "batch"):
            # Small JSON bodies: held until complete, to learn the runs and restore them.
            self.restoring = _RestoringSend(self.known, self.send)
            return
        location = MutableHeaders(raw=list(message.get("headers", []))).get("content-location", "")
        match = _CONTENT_LOCATION.match(location)
        stateless = _STATELESS_LOCATION.match(location)
        if match is None and stateless is None:
            return
        thread_id = match.group("thread_id") if match else None
        run_id = (match or stateless).group("run_id")  # type: ignore[union-attr]
        self.remember(run_id, plan)
        if plan.kind == "wait":
            if thread_id is not None:
                self._hand_over(lambda: self.sink.join(thread_id, run_id, plan), run_id)
            return
        self.client_frames = self._hand_over(lambda: self.sink.read_client_stream(thread_id, run_id, plan), run_id)
        journal, added, strip = self.client_frames, set(plan.capture.added), plan.forced_resumable
        watch = StreamWatch()

        def on_frame(frame: Frame) -> bytes | None:
            watch.saw(frame.event, frame.id)
            if journal is not None:
                journal.feed(frame)
            if frame.mode in added:
                return b""
            return frame.sent_on(strip_ids=strip)

        # Token callbacks, most of an `events` stream's frames: when the client did
        # not ask for `events`, neither it nor the journal reads them.
        pass_over = getattr(journal, "pass_over", None) if EVENTS_MODE in added else None

        def passed_over(body: bytes, start: int, end: int) -> bool:
            passed, frame_id = pass_over(body, start, end)  # type: ignore[misc]
            if passed:
                watch.saw(EVENTS_MODE, frame_id)
            return passed

        self.frames = SSEFrames(on_frame, passed_over if pass_over is not None else None)
        if thread_id is not None and self.replay is not None:
            self.watched = (thread_id, run_id, watch, on_frame)
        self._passed_over = passed_over if pass_over is not None else None

    async def _completed(self, message: Message) -> None:
        """The runtime ended the run's stream, perhaps before the run's frames reached
        it: what the client did not get is sent from the run's resumable stream."""
        assert self.watched is not None and self.frames is not None and self.replay is not None
        thread_id, run_id, watch, on_frame = self.watched
        rest = self.frames.feed(message.get("body", b""), final=True)
        if rest:
            await self.send({"type": "http.response.body", "body": rest, "more_body": True})
        repeat = watch.repeats()
        missed = watch.frames

        def on_replayed(frame: Frame) -> bytes | None:
            return b"" if repeat(frame) else on_frame(frame)

        replayed = SSEFrames(on_replayed, self._passed_over)

        async def on_body(chunk: bytes, final: bool) -> None:
            body = replayed.feed(chunk, final=final)
            if body:
                await self.send({"type": "http.response.body", "body": body, "more_body": True})

        try:
            await self.replay(thread_id, run_id, watch.cursor(), on_body)
        except Exception:  # noqa: BLE001 - the client's stream ends as the runtime ended it
            logger.exception("journal-bridge: could not complete the stream of run %s", run_id)
        else:
            self._replayed(run_id, watch.frames - missed)
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})
        self.ended = True

    def _replayed(self, run_id: str, missed: int) -> None:
        if missed:
            logger.info("journal-bridge: the runtime ended the stream of run %s before %d of its frames reached "
                        "the client; they were sent from the run's resumable stream", run_id, missed)
        replayed = getattr(self.sink, "replayed", None)
        if replayed is not None:
            self._hand_over(lambda: replayed(run_id, missed), run_id)

    def _hand_over(self, call: Callable[[], Any], run_id: str) -> Any:
        try:
            return call()
        except Exception:  # noqa: BLE001 - journaling must never break the client's response
            logger.exception("journal-bridge: could not observe run %s", run_id)
            return None

    def _runs_from_json(self, body: bytes) -> None:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            return
        runs = data if isinstance(data, list) else [data]
        for run, plan in zip(runs, self.run_plans, strict=False):
            if isinstance(run, dict) and run.get("thread_id") and run.get("run_id"):
                run_id = str(run["run_id"])
                self.known[run_id] = plan
                self.remember(run_id, plan)
                self._hand_over(functools.partial(self.sink.join, str(run["thread_id"]), run_id, plan), run_id)

    def finish(self) -> None:
        """The response is over: the journal's reader of a streamed run learns whether its client saw it all.

        A client that leaves mid-stream still gets a closing empty body from the
        server: only a response that ended before the client left is complete."""
        if self.client_frames is not None:
            _close_quietly(self.client_frames, complete=self.ended and not self.left_early)


def _close_quietly(frames: ClientFrames, *, complete: bool) -> None:
    try:
        frames.close(complete=complete)
    except Exception:  # noqa: BLE001 - journaling must never break the client's response
        logger.exception("journal-bridge: could not close the journal's reader of a run")
