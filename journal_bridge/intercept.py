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

Everything else passes through untouched. A body that is not JSON, or a
request the server rejects, is forwarded as it came.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

__all__ = ["RunObserverMiddleware", "RunRequestPlan", "plan_run_request"]

_THREAD_RUNS = re.compile(r"^/threads/(?P<thread_id>[^/]+)/runs(?P<kind>/stream|/wait)?/?$")
_STATELESS_RUNS = re.compile(r"^/runs(?P<kind>/stream|/wait|/batch)?/?$")
_CONTENT_LOCATION = re.compile(r"^/threads/(?P<thread_id>[^/]+)/runs/(?P<run_id>[^/]+)$")
_FRAME_END = re.compile(rb"\r\n\r\n|\n\n")

OBSERVED_MODE = "events"


@dataclass
class RunRequestPlan:
    """What the client asked for, and what the middleware changed."""

    kind: str  # "stream" | "wait" | "create" | "batch"
    thread_id: str | None
    client_modes: list[set[str]] = field(default_factory=list)
    added_mode: bool = False
    forced_resumable: bool = False

    @property
    def filters_stream(self) -> bool:
        return self.kind == "stream" and (self.added_mode or self.forced_resumable)


def _modes(value: Any) -> list[str]:
    if value is None:
        return ["values"]  # the server's default
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [m for m in value if isinstance(m, str)]
    return []


def _prepare_payload(payload: dict[str, Any], plan: RunRequestPlan) -> None:
    modes = _modes(payload.get("stream_mode"))
    plan.client_modes.append(set(modes))
    if OBSERVED_MODE not in modes:
        payload["stream_mode"] = [*modes, OBSERVED_MODE]
        plan.added_mode = True
    if not payload.get("stream_resumable"):
        payload["stream_resumable"] = True
        plan.forced_resumable = True


def plan_run_request(method: str, path: str, body: bytes) -> tuple[RunRequestPlan, bytes] | None:
    """The rewritten body of a run-creating request, or None to leave it alone."""
    if method != "POST":
        return None
    match = _THREAD_RUNS.match(path)
    if match:
        thread_id: str | None = match.group("thread_id")
    else:
        match = _STATELESS_RUNS.match(path)
        if not match:
            return None
        thread_id = None
    kind = (match.group("kind") or "").strip("/") or "create"
    try:
        payload = json.loads(body or b"null")
    except ValueError:
        return None
    plan = RunRequestPlan(kind=kind, thread_id=thread_id)
    if kind == "batch":
        if not isinstance(payload, list) or not all(isinstance(p, dict) for p in payload):
            return None
        for item in payload:
            _prepare_payload(item, plan)
    else:
        if not isinstance(payload, dict):
            return None
        _prepare_payload(payload, plan)
    return plan, json.dumps(payload, separators=(",", ":")).encode()


class _SSEFilter:
    """Drops frames of modes the client did not ask for, and added `id:` lines."""

    def __init__(self, plan: RunRequestPlan, on_thread_id: Callable[[str], None] | None) -> None:
        self.plan = plan
        self.keep_modes = plan.client_modes[0] if plan.client_modes else set()
        self.on_thread_id = on_thread_id
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
        newline = b"\r\n" if b"\r\n" in frame or terminator.startswith(b"\r") else b"\n"
        lines = frame.splitlines()
        event = None
        for line in lines:
            if line.startswith(b"event:"):
                event = line[6:].strip().decode("utf-8", "replace")
                break
        mode = event.split("|", 1)[0] if event else None
        if self.on_thread_id is not None and mode == OBSERVED_MODE:
            self._sniff_thread_id(lines)
        if self.plan.added_mode and mode == OBSERVED_MODE and OBSERVED_MODE not in self.keep_modes:
            return b""
        if self.plan.forced_resumable:
            lines = [line for line in lines if not line.startswith(b"id:")]
        return newline.join(lines) + terminator

    def _sniff_thread_id(self, lines: list[bytes]) -> None:
        for line in lines:
            if line.startswith(b"data:"):
                try:
                    metadata = json.loads(line[5:]).get("metadata") or {}
                except (ValueError, AttributeError):
                    return
                if thread_id := metadata.get("thread_id"):
                    callback, self.on_thread_id = self.on_thread_id, None
                    if callback is not None:
                        callback(str(thread_id))
                return


class RunObserverMiddleware:
    """See the module docstring. `observe(thread_id, run_id)` is called once per run."""

    def __init__(
        self,
        app: ASGIApp,
        observe: Callable[[Scope], Callable[[str, str, RunRequestPlan], None] | None],
    ) -> None:
        self.app = app
        self._observer_for = observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if not (_THREAD_RUNS.match(path) or _STATELESS_RUNS.match(path)):
            await self.app(scope, receive, send)
            return
        observe = self._observer_for(scope)
        if observe is None:
            await self.app(scope, receive, send)
            return

        body, trailing = await _read_body(receive)
        planned = plan_run_request("POST", path, body)
        if planned is None:
            await self.app(scope, _replay(body, trailing, receive), send)
            return
        plan, new_body = planned
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(new_body)).encode()))
        scope = {**scope, "headers": headers}
        await self.app(scope, _replay(new_body, trailing, receive), _ObservingSend(plan, observe, send))


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


class _ObservingSend:
    """Wraps `send`: learns the run ids from the response and filters SSE frames."""

    def __init__(self, plan: RunRequestPlan, observe: Callable[[str, str, RunRequestPlan], None], send: Send) -> None:
        self.plan = plan
        self.observe = observe
        self.send = send
        self.ok = False
        self.run_id: str | None = None
        self.json_body: list[bytes] | None = None
        self.sse: _SSEFilter | None = None

    def _notify(self, thread_id: str, run_id: str) -> None:
        try:
            self.observe(thread_id, run_id, self.plan)
        except Exception:  # noqa: BLE001 - journaling must never break the client's response
            logger.exception("journal-bridge: could not observe run %s", run_id)

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._start(message)
        elif message["type"] == "http.response.body" and self.ok:
            more = message.get("more_body", False)
            if self.json_body is not None:
                self.json_body.append(message.get("body", b""))
                if not more:
                    self._runs_from_json(b"".join(self.json_body))
                    self.json_body = None
            elif self.sse is not None:
                body = self.sse.feed(message.get("body", b""), final=not more)
                if not body and more:
                    return
                message = {**message, "body": body}
        await self.send(message)

    def _start(self, message: Message) -> None:
        status = message["status"]
        self.ok = 200 <= status < 300
        if not self.ok:
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in message.get("headers", [])}
        location = headers.get("content-location", "")
        match = _CONTENT_LOCATION.match(location)
        if self.plan.kind in ("create", "batch"):
            self.json_body = []
            return
        if match:
            self._notify(match.group("thread_id"), match.group("run_id"))
        elif location.startswith("/runs/"):
            # A stateless streamed run names only its run; its thread comes in the first event.
            run_id = location.rsplit("/", 1)[-1]
            if self.plan.kind == "stream":
                self.sse = _SSEFilter(self.plan, lambda thread_id: self._notify(thread_id, run_id))
                return
        if self.plan.filters_stream:
            self.sse = _SSEFilter(self.plan, None)

    def _runs_from_json(self, body: bytes) -> None:
        try:
            data = json.loads(body)
        except ValueError:
            return
        runs = data if isinstance(data, list) else [data]
        for run in runs:
            if isinstance(run, dict) and run.get("thread_id") and run.get("run_id"):
                self._notify(str(run["thread_id"]), str(run["run_id"]))
