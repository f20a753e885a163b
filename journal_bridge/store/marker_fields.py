"""The schema step that gives markers journaled before they carried them the
fields of deer-flow's summarize-marker design (`records.marker_fields`).

A `middleware:summarize` record whose content holds `changes` gets, where they
are missing, `role` and `content` (the summary of `changes`, "" when it has
none) in its content and the counts `changes` holds as integers
(`records.MARKER_COUNTS`) in its metadata. Nothing else of a row changes, and
a field a row has already is kept: the step only derives what `changes` says,
so running it on rows written since leaves them as they are.

One step per table layout and dialect: journal-bridge's tables keep content and
metadata as JSON (SQLite text, PostgreSQL `jsonb`); deer-flow's `run_events`
keeps an object's content as JSON text flagged `content_is_dict` in
`event_metadata` (SQLite JSON text, PostgreSQL `json`). `{events}` is the
table's name, filled in per store.
"""

from __future__ import annotations

from journal_bridge.model.envelope import MIDDLEWARE_SUMMARIZE
from journal_bridge.model.records import MARKER_COUNTS, SUMMARY_ROLE

__all__ = ["postgres_step", "sqlite_step"]

_MARKER = f"event_type = '{MIDDLEWARE_SUMMARIZE}'"


def sqlite_step(*, metadata: str, flagged: bool) -> tuple[str, ...]:
    """The step on SQLite; `metadata` is the metadata column, `flagged` whether
    an object's content is marked so in it (deer-flow's layout)."""
    guard = f"json_extract({metadata}, '$.content_is_dict') AND " if flagged else ""

    def where(condition: str) -> str:
        # CASE, not AND: the content is read as JSON only once the guard holds.
        return f"{_MARKER} AND CASE WHEN {guard}json_valid(content) THEN {condition} ELSE 0 END"

    changes = "json_type(content, '$.changes') = 'object'"
    summary = (
        "CASE WHEN json_type(content, '$.changes.summary') = 'text'"
        " THEN json_extract(content, '$.changes.summary') ELSE '' END"
    )
    statements = [
        f"""UPDATE {{events}} SET content = json_insert(content,
            '$.role', '{SUMMARY_ROLE}', '$.content', {summary})
        WHERE {where(changes)}""",
    ]
    statements += [
        f"""UPDATE {{events}} SET {metadata} = json_insert({metadata},
            '$.{count}', json_extract(content, '$.changes.{count}'))
        WHERE {where(f"{changes} AND json_type(content, '$.changes.{count}') = 'integer'")}"""
        for count in MARKER_COUNTS
    ]
    return tuple(statements)


def postgres_step(*, metadata: str, in_text: bool) -> tuple[str, ...]:
    """The step on PostgreSQL; `metadata` is the metadata column, `in_text`
    whether content is JSON text flagged in a `json` metadata column
    (deer-flow's layout) rather than `jsonb`."""
    content = "content::jsonb" if in_text else "content"
    meta = f"{metadata}::jsonb" if in_text else metadata
    guard = f"{metadata} ->> 'content_is_dict' = 'true'" if in_text else "TRUE"

    def where(condition: str) -> str:
        # CASE, not AND: the text is read as JSON only once the flag says it is an object.
        return f"{_MARKER} AND CASE WHEN {guard} THEN {condition} ELSE FALSE END"

    def at(*path: str) -> str:
        # `{{` survives the statement's formatting with the table names as `{`.
        return f"{content} #> '{{{{{','.join(path)}}}}}'"

    changes = f"jsonb_typeof({at('changes')}) = 'object'"
    summary = (
        f"CASE WHEN jsonb_typeof({at('changes', 'summary')}) = 'string'"
        f" THEN {at('changes', 'summary')} ELSE to_jsonb(''::text) END"
    )
    # `||` keeps the right side's value of a key both sides have: the row's own.
    added = f"jsonb_build_object('role', '{SUMMARY_ROLE}', 'content', {summary}) || {content}"
    statements = [
        f"UPDATE {{events}} SET content = ({added}){'::text' if in_text else ''}"
        f" WHERE {where(changes)}",
    ]
    for count in MARKER_COUNTS:
        value = at("changes", count)
        merged = f"jsonb_build_object('{count}', {value}) || {meta}"
        integer = f"jsonb_typeof({value}) = 'number' AND {value} #>> '{{{{}}}}' ~ '^[0-9]+$'"
        statements.append(
            f"UPDATE {{events}} SET {metadata} = ({merged}){'::json' if in_text else ''}"
            f" WHERE {where(f'{changes} AND {integer}')}"
        )
    return tuple(statements)
