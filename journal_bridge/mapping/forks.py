"""The `journal.fork` record of a run that went on from an earlier checkpoint, and the checkpoint's state."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from journal_bridge.host.sdk import SdkClient
from journal_bridge.model import records
from journal_bridge.model.envelope import RunEvent

__all__ = ["fork_record", "read_checkpoint"]

logger = logging.getLogger(__name__)


async def read_checkpoint(sdk: SdkClient, thread_id: str, checkpoint_id: str) -> Mapping[str, Any] | None:
    """The thread's state at `checkpoint_id`, None (logged) when the server cannot say."""
    try:
        return await sdk.threads.get_state(thread_id, checkpoint_id=checkpoint_id)
    except Exception as exc:  # noqa: BLE001 - the fork is then recorded from an unknown place
        logger.warning("journal-bridge: checkpoint %s of thread %s not readable (%s)", checkpoint_id, thread_id, exc)
        return None


async def fork_record(sdk: SdkClient, thread_id: str, run_id: str | None, checkpoint: Mapping[str, Any]) -> RunEvent:
    """The `journal.fork` record of a run that went on from `checkpoint`."""
    state = await read_checkpoint(sdk, thread_id, str(checkpoint["checkpoint_id"]))
    return records.fork(thread_id, run_id, checkpoint, state)
