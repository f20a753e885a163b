"""What the unit tests' minimal ASGI apps share: reading a request's body."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any


async def request_body(receive: Callable[[], Awaitable[dict[str, Any]]]) -> bytes:
    """The whole body of the request `receive` delivers, however many messages it comes in."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return body
