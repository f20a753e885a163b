"""The history helper of deer-flow's summarize-marker design (2026-04-11),
reimplemented from its description to read journals the way it would.

The design has deer-flow's RunJournal write a `middleware:summarize` row in
category `middleware` whose content is `{"role": "system", "content": <the
summary>}` and whose metadata is `{"replaced_count": N}`; its history helper
turns every such row into `{"id": "summary-marker-<seq>", "type":
"summary_marker", "replaced_count": meta.get("replaced_count", 0), "summary":
content.get("content", ""), "run_id": ...}` beside the message rows (content
dicts with a `type`), and its frontend shows "N messages condensed" with the
summary behind a toggle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["design_history", "design_marker", "condensed_label"]


def design_marker(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The design's marker for one row (a dict with `seq`, `run_id`,
    `event_type`, `category`, `content`, `metadata`), or None for another row."""
    if row.get("category") != "middleware" or row.get("event_type") != "middleware:summarize":
        return None
    meta = row.get("metadata") or {}
    raw = row.get("content")
    return {
        "id": f"summary-marker-{row['seq']}",
        "type": "summary_marker",
        "replaced_count": meta.get("replaced_count", 0),
        "summary": (raw or {}).get("content", "") if isinstance(raw, dict) else "",
        "run_id": row.get("run_id"),
    }


def design_history(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The design's history of a thread's rows in seq order: message rows (their
    content, with `run_id`) and its markers where they happened."""
    items = []
    for row in rows:
        marker = design_marker(row)
        if marker is not None:
            items.append(marker)
            continue
        raw = row.get("content")
        if row.get("category") == "message" and isinstance(raw, dict) and "type" in raw:
            items.append({**raw, "run_id": row.get("run_id")})
    return items


def condensed_label(marker: Mapping[str, Any]) -> str:
    """What the design's frontend shows on a marker's card."""
    return f"{marker['replaced_count']} messages condensed"
