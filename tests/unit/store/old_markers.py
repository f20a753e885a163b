"""Markers as journal-bridge wrote them before they carried the fields of
deer-flow's summarize-marker design, for the upgrade tests of the SQL stores.

`ROWS` is one thread as an older journal holds it, `(run_id, event_type,
category, content, metadata)` at seq 1, 2, ...; `AFTER` is each row's content
and metadata once the store upgraded it. Only the old markers change; a marker
written since, rows of other types and deer-flow's own rows stay as they were.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from journal_bridge.model.envelope import ERROR, MESSAGE, MIDDLEWARE, OUTPUTS, TRACE, make_event
from journal_bridge.projection.history import project
from journal_bridge.store import RunEventStore, open_store
from tests.harness.marker_spec import design_history

THREAD = "old-markers"
CREATED_AT = "2025-01-01T00:00:00+00:00"


def _marker(changes: dict[str, Any], name: str = "TrackingSummarizationMiddleware") -> dict[str, Any]:
    return {"name": name, "hook": "before_model", "action": "summarize", "changes": changes}


_FULL = {
    "event": "summarization",
    "replaced_count": 6,
    "condensed_count": 5,
    "preserved_count": 4,
    "replaced_message_ids": ["s0", "m1", "m2", "m3", "m4", "m5"],
    "previous_summary_ids": ["s0"],
    "summary_message_id": "s1",
    "summary": "The user asked about Paris twice.",
}
# A backfill of a summary already in the oldest checkpoint: what it replaced is gone.
_INCOMPLETE = {
    "event": "summarization",
    "middleware": "SummarizationMiddleware",
    "replaced_count": None,
    "condensed_count": None,
    "preserved_count": 3,
    "replaced_message_ids": None,
    "summary_message_id": "s2",
    "summary": "Earlier: additions.",
}
# Written before `condensed_count` existed, by a middleware that left no summary.
_OLDEST = {"replaced_count": 2, "preserved_count": 1, "replaced_message_ids": ["m6", "m7"], "summary": None}
_NEW = {**_FULL, "summary_message_id": "s3", "summary": "Written since."}

ROWS: list[tuple[str, str, str, Any, dict[str, Any]]] = [
    ("r1", "run.start", TRACE, {"chain": "agent"}, {"caller": "lead_agent"}),
    ("r1", "llm.human.input", MESSAGE, {"type": "human", "content": "hi", "id": "m1"}, {"caller": "lead_agent"}),
    ("r1", "middleware:summarize", MIDDLEWARE, _marker(_FULL), {}),
    ("r2", "middleware:summarize", MIDDLEWARE, _marker(_INCOMPLETE, "SummarizationMiddleware"),
     {"source": "backfill", "incomplete": True}),
    ("r3", "middleware:summarize", MIDDLEWARE, _marker(_OLDEST), {}),
    # Written since: already has every field, one of them its own.
    ("r4", "middleware:summarize", MIDDLEWARE,
     {**_marker(_NEW), "role": "system", "content": "Written since."},
     {"replaced_count": 6, "preserved_count": 4, "condensed_count": 7}),
    # deer-flow's earlier RunJournal, as the design has it write a marker.
    ("r5", "middleware:summarize", MIDDLEWARE, {"role": "system", "content": "deer-flow's own"},
     {"replaced_count": 3}),
    ("r5", "middleware:summarize", MIDDLEWARE, "a marker as text", {}),
    ("r5", "middleware:guardrail", MIDDLEWARE,
     {"name": "Guardrail", "hook": "before_tool", "action": "deny", "changes": {"summary": "no", "replaced_count": 1}}, {}),
    ("r5", "run.end", OUTPUTS, {"output_keys": ["messages"]}, {"status": "success"}),
]


def _after() -> list[tuple[Any, dict[str, Any]]]:
    after = [(copy.deepcopy(content), dict(metadata)) for _, _, _, content, metadata in ROWS]
    after[2][0].update(role="system", content="The user asked about Paris twice.")
    after[2][1].update(replaced_count=6, preserved_count=4, condensed_count=5)
    after[3][0].update(role="system", content="Earlier: additions.")
    after[3][1].update(preserved_count=3)
    after[4][0].update(role="system", content="")
    after[4][1].update(replaced_count=2, preserved_count=1)
    return after


AFTER = _after()


def old_records() -> list[Any]:
    """`ROWS` as the records they were before the upgrade."""
    return [
        replace(make_event(thread_id=THREAD, run_id=run, event_type=etype, category=cat, content=content,
                           metadata=metadata, created_at=CREATED_AT), seq=seq)
        for seq, (run, etype, cat, content, metadata) in enumerate(ROWS, 1)
    ]


async def write_old_markers(url: str, **options: Any) -> None:
    """`ROWS` journaled at `url` as a store writes them (a write never changes a
    record); the test then sets the schema version back one step, to where a
    journal that could hold them was."""
    async with open_store(url, **options) as store:
        await store.put_batch([replace(r, seq=None) for r in old_records()])


async def check_markers_upgraded(store: RunEventStore) -> None:
    """The store holds `AFTER`; the journal's history shows the markers it showed
    before, and the design's helper now reads their counts and summaries."""
    records = await store.list_timeline(THREAD, categories=(TRACE, MESSAGE, MIDDLEWARE, OUTPUTS, ERROR), limit=100)
    assert [(r.content, r.metadata) for r in records] == AFTER

    def without_times(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in item.items() if k != "created_at"} for item in items]

    assert without_times(project(records)) == without_times(project(old_records()))
    markers = [i for i in design_history(r.to_dict() for r in records) if i["type"] == "summary_marker"]
    assert [(m["id"], m["replaced_count"], m["summary"]) for m in markers] == [
        ("summary-marker-3", 6, "The user asked about Paris twice."),
        # The design's reader counts an unknown count as 0, as it does a missing one.
        ("summary-marker-4", 0, "Earlier: additions."),
        ("summary-marker-5", 2, ""),
        ("summary-marker-6", 6, "Written since."),
        ("summary-marker-7", 3, "deer-flow's own"),
        ("summary-marker-8", 0, ""),
    ]
