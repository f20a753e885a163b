"""The Python shapes (`journal_bridge.model.shapes`) say what the served OpenAPI schemas say.

Every schema of `journal_bridge.web.openapi.SCHEMAS` that describes an object
has a `TypedDict` of the same name, with the same fields, the same required
ones, and for each field the type its schema gives: a string, an integer, a
list of `$ref`s, a union with null, an enum as a `Literal`. A schema without a
`type` (a value passed on as the writer gave it) is `object`; a JSON object
is `JsonObject`. `JournalHistoryItem`, a `oneOf`, is the union of its members.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import pytest

from journal_bridge.model import shapes
from journal_bridge.web.openapi import SCHEMAS

_REF = "#/components/schemas/"
_OBJECT_SCHEMAS = sorted(name for name, schema in SCHEMAS.items() if "properties" in schema)
_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def _hints(name: str) -> dict[str, Any]:
    return typing.get_type_hints(getattr(shapes, name), vars(shapes), include_extras=False)


def _members(annotation: Any) -> tuple[Any, ...]:
    if get_origin(annotation) in (Union, types.UnionType):
        return get_args(annotation)
    return (annotation,)


def _schema_of(annotation: Any) -> dict[str, Any]:
    """The JSON schema an annotation stands for, in the form SCHEMAS writes it
    (descriptions and bounds left out)."""
    if annotation is object:
        return {}
    members = _members(annotation)
    if len(members) > 1:
        schemas = [_schema_of(member) for member in members]
        refs = [s for s in schemas if "$ref" in s]
        if refs:
            # A union of shapes is the schema whose `oneOf` lists them (JournalHistoryItem).
            names = sorted(ref["$ref"] for ref in refs)
            (found,) = [
                name for name, schema in SCHEMAS.items()
                if sorted(ref["$ref"] for ref in schema.get("oneOf", [])) == names
            ]
            return {"$ref": f"{_REF}{found}"}
        merged: dict[str, Any] = {"type": [s["type"] for s in schemas]}
        for schema in schemas:
            merged.update({k: v for k, v in schema.items() if k != "type"})
        return merged
    origin = get_origin(annotation)
    if origin is Literal:
        values = list(get_args(annotation))
        return {"type": "string", "enum": values}
    if origin is list:
        (item,) = get_args(annotation)
        return {"type": "array", **({"items": _schema_of(item)} if item is not object else {})}
    if origin is dict or annotation is dict:
        return {"type": "object"}
    if annotation in _SCALARS:
        return {"type": _SCALARS[annotation]}
    if typing.is_typeddict(annotation):
        return {"$ref": f"{_REF}{annotation.__name__}"}
    raise AssertionError(f"no JSON schema for {annotation!r}")


def _comparable(schema: dict[str, Any]) -> dict[str, Any]:
    """What of a property's schema a type can say: its type(s), enum, items and reference."""
    kept: dict[str, Any] = {}
    if "type" in schema:
        kept["type"] = sorted(schema["type"]) if isinstance(schema["type"], list) else schema["type"]
    if "enum" in schema:
        kept["enum"] = sorted(schema["enum"])
    if "$ref" in schema:
        kept["$ref"] = schema["$ref"]
    if "oneOf" in schema:
        kept["oneOf"] = sorted(ref["$ref"] for ref in schema["oneOf"])
    if "items" in schema:
        items = schema["items"]
        # An item schema that only says "an object": the shape keeps it a JsonObject.
        kept["items"] = _comparable(items) if set(items) - {"description"} else {}
        if kept["items"] == {"type": "object"} and "properties" not in items:
            kept["items"] = {"type": "object"}
    if kept.get("type") == "string" and "enum" not in kept:
        kept.pop("enum", None)
    return kept


def _type_of(name: str, field: str) -> dict[str, Any]:
    annotation = _hints(name)[field]
    schema = _comparable(_schema_of(annotation))
    # A string with an enum of one schema that allows null too: Literal[...] | None.
    if isinstance(schema.get("type"), list):
        schema["type"] = sorted(schema["type"])
    return schema


@pytest.mark.parametrize("name", _OBJECT_SCHEMAS)
def test_every_object_schema_has_a_typed_dict_with_its_fields(name: str) -> None:
    shape = getattr(shapes, name, None)
    assert shape is not None and typing.is_typeddict(shape), f"journal_bridge.model.shapes lacks {name}"
    schema = SCHEMAS[name]
    assert set(shape.__annotations__) | set(_hints(name)) == set(schema["properties"])
    assert set(shape.__required_keys__) == set(schema.get("required", []))


@pytest.mark.parametrize("name", _OBJECT_SCHEMAS)
def test_each_field_has_the_type_of_its_schema(name: str) -> None:
    properties = SCHEMAS[name]["properties"]
    mismatched = {
        field: (_type_of(name, field), _comparable(properties[field]))
        for field in properties
        if _type_of(name, field) != _comparable(properties[field])
    }
    assert mismatched == {}


def test_a_history_item_is_one_of_its_three_kinds() -> None:
    members = {member.__name__ for member in get_args(shapes.JournalHistoryItem)}
    refs = {ref["$ref"].removeprefix(_REF) for ref in SCHEMAS["JournalHistoryItem"]["oneOf"]}
    assert members == refs
    # Each kind's `type` holds exactly the values the discriminator maps to it.
    mapping = SCHEMAS["JournalHistoryItem"]["discriminator"]["mapping"]
    for member in get_args(shapes.JournalHistoryItem):
        kinds = set(get_args(_hints(member.__name__)["type"]))
        assert kinds == {kind for kind, ref in mapping.items() if ref == f"{_REF}{member.__name__}"}


def test_the_comparison_sees_a_wrong_type_a_missing_field_and_a_wrong_required_one() -> None:
    class JournalBranchAlternative(typing.TypedDict):
        run_id: str
        seq: int | None

    hints = typing.get_type_hints(JournalBranchAlternative)
    assert _comparable(_schema_of(hints["run_id"])) != _comparable(SCHEMAS["JournalBranchAlternative"]["properties"]["run_id"])
    assert _comparable(_schema_of(hints["seq"])) == _comparable(SCHEMAS["JournalBranchAlternative"]["properties"]["seq"])

    class Partial(typing.TypedDict, total=False):
        run_id: str | None

    assert set(Partial.__annotations__) != set(SCHEMAS["JournalBranchAlternative"]["properties"])
    assert set(Partial.__required_keys__) != set(SCHEMAS["JournalBranchAlternative"]["required"])


def test_every_shape_is_a_schema() -> None:
    """No shape here that the served document does not name (StoredThread is
    the store's part of JournalThread; JsonObject and JournalHistoryItem are aliases)."""
    declared = {
        name for name in shapes.__all__ if typing.is_typeddict(getattr(shapes, name))
    } - {"StoredThread"}
    assert declared == set(_OBJECT_SCHEMAS)


async def test_a_real_health_report_is_valid_against_its_schema(tmp_path: Path) -> None:
    """`Journal.health()` holds only the counters `JournalHealth` lists, each of its type:
    before the bridge starts, and with a bridge on a real SQLite journal that wrote a record."""
    from jsonschema import Draft202012Validator

    from journal_bridge.delivery.bridge import Bridge
    from journal_bridge.model.envelope import make_event
    from journal_bridge.server import Journal
    from journal_bridge.store import open_store
    from journal_bridge.web.openapi import with_components

    validator = Draft202012Validator(
        {**with_components({}), "$ref": "#/components/schemas/JournalHealth"}
    )
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    journal = Journal(url, spool_dir=tmp_path)
    assert list(validator.iter_errors(journal.health())) == []
    async with open_store(url) as store:
        bridge = Bridge(store, lambda: None, spool=tmp_path / "spool.db")
        journal.bridge = bridge
        await bridge.start()
        try:
            await bridge.write([make_event(thread_id="t", run_id="r", event_type="run.start", content={})])
            await bridge.drain()
            report = journal.health()
        finally:
            await bridge.stop()
    assert report["records_written"] == 1 and report["status"] == "ok"
    assert list(validator.iter_errors(report)) == []
