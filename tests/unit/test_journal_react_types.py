"""journal-bridge-react declares every item shape the routes answer with, field for field.

The OpenAPI schemas (`journal_bridge.web.openapi.SCHEMAS`) are the one definition
of the shapes; `js/journal-bridge-react/src/types.ts` follows them. Each schema
listed here must have its interface there, with the same fields, and a field
the schema requires must not be optional in the declaration.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from journal_bridge.web.openapi import SCHEMAS

TYPES = Path(__file__).resolve().parents[2] / "js" / "journal-bridge-react" / "src" / "types.ts"

# Schema name -> the interface that declares it.
DECLARED = {
    "JournalBranchAlternative": "JournalBranchAlternative",
    "JournalBranchPoint": "JournalBranchPoint",
    "JournalToolCall": "JournalToolCall",
    "JournalMessageItem": "JournalMessageItem",
    "JournalSummaryMarker": "JournalSummaryMarker",
    "JournalRunStatus": "JournalRunStatus",
    "JournalInterrupt": "JournalInterrupt",
    "JournalHistoryPage": "JournalPage",
    "JournalThread": "JournalThread",
    "JournalRunSummary": "JournalRunSummary",
    "JournalRunEvent": "JournalRunEvent",
    "JournalRunEventsPage": "JournalRunEventsPage",
}
_FIELD = re.compile(r"^\s+(\w+)(\??):", re.M)


def _interfaces() -> dict[str, tuple[str | None, str]]:
    """Each interface of types.ts: the interface it extends, and its body."""
    text = TYPES.read_text("utf-8")
    found = {}
    for match in re.finditer(r"(?:export )?interface (\w+)(?:<[^>]*>)?(?: extends (\w+))? \{(.*?)\n\}", text, re.S):
        found[match.group(1)] = (match.group(2), match.group(3))
    return found


def _fields(name: str, interfaces: dict[str, tuple[str | None, str]]) -> dict[str, bool]:
    """The fields of interface `name`, its base's included: name -> optional."""
    base, body = interfaces[name]
    fields = _fields(base, interfaces) if base else {}
    for match in _FIELD.finditer(body):
        fields[match.group(1)] = match.group(2) == "?"
    return fields


@pytest.mark.parametrize("schema", sorted(DECLARED))
def test_the_declaration_has_the_schemas_fields(schema: str) -> None:
    interfaces = _interfaces()
    fields = _fields(DECLARED[schema], interfaces)
    properties = SCHEMAS[schema]["properties"]
    required = set(SCHEMAS[schema].get("required", []))
    assert set(properties) <= set(fields), f"{DECLARED[schema]} lacks {sorted(set(properties) - set(fields))}"
    if SCHEMAS[schema].get("additionalProperties") is False:
        assert set(fields) == set(properties), f"{DECLARED[schema]} declares {sorted(set(fields) - set(properties))}"
    assert not [name for name in required if fields[name]], f"{DECLARED[schema]}: required fields declared optional"


def test_every_item_and_page_schema_is_declared() -> None:
    shapes = {name for name, schema in SCHEMAS.items() if "properties" in schema}
    assert shapes - set(DECLARED) <= {
        "JournalThreadList", "JournalRunSummaryList", "JournalMarkersPage", "JournalRepairResult", "JournalHealth",
    }
