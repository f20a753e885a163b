"""Whose each thread is, asked of the server once per thread, and records stamped with it."""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Mapping

from journal_bridge.host.sdk import SdkClient
from journal_bridge.model.envelope import RunEvent

__all__ = ["OWNERS", "OWNER_KEY", "ThreadOwners", "owned"]

logger = logging.getLogger(__name__)

# Where a thread's owner is kept: deer-flow's auth handler (and handlers like
# it) stamps the authenticated identity on every thread as `metadata.user_id`.
OWNER_KEY = "user_id"


class ThreadOwners:
    """Whose each thread is (`metadata.user_id`), asked of the server once per thread."""

    def __init__(self, size: int = 10_000) -> None:
        self._owners: OrderedDict[str, str | None] = OrderedDict()
        self._size = size

    async def owner_of(self, sdk: SdkClient, thread_id: str) -> str | None:
        if thread_id in self._owners:
            return self._owners[thread_id]
        try:
            thread = await sdk.threads.get(thread_id)
        except Exception as exc:  # noqa: BLE001 - a stateless run's thread, one deleted since: no owner
            logger.debug("journal-bridge: thread %s not readable (%s)", thread_id, exc)
            return None  # not remembered: a thread that appears later is asked again
        owner = (thread.get("metadata") or {}).get(OWNER_KEY) if isinstance(thread, Mapping) else None
        owner = owner if isinstance(owner, str) and owner else None
        self._owners[thread_id] = owner
        while len(self._owners) > self._size:
            self._owners.popitem(last=False)
        return owner

    def forget(self, thread_id: str) -> None:
        """The thread was deleted: one made again with its id may be someone else's."""
        self._owners.pop(thread_id, None)


OWNERS = ThreadOwners()


def owned(events: list[RunEvent], owner: str | None) -> list[RunEvent]:
    """`events` with `owner` as the owner of those that have none."""
    if owner is None:
        return events
    return [e if e.user_id is not None else dataclasses.replace(e, user_id=owner) for e in events]
