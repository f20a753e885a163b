"""ASGI middleware that makes every run observable to the bridge.

LangGraph Server runs `astream_events(version="v2")` -- the only source of
`on_custom_event` -- only when a run's `stream_mode` contains `"events"`, and a
late subscriber sees a run from its first frame only when the run was created
with `stream_resumable=True`. Clients rarely ask for either (a UI asks for
`values` and `messages-tuple`; `runs.create` defaults to `values`).

So for each run-creating request this middleware:
1. adds `"events"` to the run's `stream_mode` and sets `stream_resumable`;
2. hands `(thread_id, run_id)` to the bridge as soon as the server names them
   (the `Content-Location` header, or the created run in the JSON body);
3. gives the client exactly the stream it asked for: SSE frames of the added
   mode are dropped and the `id:` lines the resumable flag adds are removed,
   frame by frame, without buffering the response.

Streams joined later get the same treatment: a run's stream joined without
asking for `events` (`runs.join_stream`, a UI reconnecting) and a thread's
stream never show what the plugin added to the runs it changed.

Everything else passes through untouched. A body that is not JSON, a
`stream_mode` the server would reject, or a request the server rejects, is
forwarded as it came.
"""

from __future__ import annotations

import json
import logging
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from journal_bridge.modes import EVENTS_MODE, mode_of, requested_modes

logger = logging.getLogger(__name__)

__all__ = ["RunObserverMiddleware", "RunRequestPlan", "plan_run_request", "route_path"]

_THREAD_RUNS = re.compile(r"^/threads/(?P<thread_id>[^/]+)/runs(?P<kind>/stream|/wait)?/?$")
_STATELESS_RUNS = re.compile(r"^/runs(?P<kind>/stream|/wait|/batch)?/?$")
_RUN_JOIN = re.compile(r"^/threads/(?P<thread_id>[^/]+)/runs/(?P<run_id>[^/]+)/stream/?$")
_THREAD_STREAM = re.compile(r"^/threads/(?P<thread_id>[^/]+)/stream/?$")
_CONTENT_LOCATION = re.compile(r"^/threads/(?P<thread_id>[^/]+)/runs/(?P<run_id>[^/]+)$")
_FRAME_END = re.compile(rb"\r\n\r\n|\n\n")



@dataclass(frozen=True)
class RunRequestPlan:
    """What one run's client asked for, and what the middleware changed."""

    kind: str  # "stream" | "wait" | "create" | "batch"
    client_modes: frozenset[str]
    added_mode: bool
    forced_resumable: bool

    @property
    def changed(self) -> bool:
        return self.added_mode or self.forced_resumable


def _prepare_payload(payload: dict[str, Any], kind: str) -> RunRequestPlan | None:
    modes = requested_modes(payload.get("stream_mode"))
    if modes is None:
        return None
    added = EVENTS_MODE not in modes
    if added:
        payload["stream_mode"] = [*modes, EVENTS_MODE]
    forced = not payload.get("stream_resumable")
    if forced:
        payload["stream_resumable"] = True
    return RunRequestPlan(kind, frozenset(modes), added, forced)


def plan_run_request(method: str, path: str, body: bytes) -> tuple[list[RunRequestPlan], bytes] | None:
    """One plan per run the request creates, and the rewritten body; None to leave it alone."""
    if method != "POST":
        return None
    match = _THREAD_RUNS.match(path) or _STATELESS_RUNS.match(path)
    if not match:
        return None
    kind = (match.group("kind") or "").strip("/") or "create"
    try:
        payload = json.loads(body or b"null")
    except ValueError:
        return None
    items = payload if kind == "batch" else [payload]
    if not isinstance(items, list) or not items or not all(isinstance(p, dict) for p in items):
        return None
    plans = [_prepare_payload(item, kind) for item in items]
    if any(plan is None for plan in plans):
        return None
    return plans, json.dumps(payload, separators=(",", ":")).encode()  # type: ignore[return-value]


def route_path(scope: Scope) -> str:
    """The path below the app's mount point (`root_path`), as routing sees it."""
    path = scope.get("path", "")
    root = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :] or "/"
    return path


class _SSEFilter:
    """Rewrites an SSE body frame by frame; frames may arrive split across chunks.

    `keep(event_name, data_line)` decides whether a frame reaches the client;
    `strip_ids` removes `id:` lines. A frame the filter cannot make sense of
    is passed on unchanged.
    """

    def __init__(self, keep: Callable[[str | None, bytes | None], bool], strip_ids: bool) -> None:
        self.keep = keep
        self.strip_ids = strip_ids
        self._buffer = b""

    def feed(self, chunk: bytes, final: bool) -> bytes:
        data = self._buffer + chunk
        out: list[bytes] = []
        start = 0
        for match in _FRAME_END.finditer(data):
            out.append(self._frame(data[start : match.start()], match.group(0)))
            start = match.end()
        self._buffer = data[start:]
        if final and self._buffer:
            out.append(self._frame(self._buffer, b""))
            self._buffer = b""
        return b"".join(out)

    def _frame(self, frame: bytes, terminator: bytes) -> bytes:
        try:
            newline = b"\r\n" if b"\r\n" in frame or terminator.startswith(b"\r") else b"\n"
            lines = frame.splitlines()
            event = next((ln[6:].strip().decode("utf-8", "replace") for ln in lines if ln.startswith(b"event:")), None)
            data = next((ln[5:] for ln in lines if ln.startswith(b"data:")), None)
            if not self.keep(event, data):
                return b""
            if self.strip_ids:
                lines = [line for line in lines if not line.startswith(b"id:")]
            return newline.join(lines) + terminator
        except Exception:  # noqa: BLE001 - the client's stream matters more than the filter
            logger.exception("journal-bridge: passing an SSE frame through unfiltered")
            return frame + terminator


def _metadata_field(data: bytes | None, name: str) -> str | None:
    """`metadata[name]` of an `events` frame's payload, if it has one."""
    if data is None:
        return None
    try:
        metadata = json.loads(data).get("metadata")
    except (ValueError, AttributeError):
        return None
    if isinstance(metadata, dict) and metadata.get(name):
        return str(metadata[name])
    return None


Observer = Callable[[str, str, RunRequestPlan], None]


class RunObserverMiddleware:
    """See the module docstring. `observe(thread_id, run_id, plan)` is called once per run."""

    def __init__(self, app: ASGIApp, observe: Callable[[Scope], Observer | None], max_runs: int = 10_000) -> None:
        self.app = app
        self._observer_for = observe
        self._max_runs = max_runs
        # What the middleware changed in recent runs, for streams joined later.
        self._plans: OrderedDict[str, RunRequestPlan] = OrderedDict()

    def _remember(self, run_id: str, plan: RunRequestPlan) -> None:
        self._plans[run_id] = plan
        while len(self._plans) > self._max_runs:
            self._plans.popitem(last=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope.get("method"), route_path(scope)
        if method == "POST" and (_THREAD_RUNS.match(path) or _STATELESS_RUNS.match(path)):
            await self._create(scope, receive, send, path)
        elif method == "GET" and self._plans and (match := _RUN_JOIN.match(path)):
            await self._join(scope, receive, send, match.group("run_id"))
        elif method == "GET" and self._plans and _THREAD_STREAM.match(path):
            await self._thread_stream(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    # -- creating runs --------------------------------------------------------

    async def _create(self, scope: Scope, receive: Receive, send: Send, path: str) -> None:
        observe = self._observer_for(scope)
        if observe is None:
            await self.app(scope, receive, send)
            return
        body, trailing = await _read_body(receive)
        planned = plan_run_request("POST", path, body)
        if planned is None:
            await self.app(scope, _replay(body, trailing, receive), send)
            return
        plans, new_body = planned
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(new_body)).encode()))
        scope = {**scope, "headers": headers}

        def notify(thread_id: str, run_id: str, plan: RunRequestPlan) -> None:
            self._remember(run_id, plan)
            try:
                observe(thread_id, run_id, plan)
            except Exception:  # noqa: BLE001 - journaling must never break the client's response
                logger.exception("journal-bridge: could not observe run %s", run_id)

        await self.app(scope, _replay(new_body, trailing, receive), _CreatedRunSend(plans, notify, send))

    # -- joining streams ------------------------------------------------------

    async def _join(self, scope: Scope, receive: Receive, send: Send, run_id: str) -> None:
        plan = self._plans.get(run_id)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        asked = {m for value in query.get("stream_mode", []) for m in value.split(",") if m}
        if plan is None or not plan.changed or EVENTS_MODE in asked:
            await self.app(scope, receive, send)
            return
        # Without stream_mode the server replays the run's modes: the client's own.
        keep_modes = asked or set(plan.client_modes)
        resuming = any(k.lower() == b"last-event-id" for k, _ in scope["headers"])

        def keep(event: str | None, data: bytes | None) -> bool:
            mode = mode_of(event)
            return not (plan.added_mode and mode == EVENTS_MODE and EVENTS_MODE not in keep_modes)

        sse = _SSEFilter(keep, strip_ids=plan.forced_resumable and not resuming)
        await self.app(scope, receive, _FilteredSend(sse, send))

    async def _thread_stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        def keep(event: str | None, data: bytes | None) -> bool:
            if mode_of(event) != EVENTS_MODE:
                return True
            plan = self._plans.get(_metadata_field(data, "run_id") or "")
            return plan is None or not plan.added_mode

        await self.app(scope, receive, _FilteredSend(_SSEFilter(keep, strip_ids=False), send))


async def _read_body(receive: Receive) -> tuple[bytes, list[Message]]:
    chunks: list[bytes] = []
    trailing: list[Message] = []
    while True:
        message = await receive()
        if message["type"] == "http.request":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        else:  # a disconnect before the body was complete
            trailing.append(message)
            break
    return b"".join(chunks), trailing


def _replay(body: bytes, trailing: list[Message], receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        if trailing:
            return trailing.pop(0)
        return await receive()

    return replay


class _FilteredSend:
    """Passes a successful SSE response body through an `_SSEFilter`."""

    def __init__(self, sse: _SSEFilter | None, send: Send) -> None:
        self.sse = sse
        self.send = send
        self.active = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.active = self.sse is not None and 200 <= message["status"] < 300 and _is_sse(message)
        elif message["type"] == "http.response.body" and self.active and self.sse is not None:
            more = message.get("more_body", False)
            body = self.sse.feed(message.get("body", b""), final=not more)
            if not body and more:
                return
            message = {**message, "body": body}
        await self.send(message)


def _is_sse(message: Message) -> bool:
    for key, value in message.get("headers", []):
        if key.lower() == b"content-type":
            return value.split(b";", 1)[0].strip().lower() == b"text/event-stream"
    return False


class _CreatedRunSend(_FilteredSend):
    """Learns the created runs from the response; filters a streamed run's frames."""

    def __init__(self, plans: list[RunRequestPlan], notify: Callable[[str, str, RunRequestPlan], None], send: Send) -> None:
        super().__init__(None, send)
        self.plans = plans
        self.notify = notify
        self.json_body: list[bytes] | None = None

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._start(message)
        elif message["type"] == "http.response.body" and self.json_body is not None:
            self.json_body.append(message.get("body", b""))
            if not message.get("more_body", False):
                self._runs_from_json(b"".join(self.json_body))
                self.json_body = None
        await super().__call__(message)

    def _start(self, message: Message) -> None:
        if not 200 <= message["status"] < 300:
            return
        plan = self.plans[0]
        if plan.kind in ("create", "batch"):
            self.json_body = []
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in message.get("headers", [])}
        location = headers.get("content-location", "")
        match = _CONTENT_LOCATION.match(location)
        if match:
            self.notify(match.group("thread_id"), match.group("run_id"), plan)
        stateless_run = location.rsplit("/", 1)[-1] if not match and location.startswith("/runs/") else None
        if plan.kind != "stream" or not (plan.changed or stateless_run):
            return

        def keep(event: str | None, data: bytes | None) -> bool:
            nonlocal stateless_run
            mode = mode_of(event)
            if stateless_run and mode == EVENTS_MODE and (thread_id := _metadata_field(data, "thread_id")):
                # A stateless streamed run names only its run; its thread comes in the first event.
                run_id, stateless_run = stateless_run, None
                self.notify(thread_id, run_id, plan)
            return not (plan.added_mode and mode == EVENTS_MODE)

        self.sse = _SSEFilter(keep, strip_ids=plan.forced_resumable)

    def _runs_from_json(self, body: bytes) -> None:
        try:
            data = json.loads(body)
        except ValueError:
            return
        runs = data if isinstance(data, list) else [data]
        for run, plan in zip(runs, self.plans):
            if isinstance(run, dict) and run.get("thread_id") and run.get("run_id"):
                self.notify(str(run["thread_id"]), str(run["run_id"]), plan)
