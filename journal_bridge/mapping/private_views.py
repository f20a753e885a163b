"""Compactions a graph keeps in private state keys: read from the run's checkpoints.

A harness may compact what its model sees without touching `messages`, and
keep the condensed view in a state key its graph leaves out of its output
(deepagents' `_summarization_event`, a `PrivateStateAttr`). The server streams
a run's `values` with the graph's output keys only, unless the run streams
`events`: on the `values` + `custom` path such a compaction shows in no part.
The run's checkpoints hold every key, so for a graph whose state schema has
such a key (asked once per assistant, `PRIVATE_VIEWS`) the state path holds
the run's records until it ends, reads its checkpoints, and puts one marker
per new condensed view before the first message of the checkpoint that shows
it (`with_markers`) -- what the `events` path finds in the run's states.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence

from journal_bridge.host.assistant_answers import OncePerAssistant
from journal_bridge.host.sdk import SdkClient
from journal_bridge.mapping.compactions import Compactions, message_ids, summary_ids
from journal_bridge.model import records
from journal_bridge.model.envelope import RunEvent

logger = logging.getLogger(__name__)

__all__ = ["PRIVATE_VIEWS", "with_markers"]

# What a condensed view's schema names (`compactions.condensed_view`).
_VIEW_FIELDS = ('"cutoff_index"', '"summarized_message_ids"')
# A run's checkpoints read at most.
_RUN_CHECKPOINTS = 500


def _keeps_private_views(schemas: Mapping[str, object]) -> bool:
    """Whether a graph's state has keys its output leaves out, and its state a condensed view's fields."""
    state = schemas.get("state_schema")
    output = schemas.get("output_schema")
    if not isinstance(state, Mapping):
        return False
    state_keys = set((state.get("properties") or {}))
    output_keys = set(((output or {}) if isinstance(output, Mapping) else {}).get("properties") or {})
    private = state_keys - output_keys
    if not private:
        return False
    # A key named for a summary (its type may have no schema), or a view's fields in the schema.
    return any("summar" in key.lower() for key in private) or any(f in json.dumps(state) for f in _VIEW_FIELDS)


async def _asks_for_checkpoints(sdk: SdkClient, assistant_id: str) -> bool:
    return _keeps_private_views(await sdk.assistants.get_schemas(assistant_id))


# Which assistants' graphs keep a condensed view in a private key (schemas unreadable: read as any other).
PRIVATE_VIEWS = OncePerAssistant(_asks_for_checkpoints, False, "the schemas")


async def with_markers(
    sdk: SdkClient, thread_id: str, run_id: str, held: Sequence[RunEvent], compactions: Compactions
) -> list[RunEvent]:
    """`held` (the run's records, in order) with a marker for each condensed view the
    run's checkpoints show that `compactions` (the run's own) has not marked."""
    try:
        states = await sdk.threads.get_history(thread_id, limit=_RUN_CHECKPOINTS, metadata={"run_id": run_id})
    except Exception as exc:  # noqa: BLE001 - the records are journaled without these markers
        logger.warning("journal-bridge: checkpoints of run %s not readable (%s)", run_id, exc)
        return list(held)
    out = list(held)
    previous: set[str] | None = None
    for state in reversed(list(states)):  # oldest first
        if (state.get("checkpoint") or {}).get("checkpoint_ns"):
            continue
        values = state.get("values") if isinstance(state.get("values"), Mapping) else {}
        messages = records.state_messages(state)
        ids = message_ids(messages)
        rest = {k: v for k, v in values.items() if k != "messages"}
        if previous is None:
            compactions.seen_view(rest, ids)
        elif (draft := compactions.from_view(rest, ids, summary_ids(messages))) is not None:
            marker = records.record(thread_id, run_id, draft)
            first_new = next((i for i in ids if i not in previous), None)
            at = next((n for n, r in enumerate(out) if r.category == "message"
                       and isinstance(r.content, Mapping) and str(r.content.get("id")) == first_new), len(out))
            out.insert(at, marker)
        previous = set(ids)
    return out
