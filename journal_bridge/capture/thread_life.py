"""ASGI middleware that lets the journal follow what happens to a thread besides runs.

The server deletes threads (`DELETE /threads/{id}`, `POST /threads/prune`
with strategy `delete`), copies them (`POST /threads/{id}/copy`) and forks
them by a state update from an earlier checkpoint (`POST /threads/{id}/state`
naming a `checkpoint` or `checkpoint_id`). Once the server has answered such a
request with success, and before that answer reaches the client, the
middleware tells the journal (`ThreadSink`), so a client that reads the
journal right after its request already sees the result: a deleted thread's
journal is gone, a copy has the source's journal.

A prune with strategy `keep_latest` keeps the thread and its latest state: the
journal keeps the whole conversation, which is what it is for.

Everything else passes through untouched; the request body of a prune or a
state update is read once and handed on unchanged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from journal_bridge.capture.intercept import READER_HEADER, route_path
from journal_bridge.capture.run_requests import requested_checkpoint

logger = logging.getLogger(__name__)

__all__ = ["ThreadLifeMiddleware", "ThreadSink"]

_THREAD = re.compile(r"^/threads/(?P<thread_id>[^/]+)/?$")
_COPY = re.compile(r"^/threads/(?P<thread_id>[^/]+)/copy/?$")
_STATE = re.compile(r"^/threads/(?P<thread_id>[^/]+)/state/?$")
_PRUNE = re.compile(r"^/threads/prune/?$")
_READER_HEADER = READER_HEADER.encode()
# A prune or state-update body larger than this is not the journal's business.
_MAX_BODY = 1 << 20


class ThreadSink(Protocol):
    """What the journal does when a thread changes outside a run."""

    async def deleted(self, thread_ids: list[str]) -> None: ...

    async def copied(self, source_id: str, copy_id: str) -> None: ...

    async def state_forked(self, thread_id: str, checkpoint: dict[str, object], result: object) -> None: ...


class ThreadLifeMiddleware:
    """See the module docstring. `sink_for(scope)` returns the journal, or None to stay out."""

    def __init__(self, app: ASGIApp, sink_for: Callable[[Scope], ThreadSink | None]) -> None:
        self.app = app
        self._sink_for = sink_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or any(k == _READER_HEADER for k, _ in scope["headers"]):
            await self.app(scope, receive, send)
            return
        method, path = scope.get("method", ""), route_path(scope)
        action: Callable[[ThreadSink, bytes, bytes], Any] | None = None
        wants_body = False
        if method == "DELETE" and (m := _THREAD.match(path)):
            thread_id = m["thread_id"]

            async def action(sink: ThreadSink, _req: bytes, _resp: bytes) -> None:
                await sink.deleted([thread_id])
        elif method == "POST" and _PRUNE.match(path):
            wants_body = True
            action = _pruned
        elif method == "POST" and (m := _COPY.match(path)):
            source = m["thread_id"]

            async def action(sink: ThreadSink, _req: bytes, resp: bytes) -> None:
                copy = _json(resp)
                if isinstance(copy, dict) and copy.get("thread_id"):
                    await sink.copied(source, str(copy["thread_id"]))
        elif method == "POST" and (m := _STATE.match(path)):
            wants_body = True
            thread_id = m["thread_id"]

            async def action(sink: ThreadSink, req: bytes, resp: bytes) -> None:
                checkpoint = requested_checkpoint(_json(req))
                if checkpoint is not None:
                    await sink.state_forked(thread_id, checkpoint, _json(resp))
        sink = self._sink_for(scope) if action is not None else None
        if action is None or sink is None:
            await self.app(scope, receive, send)
            return
        body = b""
        if wants_body:
            body, receive = await _read_body(receive)
        await self.app(scope, receive, _AfterSuccess(send, lambda resp: action(sink, body, resp)))


async def _pruned(sink: ThreadSink, request: bytes, _response: bytes) -> None:
    payload = _json(request)
    if not isinstance(payload, dict) or payload.get("strategy", "delete") != "delete":
        return
    ids = payload.get("thread_ids")
    if isinstance(ids, list) and ids:
        await sink.deleted([str(i) for i in ids])


def _json(body: bytes) -> object:
    try:
        return orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return None


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The request body (up to `_MAX_BODY`, else empty) and a `receive` that replays it."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")

    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return (body if size <= _MAX_BODY else b""), replay


class _AfterSuccess:
    """Wraps `send`: on a 2xx answer, runs `then(response_body)` before the body's last part goes out."""

    def __init__(self, send: Send, then: Callable[[bytes], Awaitable[object]]) -> None:
        self._send = send
        self._then = then
        self._ok = False
        self._body: list[bytes] = []

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._ok = 200 <= int(message.get("status", 500)) < 300
        elif message["type"] == "http.response.body" and self._ok:
            self._body.append(message.get("body", b""))
            if not message.get("more_body", False):
                self._ok = False
                try:
                    await self._then(b"".join(self._body))
                except Exception:  # noqa: BLE001 - the client's answer never depends on the journal
                    logger.exception("journal-bridge: could not follow a thread change")
        await self._send(message)
