"""Records checked against deer-flow's run event stream contract.

`contracts/run_event_stream_contract.json` is deer-flow's file (repository
`bytedance/deer-flow`, `contracts/run_event_stream_contract.json`, commit
f1f4af99b), copied unchanged.

`contract_violations(record)` lists what a record breaks: the envelope
(`record_schema`), then the content and metadata schemas of its event type
(or of the `middleware:{tag}` pattern, with its event type and tag schemas).
Event types the contract does not know are held to the envelope only: its
consumers ignore them. `assert_contract(records)` fails naming every record
that breaks it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

CONTRACT_PATH = Path(__file__).resolve().parent / "contracts" / "run_event_stream_contract.json"


@cache
def contract() -> dict[str, Any]:
    return json.loads(CONTRACT_PATH.read_text())


@cache
def _validators() -> tuple[Draft202012Validator, dict[str, tuple[Any, Any, str]], list[dict[str, Any]]]:
    spec = contract()
    envelope = Draft202012Validator(spec["record_schema"])
    by_type = {
        event["event_type"]: (
            Draft202012Validator(event["content_schema"]),
            Draft202012Validator(event["metadata_schema"]),
            event["category"],
        )
        for event in spec["events"]
    }
    return envelope, by_type, spec["dynamic_event_patterns"]


def contract_violations(record: Any) -> list[str]:
    data = record.to_dict() if hasattr(record, "to_dict") else dict(record)
    envelope, by_type, patterns = _validators()
    problems = [f"envelope: {e.message}" for e in envelope.iter_errors(data)]
    try:
        created = datetime.fromisoformat(data.get("created_at"))
        if created.tzinfo is None:
            problems.append("created_at: no timezone")
    except (TypeError, ValueError):
        problems.append(f"created_at: not ISO-8601: {data.get('created_at')!r}")
    kind = data.get("event_type")
    schemas = by_type.get(kind)
    if schemas is None:
        for pattern in patterns:
            stem = pattern["pattern"].split("{")[0]
            if isinstance(kind, str) and kind.startswith(stem):
                schemas = (
                    Draft202012Validator(pattern["content_schema"]),
                    Draft202012Validator(pattern["metadata_schema"]),
                    pattern["category"],
                )
                type_schema = Draft202012Validator(pattern["event_type_schema"])
                tag_schema = Draft202012Validator(pattern["tag_schema"])
                problems += [f"event_type: {e.message}" for e in type_schema.iter_errors(kind)]
                problems += [f"tag: {e.message}" for e in tag_schema.iter_errors(kind[len(stem):])]
    if schemas is None:
        return problems
    content, metadata, category = schemas
    if data.get("category") != category:
        problems.append(f"category: {data.get('category')!r}, the contract says {category!r}")
    problems += [f"{kind} content: {e.message}" for e in content.iter_errors(data.get("content"))]
    problems += [f"{kind} metadata: {e.message}" for e in metadata.iter_errors(data.get("metadata"))]
    return problems


def assert_contract(records: Iterable[Any]) -> None:
    """Every record keeps the contract; else fail naming each record and what it breaks."""
    broken = {}
    for record in records:
        problems = contract_violations(record)
        if problems:
            data = record.to_dict() if hasattr(record, "to_dict") else dict(record)
            broken[f"seq {data.get('seq')} {data.get('event_type')}"] = (problems, data)
    assert not broken, broken


async def journaled_records(store_url: str, thread_id: str) -> list[Any]:
    """Every record journaled for `thread_id`, of every category, in seq order,
    each checked against the contract."""
    from journal_bridge.model.envelope import ERROR, MESSAGE, MIDDLEWARE, OUTPUTS, TRACE
    from journal_bridge.store import open_store

    async with open_store(store_url) as store:
        records = await store.list_timeline(thread_id, categories=(TRACE, MESSAGE, MIDDLEWARE, OUTPUTS, ERROR), limit=500)
    assert len(records) < 500, "a thread this long needs paging here"
    assert_contract(records)
    return records
