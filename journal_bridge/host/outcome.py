"""How a run ended, as the server tells it once the run's stream is over.

A run's stream does not always say how the run ended:

- a failure is an `error` part, which the server does not keep for replay: a
  reader that joined after it was sent never sees it;
- a cancelled run's stream just stops: nothing in `events`, `values` or
  `custom` says why;
- a run that paused at `interrupt()` shows what it waits on in `values`
  (`__interrupt__`), never in `events`.

`read_outcome` asks the server: the run's status (`runs.get`, or the
runtime itself for the plugin's in-process client: `success`,
`error`, `timeout`, `interrupted` for a cancelled run; a run gone while its
thread remains was cancelled with `rollback`), the error the thread keeps
(only its latest run's, so it is used only when its kind matches the status),
and, when asked, the interrupts of the run's last checkpoint, found by the
`run_id` in the checkpoint's metadata, so a later run of the thread (a quick
resume) is never mistaken for it. The mappers turn the answer into records
(`journal_bridge.model.records`).

A run rolled back is deleted with its checkpoints by langgraph-runtime-inmem;
langgraph-runtime-pg 0.11 deletes the run only, and the thread goes on from
the run's checkpoints (`rollback_removed_checkpoints` tells which).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from journal_bridge.host.compat import cancel_reason
from journal_bridge.host.runtime_reads import RuntimeUnreadable
from journal_bridge.model.records import interrupt_values
from journal_bridge.host.sdk import SdkClient

logger = logging.getLogger(__name__)

__all__ = [
    "CANCELLED",
    "COMPLETED",
    "ERRORED",
    "INTERRUPTED",
    "RunOutcome",
    "read_outcome",
    "rollback_removed_checkpoints",
]

# How a journaled run ended (`mapper.ending`), counted in health.
COMPLETED = "completed"
ERRORED = "errored"
CANCELLED = "cancelled"
INTERRUPTED = "interrupted"

ROLLBACK = "rollback"
_CANCELLED_STATUSES = frozenset({"interrupted", ROLLBACK})
_FAILED_STATUSES = frozenset({"error", "timeout"})
# The error types the server gives a thread whose run was cancelled.
_CANCEL_ERRORS = {"UserInterrupt": "interrupt", "UserRollback": ROLLBACK}


@dataclass(frozen=True)
class RunOutcome:
    """The server's word on a finished run; `status` None when it could not be read."""

    status: str | None
    error: Mapping[str, Any] | None = None
    interrupts: tuple[dict[str, Any], ...] = ()

    @property
    def cancelled(self) -> bool:
        return self.status in _CANCELLED_STATUSES

    @property
    def failed(self) -> bool:
        return self.status in _FAILED_STATUSES

    @property
    def reason(self) -> str | None:
        """The reason for the cancel, if the server kept it."""
        return cancel_reason(self.error)

    @property
    def cancel_action(self) -> str:
        if self.status == ROLLBACK:
            return ROLLBACK
        return _CANCEL_ERRORS.get(str((self.error or {}).get("error")), "interrupt")

    def failure(self) -> dict[str, object]:
        """The failure as an `error` part would have described it."""
        if self.error is not None:
            return dict(self.error)
        kind = "TimeoutError" if self.status == "timeout" else "Error"
        return {"error": kind, "message": f"the run ended with status {self.status}"}


def _not_found(exc: Exception) -> bool:
    return getattr(getattr(exc, "response", None), "status_code", None) == 404


async def read_outcome(
    sdk: SdkClient, thread_id: str, run_id: str, *, status: str | None = None, interrupts: bool = False
) -> RunOutcome:
    """The outcome of a run whose stream has ended. `status` given: not read again.

    Never raises: what cannot be read is left out (status None: unknown).
    """
    if status is None:
        try:
            known, status = await _run_status(sdk, thread_id, run_id)
        except Exception as exc:  # noqa: BLE001 - an unknown outcome is journaled as before
            logger.warning("journal-bridge: could not read the status of run %s: %s", run_id, exc)
            return RunOutcome(None)
        if not known:
            status = await _gone(sdk, thread_id)
            if status is None:
                return RunOutcome(None)
    error = None
    if status in _CANCELLED_STATUSES or status in _FAILED_STATUSES:
        error = await _thread_error(sdk, thread_id, run_id, status)
    found: tuple[dict[str, Any], ...] = ()
    if interrupts and status == "success":
        try:
            history = await sdk.threads.get_history(thread_id, limit=1, metadata={"run_id": str(run_id)})
        except Exception as exc:  # noqa: BLE001
            logger.warning("journal-bridge: could not read the last checkpoint of run %s: %s", run_id, exc)
        else:
            if history:
                found = tuple(interrupt_values(history[0].get("interrupts")))
    return RunOutcome(status, error, found)


async def rollback_removed_checkpoints(
    sdk: SdkClient, thread_id: str, run_id: str, *, wait: float = 5.0, poll: float = 0.1
) -> bool:
    """Whether the server removed a rolled back run's checkpoints with it.

    Asked once the run is gone (`wait` seconds at most: a run rolled back as
    its stream ended may still be being deleted); the runtimes that remove the
    checkpoints remove them before the run. True when the server cannot say:
    the run's records then leave the history, as a rollback's do."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    try:
        while (await _run_status(sdk, thread_id, run_id))[0] and loop.time() < deadline:
            await asyncio.sleep(poll)
        kept = await sdk.threads.get_history(thread_id, limit=1, metadata={"run_id": str(run_id)})
    except Exception as exc:  # noqa: BLE001
        logger.warning("journal-bridge: could not tell whether run %s's checkpoints were rolled back: %s", run_id, exc)
        return True
    return not kept


async def _run_status(sdk: SdkClient, thread_id: str, run_id: str) -> tuple[bool, str | None]:
    """`(found, status)` of the run: from the server's runtime where the client can
    read it in process (`in_process.InProcessClient`), else -- or when that read
    fails -- through `runs.get`."""
    run_status = getattr(sdk, "run_status", None)
    if run_status is not None:
        try:
            return await run_status(thread_id, run_id)
        except RuntimeUnreadable:
            pass
        except Exception as exc:  # noqa: BLE001 - the server's route may still answer
            logger.debug("journal-bridge: runtime read of run %s failed (%s); asking runs.get", run_id, exc)
    try:
        run = await sdk.runs.get(thread_id, run_id)
    except Exception as exc:
        if _not_found(exc):
            return False, None
        raise
    return True, run.get("status")


async def _gone(sdk: SdkClient, thread_id: str) -> str | None:
    """A run that is not found: rolled back if its thread is still there; a
    stateless run's thread goes with its run, which says nothing."""
    try:
        await sdk.threads.get(thread_id)
    except Exception:  # noqa: BLE001
        return None
    return ROLLBACK


async def _thread_error(sdk: SdkClient, thread_id: str, run_id: str, status: str) -> Mapping[str, object] | None:
    cancelled = status in _CANCELLED_STATUSES
    if status != ROLLBACK:
        # A cancel marks the run at once, the thread's error follows when the
        # run is done: wait for that (at once for a run that is).
        with contextlib.suppress(Exception):
            await sdk.runs.join(thread_id, run_id)
    try:
        error = (await sdk.threads.get(thread_id)).get("error")
    except Exception:  # noqa: BLE001 - the message is a detail; the status already says what happened
        return None
    if not isinstance(error, Mapping):
        return None
    # The thread keeps its latest run's error: use it only if it is of this run's kind.
    if (str(error.get("error")) in _CANCEL_ERRORS) != cancelled:
        return None
    return error
