"""A run the runtime executed again: its attempts, and the fork that keeps one of them in the history.

When the worker executing a run dies (a process killed, its heartbeat gone),
langgraph-runtime-pg queues the run again and another worker executes it:
same run id, the next attempt. The attempt shows in the run's `metadata`
frame (`{"run_id", "attempt"}`, the second attempt's frames following the
first's in the run's resumable stream) and in the checkpoints it writes
(`metadata.run_attempt`). The graph goes on from the run's last checkpoint:
what the killed attempt checkpointed stays the run's, and what it journaled
past that checkpoint (an answer no checkpoint holds) is an attempt that did
not happen for the thread. The in-memory runtime does the same after a
restart, from the checkpoints it had flushed, or from the run's input.

Once a run executed again has ended, a `records.superseded_attempt` fork
names the messages the thread's checkpoints hold of it -- those the killed
attempt checkpointed, or saved as a finished task's writes that the next
attempt took over, and the next attempt's own: the history shows the run's
records of those messages only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from journal_bridge.host.sdk import SdkClient
from journal_bridge.model import records
from journal_bridge.model.envelope import RunEvent

logger = logging.getLogger(__name__)

__all__ = ["checkpoint_attempt", "checkpoint_run", "frame_attempt", "run_message_ids", "superseding_fork"]

_PAGE = 100
# Pages of checkpoints walked back from the head at most, looking for the run's first one.
_MAX_PAGES = 20


def frame_attempt(data: Any) -> int | None:
    """The attempt a run's `metadata` frame announces (1 for the first), None when it names none."""
    attempt = data.get("attempt") if isinstance(data, Mapping) else None
    return attempt if isinstance(attempt, int) and not isinstance(attempt, bool) and attempt >= 1 else None


def _metadata(state: Mapping[str, Any]) -> Mapping[str, object]:
    metadata = state.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def checkpoint_attempt(state: Mapping[str, Any]) -> int:
    """The attempt of its run that wrote a checkpoint (1 when the runtime does not say)."""
    attempt = _metadata(state).get("run_attempt")
    return attempt if isinstance(attempt, int) and not isinstance(attempt, bool) and attempt >= 1 else 1


def checkpoint_run(state: Mapping[str, Any]) -> str | None:
    """The run that wrote a checkpoint, None when its metadata names none."""
    run_id = _metadata(state).get("run_id")
    return str(run_id) if run_id else None


def _ids(state: Mapping[str, Any]) -> set[str]:
    return {str(m["id"]) for m in records.state_messages(state) if m.get("id")}


def run_message_ids(chain: Iterable[Mapping[str, Any]], run_id: str) -> set[str]:
    """The message ids run `run_id`'s checkpoints hold that the thread did not hold before the run.

    `chain`: the thread's branch, newest first; the checkpoints of later runs
    are passed over. Empty when the branch holds no checkpoint of the run.
    """
    held: set[str] = set()
    found = False
    for state in chain:
        if checkpoint_run(state) == run_id:
            found = True
            held |= _ids(state)
        elif found:
            return held - _ids(state)
    return held


async def _chain(sdk: SdkClient, thread_id: str, run_id: str) -> list[Mapping[str, Any]]:
    """The thread's branch, newest first, as far back as it takes to pass the run's first checkpoint."""
    states: list[Mapping[str, Any]] = []
    before: Any = None
    for _ in range(_MAX_PAGES):
        page = await sdk.threads.get_history(thread_id, limit=_PAGE, **({"before": before} if before else {}))
        page = [s for s in page if not (s.get("checkpoint") or {}).get("checkpoint_ns")]
        states.extend(page)
        if len(page) < _PAGE:
            break
        before = page[-1]["checkpoint"]
        runs = [checkpoint_run(s) for s in states]
        if run_id in runs and any(r != run_id for r in runs[runs.index(run_id):]):
            break  # the run's first checkpoint and the one before it are in
    by_id = {str((s.get("checkpoint") or {}).get("checkpoint_id")): s for s in states}
    chain = []
    state: Mapping[str, Any] | None = states[0] if states else None
    while state is not None:
        chain.append(state)
        parent = (state.get("parent_checkpoint") or {}).get("checkpoint_id")
        state = by_id.get(str(parent)) if parent else None
    return chain


async def superseding_fork(sdk: SdkClient, thread_id: str, run_id: str, attempt: int) -> RunEvent | None:
    """The fork of attempt `attempt` of a run, once it ended: the messages the thread's
    checkpoints hold of the run are kept, whichever attempt journaled them. None
    (logged) when the server cannot say, so nothing is hidden on a guess."""
    try:
        chain = await _chain(sdk, thread_id, run_id)
    except Exception as exc:  # noqa: BLE001 - the attempt is journaled all the same, as it came
        logger.warning("journal-bridge: checkpoints of thread %s not readable (%s): attempt %d of run %s "
                       "not told apart from the earlier ones", thread_id, exc, attempt, run_id)
        return None
    return records.superseded_attempt(thread_id, run_id, attempt, run_message_ids(chain, run_id))
