"""Copying a thread's journal into another thread, as `POST /threads/{id}/copy` copies its checkpoints.

The copy gets every record of the source, in seq order, with its run, type,
content, metadata, time, owner and source key; the store numbers them anew.
References to seqs inside records -- a displaced record's `metadata.anchor_seq`
and the `journal.order` lists of displaced records -- are renumbered to the
copy's seqs, so the copy's history is the source's, item for item. A copy
repeated after an interruption completes it: keys already in the copy are not
appended again.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from journal_bridge.model.envelope import ERROR, MESSAGE, MIDDLEWARE, OUTPUTS, TRACE, RunEvent
from journal_bridge.projection.history import ORDER_EVENT, anchor_of
from journal_bridge.store import RunEventStore

__all__ = ["copy_journal"]

_CATEGORIES = (MESSAGE, MIDDLEWARE, TRACE, OUTPUTS, ERROR)
_PAGE = 500


def _renumbered(event: RunEvent, target_id: str, seqs: dict[int, int]) -> RunEvent:
    metadata = event.metadata
    anchor = anchor_of(event)
    if anchor is not None and anchor in seqs:
        metadata = {**metadata, "anchor_seq": seqs[anchor]}
    content = event.content
    if event.event_type == ORDER_EVENT and isinstance(content, dict) and isinstance(content.get("displaced"), dict):
        displaced = {
            str(seqs.get(int(seq), seq)) if str(seq).isdigit() else seq: seqs.get(a, a) if isinstance(a, int) else a
            for seq, a in content["displaced"].items()
        }
        content = {**content, "displaced": displaced}
    return dataclasses.replace(event, thread_id=target_id, seq=None, metadata=metadata, content=content)


def _references(event: RunEvent) -> set[int]:
    """The seqs of other records that `event` names."""
    found: set[int] = set()
    anchor = anchor_of(event)
    if anchor is not None:
        found.add(anchor)
    if event.event_type == ORDER_EVENT and isinstance(event.content, dict):
        for seq, a in (event.content.get("displaced") or {}).items():
            if str(seq).isdigit():
                found.add(int(seq))
            if isinstance(a, int):
                found.add(a)
    return found


async def copy_journal(store: RunEventStore, source_id: str, target_id: str) -> int:
    """Append the journal of `source_id` to `target_id`; how many records were copied."""
    seqs: dict[int, int] = {}
    copied = 0
    after = 0
    while True:
        records = await store.list_timeline(source_id, categories=_CATEGORIES, limit=_PAGE, after_seq=after)
        batch: list[RunEvent] = []
        for record in records:
            # A record naming one of the same page's seqs waits until that one is numbered.
            if _references(record) & {r.seq for r in batch}:
                copied += await _append(store, target_id, batch, seqs)
                batch = []
            batch.append(record)
        copied += await _append(store, target_id, batch, seqs)
        if len(records) < _PAGE:
            return copied
        after = records[-1].seq  # type: ignore[assignment]


async def _append(store: RunEventStore, target_id: str, batch: list[RunEvent], seqs: dict[int, int]) -> int:
    if not batch:
        return 0
    stored: list[Any] = await store.put_batch([_renumbered(r, target_id, seqs) for r in batch])
    for old, new in zip(batch, stored, strict=True):
        seqs[old.seq] = new.seq  # type: ignore[index]
    return len(stored)

