"""ASGI middleware that journals runs created through the server's protocol v2.

Protocol v2 (JS SDK `client.threads.stream(...)`) creates a run with a
`run.start` command -- `POST /threads/{thread_id}/commands`, or a text message
on the WebSocket `/threads/{thread_id}/stream/events` -- and streams the thread
as protocol events. The server fixes such a run's `stream_mode` (values,
updates, messages, tools, lifecycle, custom, tasks, checkpoints) and makes it
resumable, so nothing needs rewriting: the middleware reads the run id from
the command's answer and hands the run to the journal, which joins it from its
first frame and reads `values` + `custom` (the state capture; `messages` is
among the run's modes, so the run streams its model calls with or without
the journal).

Requests, responses and WebSocket messages pass through byte for byte and
unbuffered; the middleware only looks at them. A command answer it cannot read
leaves the run to the reconciler (`journal_bridge.capture.reconcile`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from journal_bridge.mapping.capture_setting import Capture
from journal_bridge.host.compat import protocol_v2_stream_modes
from journal_bridge.host.run_objects import run_checkpoint
from journal_bridge.capture.intercept import READER_HEADER, RunSink, route_path
from journal_bridge.capture.run_requests import RunPlan

logger = logging.getLogger(__name__)

__all__ = ["PROTOCOL_V2_CAPTURE", "CommandObserverMiddleware", "command_plan"]

_COMMANDS = re.compile(r"^/threads/(?P<thread_id>[^/]+)/commands/?$")
_SOCKET = re.compile(r"^/threads/(?P<thread_id>[^/]+)/stream/events/?$")
_READER_HEADER = READER_HEADER.encode()
# Commands that create or resume a run; their answer's `result.run_id` names it.
_RUN_COMMANDS = frozenset({"run.start", "input.respond"})
# A command answer is small; anything larger is not one worth reading.
_MAX_ANSWER = 64 * 1024

PROTOCOL_V2_CAPTURE = Capture("state", ("values", "custom"), ())
"""How the journal reads a protocol v2 run: from modes the server already gives it."""


def command_plan(params: object) -> RunPlan:
    """The plan of a run created by a protocol v2 command with these `params`."""
    params = params if isinstance(params, dict) else {}
    return RunPlan(
        kind="command",
        stateless=False,
        client_modes=protocol_v2_stream_modes(),
        capture=PROTOCOL_V2_CAPTURE,
        forced_resumable=False,
        assistant_id=params.get("assistant_id"),
        run_input=params.get("input"),
        # `run.start` names a checkpoint as a run object keeps it: in its config.
        checkpoint=run_checkpoint(params),
    )


def _command(raw: bytes | str | None) -> tuple[object, dict[str, object]] | None:
    """`(id, params)` of a run-creating command, or None for anything else."""
    if not raw:
        return None
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(payload, dict) or payload.get("method") not in _RUN_COMMANDS:
        return None
    params = payload.get("params")
    return payload.get("id"), params if isinstance(params, dict) else {}


def _run_id(raw: bytes | str | None, command_id: object) -> str | None:
    """The run a command's success answer names, if `raw` is that answer."""
    if not raw:
        return None
    try:
        answer = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(answer, dict) or answer.get("type") != "success" or answer.get("id") != command_id:
        return None
    result = answer.get("result")
    run_id = result.get("run_id") if isinstance(result, dict) else None
    return str(run_id) if run_id else None


class CommandObserverMiddleware:
    """See the module docstring. `sink_for(scope)` returns where runs go, or None to stay out."""

    def __init__(self, app: ASGIApp, sink_for: Callable[[Scope], RunSink | None]) -> None:
        self.app = app
        self._sink_for = sink_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket") or any(k == _READER_HEADER for k, _ in scope.get("headers", [])):
            await self.app(scope, receive, send)
            return
        path = route_path(scope)
        if kind == "http" and scope.get("method") == "POST" and (match := _COMMANDS.match(path)):
            sink = self._sink_for(scope)
            if sink is not None:
                await self._http_command(scope, receive, send, sink, match.group("thread_id"))
                return
        elif kind == "websocket" and (match := _SOCKET.match(path)):
            sink = self._sink_for(scope)
            if sink is not None:
                await self._socket(scope, receive, send, sink, match.group("thread_id"))
                return
        await self.app(scope, receive, send)

    async def _http_command(self, scope: Scope, receive: Receive, send: Send, sink: RunSink, thread_id: str) -> None:
        body: list[bytes] = []
        answer: list[bytes] = []
        status = 0

        async def watch_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request" and sum(map(len, body)) < _MAX_ANSWER:
                body.append(message.get("body", b""))
            return message

        async def watch_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and status == 200 and sum(map(len, answer)) < _MAX_ANSWER:
                answer.append(message.get("body", b""))
            await send(message)

        await self.app(scope, watch_receive, watch_send)
        command = _command(b"".join(body))
        if command is not None and status == 200:
            _hand_over(sink, thread_id, _run_id(b"".join(answer), command[0]), command[1])

    async def _socket(self, scope: Scope, receive: Receive, send: Send, sink: RunSink, thread_id: str) -> None:
        # Commands sent and not yet answered: id -> params.
        pending: dict[Any, dict[str, Any]] = {}

        async def watch_receive() -> Message:
            message = await receive()
            if message["type"] == "websocket.receive":
                command = _command(message.get("text") or message.get("bytes"))
                if command is not None:
                    pending[command[0]] = command[1]
            return message

        async def watch_send(message: Message) -> None:
            if pending and message["type"] == "websocket.send":
                raw = message.get("text") or message.get("bytes")
                # Events far outnumber answers: parse only what can be one.
                if raw and len(raw) < _MAX_ANSWER and ("success" in raw if isinstance(raw, str) else b"success" in raw):
                    for command_id in list(pending):
                        run_id = _run_id(raw, command_id)
                        if run_id is not None:
                            _hand_over(sink, thread_id, run_id, pending.pop(command_id))
                            break
            await send(message)

        await self.app(scope, watch_receive, watch_send)


def _hand_over(sink: RunSink, thread_id: str, run_id: str | None, params: dict[str, object]) -> None:
    if run_id is None:
        return
    try:
        sink.join(thread_id, run_id, command_plan(params))
    except Exception:  # noqa: BLE001 - journaling must never break the client's connection
        logger.exception("journal-bridge: could not observe protocol v2 run %s", run_id)
