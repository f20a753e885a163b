"""Answers of the server about an assistant, asked once per assistant and remembered."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from journal_bridge.host.sdk import SdkClient

__all__ = ["OncePerAssistant"]

logger = logging.getLogger(__name__)
T = TypeVar("T")


class OncePerAssistant(Generic[T]):
    """One answer of the server about each assistant, asked once per assistant (the
    newest `size` kept). An assistant the server cannot answer for (deleted since,
    an SDK error) gets `unknown`, and is asked again next time."""

    def __init__(self, ask: Callable[[SdkClient, str], Awaitable[T]], unknown: T, what: str, size: int = 1024) -> None:
        self._ask = ask
        self._unknown = unknown
        self._what = what
        self._answers: OrderedDict[str, T] = OrderedDict()
        self._size = size

    async def of(self, sdk: SdkClient, assistant_id: str) -> T:
        if assistant_id not in self._answers:
            try:
                answer = await self._ask(sdk, assistant_id)
            except Exception as exc:  # noqa: BLE001 - the run is read without this answer
                logger.debug("journal-bridge: %s of assistant %s not readable (%s)", self._what, assistant_id, exc)
                return self._unknown
            self._answers[assistant_id] = answer
            while len(self._answers) > self._size:
                self._answers.popitem(last=False)
        return self._answers[assistant_id]
